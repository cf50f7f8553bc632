"""Compare matrix.yaml with what its torch sources publish: new minors, patch releases and Pythons, yanked releases.

The comparison is pure: it takes the matrix and the offers read from the sources, and returns findings,
each saying what matrix.yaml would need and, where the change is mechanical, the edit that makes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from packaging.version import Version

from torch_buildmatrix.errors import UserError
from torch_buildmatrix.model.cells import make_cell, rule_matches
from torch_buildmatrix.model.matrix import PIP_CONFIG, Matrix, TorchRelease, WheelSource
from torch_buildmatrix.model.options import VARIANT_NAME
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import PublishedWheel, Registry
from torch_buildmatrix.vocab import REGISTRY_VARIANT, FindingKind, WheelSourceKind


@dataclass(frozen=True)
class Offer:
    """One torch release (public version and variant) that a source publishes for this machine."""

    version: Version
    variant: str
    source: WheelSource
    pythons: frozenset[Python]  # Pythons of its wheels that are not yanked
    yanked: str | None = None  # every wheel yanked: the reason ("" when none was given)

    @property
    def minor(self) -> tuple[int, int]:
        return (self.version.major, self.version.minor)

    def describe(self) -> str:
        return f"torch {self.version} ({self.variant}, {self.source.describe()})"


def variant_of(version: Version) -> str | None:
    """The build a wheel's local label names: none is the registry's (CUDA) build, +cpu, +cu121, +rocm6.2, +xpu name
    their variant; a label that is no variant name is left out."""
    label = version.local
    if label is None:
        return REGISTRY_VARIANT
    return label if VARIANT_NAME.fullmatch(label) else None


def offers_from_wheels(source: WheelSource, wheels: Iterable[PublishedWheel]) -> list[Offer]:
    """Group a source's wheels into releases; pre-releases and builds of unknown variants are left out."""
    groups: dict[tuple[Version, str], list[PublishedWheel]] = defaultdict(list)
    for wheel in wheels:
        variant = variant_of(wheel.version)
        public = Version(wheel.version.public)
        if variant is None or public.is_prerelease or public.is_devrelease:
            continue
        groups[(public, variant)].append(wheel)
    out = []
    for (version, variant), group in sorted(groups.items()):
        live = frozenset(w.python for w in group if w.yanked is None)
        yanked = None if live else next((w.yanked for w in group if w.yanked), "")
        out.append(Offer(version, variant, source, live or frozenset(w.python for w in group), yanked))
    return out


@dataclass(frozen=True)
class SetVersion:
    """Edit: the torch entry listing `old` (of this variant) lists `new` instead; patches and Pythons stay."""

    old: Version
    variant: str
    new: Version


@dataclass(frozen=True)
class AddRelease:
    """Edit: a new torch entry as a coverage cell (one Python, the newest SDK version), with its nearest release's
    series."""

    version: Version
    variant: str
    wheels: WheelSource
    python: Python
    patches: tuple[str, ...]
    nearest: Version | None
    exclude_sdks: tuple[str, ...]  # SDK versions that need an exclude rule so only the newest builds


Edit = SetVersion | AddRelease


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    subject: str  # what was found, e.g. "torch 2.16.0 (cuda, registry)"
    need: str  # what matrix.yaml would need
    edit: Edit | None = None  # None: a person decides (outdated --apply leaves it)


@dataclass(frozen=True)
class Comparison:
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()  # sources that could not be read, releases a source no longer offers

    def of_kind(self, kind: FindingKind) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    @property
    def edits(self) -> list[Edit]:
        return [f.edit for f in self.findings if f.edit is not None]


@dataclass
class Sources:
    """What every watched source offers, and the sources that could not be read (with why)."""

    offers: list[Offer] = field(default_factory=list)
    unreadable: dict[WheelSource, str] = field(default_factory=dict)


def read_sources(matrix: Matrix, registry: Registry) -> Sources:
    """Ask the registry, pip's configured find-links (if any) and every other source matrix.yaml names."""
    watched = [WheelSource(WheelSourceKind.REGISTRY), WheelSource(WheelSourceKind.FIND_LINKS, PIP_CONFIG)]
    watched += [r.wheels for r in matrix.torch if r.wheels not in watched]
    sources = Sources()
    for source in watched:
        try:
            sources.offers += offers_from_wheels(source, registry.published(source))
        except UserError as exc:
            if source.kind == "registry":
                raise  # without the registry there is nothing to compare with: say so rather than "up to date"
            sources.unreadable[source] = str(exc)
    return sources


def compare(matrix: Matrix, sources: Sources, variants: frozenset[str] | None = None) -> Comparison:
    """Everything matrix.yaml lacks compared with the sources; `variants` narrows the new minors considered."""
    findings: list[Finding] = []
    notes: list[str] = []
    for release in matrix.torch:
        if release.wheels in sources.unreadable:
            notes.append(
                f"torch {release.version} ({release.variant}): not checked, {release.wheels.describe()} "
                f"unreadable: {sources.unreadable[release.wheels]}"
            )
            continue
        same = [
            o
            for o in sources.offers
            if o.source == release.wheels and o.variant == release.variant and o.minor == _minor(release.version)
        ]
        findings += _patch_and_yank(release, same, notes)
    findings += _new_pythons(matrix, sources)
    findings += _new_minors(matrix, sources, variants)
    return Comparison(tuple(findings), tuple(dict.fromkeys(notes)))


def _minor(version: Version) -> tuple[int, int]:
    return (version.major, version.minor)


def _patch_and_yank(release: TorchRelease, same: list[Offer], notes: list[str]) -> list[Finding]:
    out = []
    label = f"torch {release.version} ({release.variant})"
    listed = next((o for o in same if o.version == release.version), None)
    live = [o for o in same if o.yanked is None]
    newer = [o for o in live if o.version > release.version]
    if newer:
        best = max(newer, key=lambda o: o.version)
        missing = sorted(set(release.python or ()) - best.pythons)
        if missing:
            out.append(
                Finding(
                    FindingKind.NEW_PATCH,
                    best.describe(),
                    f"torch {release.version} -> {best.version}, but {best.version} publishes no wheel for Python "
                    f"{', '.join(map(str, missing))} that the entry names; change its python: by hand",
                )
            )
        else:
            out.append(
                Finding(
                    FindingKind.NEW_PATCH,
                    best.describe(),
                    f'the torch entry "{release.version}" becomes "{best.version}" (same patches and Pythons)',
                    SetVersion(release.version, release.variant, best.version),
                )
            )
    if listed is None:
        notes.append(f"{label}: {release.wheels.describe()} does not offer this release")
    elif listed.yanked is not None:
        reason = f" ({listed.yanked})" if listed.yanked else ""
        older = [o for o in live if o.version < release.version]
        if newer:
            need = f"covered by the move to {max(o.version for o in newer)} above"
            edit: Edit | None = None
        elif older:
            target = max(older, key=lambda o: o.version)
            need = f'the torch entry "{release.version}" becomes "{target.version}" (newest of the minor not yanked)'
            edit = SetVersion(release.version, release.variant, target.version)
        else:
            need = f"no release of {release.minor} is left unyanked: drop the entry, or keep it knowingly"
            edit = None
        out.append(Finding(FindingKind.YANKED, f"{label} is yanked{reason}", need, edit))
    return out


def _new_pythons(matrix: Matrix, sources: Sources) -> list[Finding]:
    """Pythons newer than matrix.yaml's newest of their kind: a free-threaded one only once the matrix ships one
    (free-threaded Pythons are chosen like the others, but a matrix without any has not chosen to build them)."""
    newest_shipped = {kind: max((p for p in matrix.python if p.free_threaded == kind), default=None) for kind in (0, 1)}
    publishers: dict[Python, list[TorchRelease]] = defaultdict(list)
    for release in matrix.torch:
        offer = next(
            (
                o
                for o in sources.offers
                if o.source == release.wheels and o.variant == release.variant and o.version == release.version
            ),
            None,
        )
        if offer is None:
            continue
        for python in offer.pythons:
            newest = newest_shipped[python.free_threaded]
            if newest is not None and python.version > newest.version:
                publishers[python].append(release)
    out = []
    for python, releases in sorted(publishers.items()):
        gains = [
            cell.id
            for r in releases
            if r.python is None
            for cell in (make_cell(matrix, r, python, sdk) for sdk in matrix.sdk_versions)
            if not any(rule_matches(rule, cell) for rule in matrix.exclude)
        ]
        names = ", ".join(f"{r.version} ({r.variant})" for r in releases)
        need = f'python: add "{python}" (a CPython {python} interpreter on every builder, and in an image for Docker)'
        need += f"; new cells: {', '.join(gains)}" if gains else "; no new cell unless an entry names it in its python:"
        out.append(Finding(FindingKind.NEW_PYTHON, f"Python {python}, published by torch {names}", need))
    return out


def _new_minors(matrix: Matrix, sources: Sources, variants: frozenset[str] | None) -> list[Finding]:
    listed = {_minor(r.version) for r in matrix.torch}
    oldest = min(listed)
    by_minor: dict[tuple[int, int], list[Offer]] = defaultdict(list)
    for offer in sources.offers:
        if offer.yanked is None and offer.minor not in listed and offer.minor > oldest:
            by_minor[offer.minor].append(offer)
    out = []
    for _, offers in sorted(by_minor.items()):
        wanted = [o for o in offers if variants is None or o.variant in variants]
        others = sorted({f"{o.variant} build from {o.source.describe()}" for o in offers if o not in wanted})
        if not wanted:
            continue
        # The registry's build is the one users install; a find-links build comes in only when asked for by variant.
        best = max(wanted, key=lambda o: (o.source.kind == WheelSourceKind.REGISTRY, o.version))
        also = sorted({f"{o.variant} build from {o.source.describe()}" for o in wanted if o.source != best.source})
        out.append(_coverage_finding(matrix, best, also + others))
    return out


def _coverage_finding(matrix: Matrix, offer: Offer, also: Sequence[str]) -> Finding:
    shipped = sorted(set(matrix.python) & offer.pythons)
    subject = offer.describe() + (f"; also offered: {', '.join(also)}" if also else "")
    if not shipped:
        published = ", ".join(str(p) for p in sorted(offer.pythons))
        return Finding(
            FindingKind.NEW_MINOR,
            subject,
            f"torch {offer.version} publishes wheels only for Python {published}, none of matrix.yaml's python:; "
            "add one of them first",
        )
    python = max(shipped, key=lambda p: (not p.free_threaded, p))  # a coverage cell runs on a Python with the GIL
    newest = max(matrix.sdk.versions, key=lambda v: v.version) if matrix.sdk is not None else None
    nearest = min(
        matrix.torch,
        key=lambda r: (abs(_rank(_minor(r.version)) - _rank(offer.minor)), -_rank(_minor(r.version))),
    )
    probe = TorchRelease(offer.version, offer.variant, offer.source, (python,), nearest.patches)
    sdk = matrix.sdk
    excluded = tuple(
        sdk.short(v)
        for v in (sdk.versions if sdk is not None else ())
        if sdk is not None
        and v != newest
        and not any(rule_matches(rule, make_cell(matrix, probe, python, v)) for rule in matrix.exclude)
    )
    edit = AddRelease(offer.version, offer.variant, offer.source, python, nearest.patches, nearest.version, excluded)
    series = ", ".join(nearest.patches) or "none"
    with_sdk = f", {sdk.name} {sdk.short(newest)}" if sdk is not None and newest is not None else ""
    need = (
        f'a torch entry "{offer.version}" as a coverage cell (Python {python}{with_sdk}'
        + (f"; exclude {sdk.name} {', '.join(excluded)}" if sdk is not None and excluded else "")
        + f") with the shim series of the nearest release {nearest.version}: {series}"
    )
    return Finding(FindingKind.NEW_MINOR, subject, need, edit)


def _rank(minor: tuple[int, int]) -> int:
    return minor[0] * 1000 + minor[1]

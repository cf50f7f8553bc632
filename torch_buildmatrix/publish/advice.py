"""The install advisor the page and the Markdown share: for each torch release and Python a user may have, the cell
to install (or the nearest one built), its commands, and the words that explain the choice."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from torch_buildmatrix.builder.records.model import SmokeCounts, WheelRecord
from torch_buildmatrix.model.contract import TorchPin
from torch_buildmatrix.model.pythons import Python, installs_on
from torch_buildmatrix.publish.table import SITE_PLACEHOLDER, CompatCell, CompatTable, Release
from torch_buildmatrix.util.wheelname import parse_wheel
from torch_buildmatrix.vocab import Status, TierStatus


@dataclass(frozen=True)
class InstallChoice:
    """What the page offers for one selector choice: the exact cell, or the nearest one that was built."""

    release: str
    python: str
    sdk: str  # the SDK column chosen (its id part); "" without an SDK
    cell: str | None  # id of the cell whose wheel is installed; None: nothing is installable
    exact: bool
    note: str
    index_command: str = ""  # exact pins from the release's own index (squat-proof with pip and uv)
    find_links_command: str = ""  # the same pins from the release's find-links page
    release_index_command: str = ""  # no pin: the release's own index picks the wheel for the user's Python


@dataclass(frozen=True)
class InstallCommands:
    """The ways to install one cell's wheels (pip syntax; `uv pip install` takes the same arguments)."""

    release_index: str  # plain `pip install <plugin>` from the release's own index: keeps the installed torch
    pinned: str  # exact pins; the versions carry local labels, which the public index cannot host
    find_links: str  # the same pins from the release's find-links page


@lru_cache(maxsize=256)
def _python(text: str) -> Python:
    return Python.parse(text)


def _python_distance(a: str, b: str) -> tuple[int, bool]:
    """How far apart two Pythons of the table are: their minors, then whether one is free-threaded and the other not."""
    pa, pb = _python(a), _python(b)
    return abs(pa.minor - pb.minor) + 100 * abs(pa.major - pb.major), pa.free_threaded != pb.free_threaded


def release_index_url(minor: str, site: str = SITE_PLACEHOLDER) -> str:
    return f"{site}/torch{minor}/simple/"


# Every install command we give is binary-only, for every distribution it installs: never the plugin's sdist from the
# public index (a Python our index has no wheel for), never a dependency built on the user's machine.
ONLY_BINARY = "--only-binary=:all:"


def release_index_command(table: CompatTable, minor: str, site: str = SITE_PLACEHOLDER) -> str:
    """Installs the plugin wheel for the installed torch release and the running Python, and never touches torch."""
    return f"pip install {table.plugin} {ONLY_BINARY} --extra-index-url {release_index_url(minor, site)}"


def any_torch_command(table: CompatTable, site: str = SITE_PLACEHOLDER) -> str | None:
    """One line for whatever torch is installed, from the all-releases index: restating the installed torch as a
    requirement makes pip and uv backtrack to the plugin wheel built for it instead of upgrading torch.

    None when the wheels carry no torch pin (check.torch-pin: none): then every release's wheel admits any torch, the
    installer takes the highest label, and a user of an older torch would get a wheel built for a newer one.

    The version is the installed distribution's, which is what resolvers compare: torch.__version__ can differ
    (2.4.1+cu121 for the registry's 2.4.1), and `pip freeze` prints a URL for a torch installed from a file.
    """
    if table.torch_pin == TorchPin.NONE:
        return None
    installed = "$(python -c \"from importlib.metadata import version; print(version('torch'))\")"
    return f'pip install {table.plugin} "torch=={installed}" {ONLY_BINARY} --extra-index-url {site}/simple/'


def install_commands(table: CompatTable, cell: CompatCell, site: str = SITE_PLACEHOLDER) -> InstallCommands:
    """Commands that install this cell's wheels, never an sdist; the pinned ones can only ever install its wheels."""
    pins = cell.requirement
    if table.sdk is not None and table.sdk.publishes_wheels:
        assert cell.sdk_wheel is not None
        sdk_version = parse_wheel(cell.sdk_wheel.filename)[1]
        pins += f" {table.sdk.distribution}=={sdk_version}"
    minor = table.release(cell.release).minor
    return InstallCommands(
        release_index=release_index_command(table, minor, site),
        pinned=f"pip install {pins} {ONLY_BINARY} --extra-index-url {release_index_url(minor, site)}",
        find_links=f"pip install {pins} {ONLY_BINARY} --find-links {site}/torch{minor}/",
    )


class Installable:
    """The table's installable cells, indexed by SDK column and release position, so that finding the nearest one for
    every selector choice stays linear in the cells (all_choices asks once per release x Python x SDK version)."""

    def __init__(self, table: CompatTable) -> None:
        self.order = {r.key: i for i, r in enumerate(table.releases)}
        self.by_sdk: dict[str, dict[int, list[CompatCell]]] = {}
        self.by_release: dict[int, list[CompatCell]] = {}
        self.wheels: dict[tuple[str, str], set[WheelRecord]] = {}  # (release, SDK column) -> its published wheels
        self.installs: dict[tuple[str, str], bool] = {}  # (wheel filename, Python) -> whether its tags admit it
        for cell in table.cells:
            if cell.installable:
                assert cell.wheel is not None
                self.wheels.setdefault((cell.release, cell.sdk), set()).add(cell.wheel)
                position = self.order[cell.release]
                self.by_sdk.setdefault(cell.sdk, {}).setdefault(position, []).append(cell)
                self.by_release.setdefault(position, []).append(cell)

    def nearest(self, release: str, python: str, sdk: str = "") -> CompatCell | None:
        """Same SDK version first (the machine's SDK is hardest to change), then the closest torch release, then the
        closest Python (the newer one on a tie), then the cell id."""
        pool = self.by_sdk.get(sdk) or self.by_release
        if not pool:
            return None
        wanted = self.order[release]
        for distance in range(len(self.order) + 1):
            found = pool.get(wanted - distance, []) + (pool.get(wanted + distance, []) if distance else [])
            if found:
                return min(
                    found,
                    key=lambda c: (_python_distance(c.python, python), -_python(c.python).minor, c.id),
                )
        return None

    def refusing_wheel(self, release: str, python: str, sdk: str = "") -> WheelRecord | None:
        """The release's published plugin wheel when every one it has in this SDK column refuses `python` by its tags
        (a cp313-cp313 or cp39-abi3 wheel on a free-threaded 3.13t: abi3 does not cover free-threaded builds); None
        when one installs there, or the release has none yet."""
        wheels = self.wheels.get((release, sdk))
        if not wheels or any(self.wheel_installs(w.filename, python) for w in wheels):
            return None
        return min(wheels, key=lambda w: w.filename)

    def wheel_installs(self, filename: str, python: str) -> bool:
        """Whether a wheel's tags admit `python`, asked once per wheel and Python (all_choices asks per choice)."""
        key = (filename, python)
        if key not in self.installs:
            self.installs[key] = installs_on(parse_wheel(filename)[3], _python(python))
        return self.installs[key]


def nearest_cell(table: CompatTable, release: str, python: str, sdk: str = "") -> CompatCell | None:
    """The installable cell closest to the choice (Installable.nearest)."""
    return Installable(table).nearest(release, python, sdk)


def _choice_words(table: CompatTable, release: Release, python: str, sdk: str) -> str:
    """How a note names a choice: torch 2.4.1, Python 3.11[, driver 2.2]."""
    with_sdk = f", {table.sdk.name} {table.sdk_short(sdk)}" if table.sdk is not None else ""
    return f"torch {release.version}, Python {python}{with_sdk}"


def install_choice(
    table: CompatTable,
    release: str,
    python: str,
    sdk: str = "",
    site: str = SITE_PLACEHOLDER,
    *,
    installable: Installable | None = None,
) -> InstallChoice:
    exact = table.cell(release, python, sdk)
    rel = table.release(release)
    if exact is not None and exact.installable:
        commands = install_commands(table, exact, site)
        return InstallChoice(
            release,
            python,
            sdk,
            exact.id,
            True,
            f"tested: {smoke_summary(exact.smoke)}",
            commands.pinned,
            commands.find_links,
            commands.release_index,
        )
    if exact is None:
        why = (
            f"torch {rel.version} publishes no wheel for Python {python}"
            if python not in rel.pythons
            else "excluded by matrix.yaml"
        )
        reason = f"not in the matrix ({why})"
    else:
        reason = str(Status.NOT_BUILT) if exact.status == Status.NOT_BUILT else f"failed in step {exact.failed_step}"
    installable = installable or Installable(table)
    near = installable.nearest(release, python, sdk)
    refused = installable.refusing_wheel(release, python, sdk)
    if refused is not None:
        # Any command would fail on this Python (or install a wheel built for another): none is offered, only why.
        tags = ", ".join(sorted(map(str, parse_wheel(refused.filename)[3])))
        chosen = _python(python)
        kind = f"a free-threaded Python {python}" if chosen.free_threaded else f"Python {python}"
        note = (
            f"{_choice_words(table, rel, python, sdk)}: {reason}. Refused: torch {rel.version}'s wheel "
            f"{refused.filename} ({tags}) does not install on {kind} ({chosen.tag}); pip and uv refuse it there"
        )
        if near is not None:
            nearest = _choice_words(table, table.release(near.release), near.python, near.sdk)
            note += f". Nearest supported choice: {nearest}"
        return InstallChoice(release, python, sdk, None, False, note)
    if near is None:
        note = f"{_choice_words(table, rel, python, sdk)}: {reason}; no wheel is published yet"
        return InstallChoice(release, python, sdk, None, False, note)
    nrel = table.release(near.release)
    note = (
        f"{_choice_words(table, rel, python, sdk)}: {reason}. "
        f"Nearest supported choice: {_choice_words(table, nrel, near.python, near.sdk)}"
    )
    if table.torch_pin == TorchPin.NONE and near.release != release:
        # The wheels name no torch: installed beside this choice's torch, the other release's wheel would not import
        # (undefined symbols), and nothing would bring its torch. No command; the note says what it takes.
        note += f"; its wheels pin no torch and import only beside torch {nrel.version}: choose that release"
        return InstallChoice(release, python, sdk, None, False, note)
    commands = install_commands(table, near, site)
    return InstallChoice(
        release,
        python,
        sdk,
        near.id,
        False,
        note,
        commands.pinned,
        commands.find_links,
        commands.release_index,
    )


def all_choices(table: CompatTable, site: str = SITE_PLACEHOLDER) -> list[InstallChoice]:
    installable = Installable(table)
    return [
        install_choice(table, r.key, p, column.tag, site, installable=installable)
        for r in table.releases
        for p in table.pythons
        for column in table.columns
    ]


def free_threaded_note(table: CompatTable) -> str:
    """What a free-threaded column means ('' when the table has none): the page and the docs say it once."""
    columns = [p for p in table.pythons if _python(p).free_threaded]
    if not columns:
        return ""
    named = ", ".join(f"Python {p}" for p in columns)
    return (
        f"{named}: CPython's free-threaded build (no GIL), a column of its own: a cell there tests the wheel on that "
        "interpreter, and a release's wheel that does not install there is refused, never offered."
    )


def partial_words(table: CompatTable) -> str:
    """What the partial feature mark means: only with the SDK versions named (a project without an SDK has none)."""
    return f"only with the {table.sdk.name}s named" if table.sdk else "only on some of its cells"


def deep_summary(table: CompatTable, cell: CompatCell) -> str:
    """The build's deep tier, for one of its cells: "deep ✓ 120 (10 skipped) on Python 3.11", "deep not run",
    "deep ✗"."""
    deep = cell.deep
    if deep is None:
        return ""
    if deep.status == TierStatus.PASSED:
        text = f"deep ✓ {smoke_mark(deep.smoke)}" if deep.smoke else "deep ✓"
    elif deep.status == TierStatus.FAILED:
        text = "deep ✗"
    else:
        text = "deep not run"
    where = table.deep_where(cell)
    return f"{text} on {where}" if where else text


def smoke_mark(smoke: SmokeCounts) -> str:
    """A passed cell's counts in the table: the tests that passed, and those the suite skipped apart ("460 (5
    skipped)"); never passed/total with the skipped in the total, which read like failures ("✓ 24/36")."""
    ran = smoke.passed + smoke.failed + smoke.errors
    text = str(smoke.passed) if ran == smoke.passed else f"{smoke.passed}/{ran}"
    return f"{text} ({smoke.skipped} skipped)" if smoke.skipped else text


def smoke_summary(smoke: SmokeCounts | None) -> str:
    if smoke is None:
        return "no smoke counts"
    parts = [f"{smoke.passed} passed"] + [
        f"{n} {what}"
        for n, what in ((smoke.failed, "failed"), (smoke.errors, "errors"), (smoke.skipped, "skipped"))
        if n
    ]
    return ", ".join(parts)

"""The compatibility table (CompatTable): the matrix's cells joined with their results, as pure data.

Everything published about compatibility (docs/compatibility.md, README's table, the static site and its
JSON, the wheel index) is rendered from one CompatTable. The table is also committed as
docs/compatibility.json, so the docs re-render identically in a clean clone that has no wheels/ folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from buildmatrix.builder.results import CellResult, SmokeCounts, WheelRecord
from buildmatrix.errors import MatrixError
from buildmatrix.model.cells import Cell, CellKey, expand
from buildmatrix.model.matrix import Matrix, TorchRelease
from buildmatrix.model.vocab import FailureClass, FeatureState, Status, Variant

COMPAT_SCHEMA_VERSION = 1
SITE_PLACEHOLDER = "{site}"


def release_key(minor: str, variant: Variant) -> str:
    """The table's key of a torch release, e.g. torch2.13-cpu."""
    return f"torch{minor}-{variant}"


@dataclass(frozen=True)
class CompatCell:
    """One cell of the table: its identity, and what its current record says (not built: none)."""

    key: CellKey
    status: Status  # passed | failed | not built
    requirement: str  # torch-emu==0.1.0+torch.2.13.drv.2
    wheel: WheelRecord | None = None
    driver_wheel: WheelRecord | None = None
    smoke: SmokeCounts | None = None
    failed_step: str | None = None
    error: str | None = None
    log: str | None = None  # relative to the wheels directory
    # Of a failed cell: "deterministic", "transient: <cause>" or "interrupted"; None for records that predate classes
    # (and then absent from the JSON, so docs of such records stay byte-identical).
    failure: str | None = None

    @property
    def id(self) -> str:
        return self.key.id

    @property
    def release(self) -> str:
        """Key of its Release, e.g. torch2.13-cpu."""
        return release_key(self.key.torch_minor, self.key.variant)

    @property
    def python(self) -> str:
        return self.key.python_minor

    @property
    def driver(self) -> int:
        """Driver API major."""
        return self.key.driver_major

    @property
    def installable(self) -> bool:
        return self.status == Status.PASSED and self.wheel is not None and self.driver_wheel is not None

    def to_dict(self) -> dict[str, Any]:
        """The table names a cell by its release key, Python and driver column; from_dict joins them back."""
        data = asdict(self)
        del data["key"]
        if data["failure"] is None:
            del data["failure"]  # records that predate failure classes: docs stay byte-identical
        return {"id": self.id, "release": self.release, "python": self.python, "driver": self.driver, **data}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], releases: Mapping[str, Release], drivers: Mapping[int, DriverColumn]
    ) -> CompatCell:
        release, column = releases[data["release"]], drivers[data["driver"]]
        key = CellKey.from_dict(
            {
                "id": data["id"],
                "torch": release.version,
                "variant": release.variant,
                "python": data["python"],
                "driver": column.api,
            }
        )
        return cls(
            key,
            Status(data["status"]),
            data["requirement"],
            wheel=WheelRecord.from_dict(data.get("wheel")),
            driver_wheel=WheelRecord.from_dict(data.get("driver_wheel")),
            smoke=SmokeCounts(**data["smoke"]) if data.get("smoke") else None,
            failed_step=data.get("failed_step"),
            error=data.get("error"),
            log=data.get("log"),
            failure=data.get("failure"),
        )


@dataclass(frozen=True)
class FeatureSupport:
    state: FeatureState
    note: str = ""  # which drivers have it (partial), or why not


@dataclass(frozen=True)
class Release:
    key: str
    minor: str
    version: str
    variant: Variant
    torch_requirement: str  # what pip installs: 2.13.0+cpu
    wheel_source: str  # registry | find-links ...
    pythons: tuple[str, ...]  # Pythons its published torch wheels support (the registry's answer)
    features: dict[str, FeatureSupport] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.version} ({self.variant})"


@dataclass(frozen=True)
class DriverColumn:
    major: int
    api: str


@dataclass(frozen=True)
class CompatTable:
    plugin: str
    plugin_version: str
    driver_distribution: str
    pythons: tuple[str, ...]
    drivers: tuple[DriverColumn, ...]
    releases: tuple[Release, ...]
    cells: tuple[CompatCell, ...]
    site_url: str = ""  # where the site is served; empty: unknown (docs show <site>, the page uses its own URL)
    schema_version: int = COMPAT_SCHEMA_VERSION

    def cell(self, release: str, python: str, driver: int) -> CompatCell | None:
        return next((c for c in self.cells if (c.release, c.python, c.driver) == (release, python, driver)), None)

    def grid_rows(self) -> Iterator[tuple[Release, DriverColumn, list[CompatCell | None]]]:
        """Rows release x driver of the table, one entry per Python (None: not in the matrix); a driver that a
        release has no cell for gives no row."""
        for release in self.releases:
            for driver in self.drivers:
                cells = [self.cell(release.key, python, driver.major) for python in self.pythons]
                if any(cells):
                    yield release, driver, cells

    def release(self, key: str) -> Release:
        return next(r for r in self.releases if r.key == key)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cells"] = [c.to_dict() for c in self.cells]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompatTable:
        if data.get("schema_version") != COMPAT_SCHEMA_VERSION:
            raise ValueError(f"compatibility schema {data.get('schema_version')} is not {COMPAT_SCHEMA_VERSION}")
        releases = tuple(
            Release(
                **{
                    **r,
                    "variant": Variant(r["variant"]),
                    "pythons": tuple(r["pythons"]),
                    "features": {
                        k: FeatureSupport(FeatureState(v["state"]), v.get("note", "")) for k, v in r["features"].items()
                    },
                }
            )
            for r in data["releases"]
        )
        drivers = tuple(DriverColumn(**d) for d in data["drivers"])
        by_key = {r.key: r for r in releases}
        by_major = {d.major: d for d in drivers}
        cells = tuple(CompatCell.from_dict(c, by_key, by_major) for c in data["cells"])
        return cls(
            plugin=data["plugin"],
            plugin_version=data["plugin_version"],
            driver_distribution=data["driver_distribution"],
            pythons=tuple(data["pythons"]),
            drivers=drivers,
            releases=releases,
            cells=cells,
            site_url=data.get("site_url", ""),
        )

    @classmethod
    def from_json(cls, text: str) -> CompatTable:
        return cls.from_dict(json.loads(text))


def _short(version: Version) -> str:
    return f"{version.major}.{version.minor}"


def _built_for(plugin_version: Version, result: CellResult) -> bool:
    """Whether the record is of this plugin version: its wheel's, else its inputs' (older records without either
    are taken as current, as before)."""
    try:
        if result.wheel is not None:
            return Version(parse_wheel_filename(result.wheel.filename)[1].public) == plugin_version
        recorded = result.inputs.get("plugin_version")
        return recorded is None or Version(str(recorded)) == plugin_version
    except (InvalidWheelFilename, InvalidVersion):
        return False


def compat_cell(matrix: Matrix, cell: Cell, result: CellResult | None) -> CompatCell:
    """The cell as the table shows it; `result` is the record for its key (a record of an older matrix has another
    key: another torch patch release or driver API version says nothing about this cell, nor does a record of
    another plugin version: its install command would name a wheel the matrix no longer makes)."""
    key = cell.key
    requirement = f"{matrix.plugin.distribution}=={matrix.plugin.version}+{key.local_version_label}"
    if result is None or result.cell != key or not _built_for(matrix.plugin.version, result):
        return CompatCell(key, Status.NOT_BUILT, requirement)
    wheel, driver = result.wheel, result.driver_wheel
    passed = result.status == Status.PASSED and wheel is not None and driver is not None
    return CompatCell(
        key,
        Status.PASSED if passed else Status.FAILED,
        requirement,
        wheel=wheel if passed else None,
        driver_wheel=driver if passed else None,
        smoke=result.smoke,
        failed_step=None if passed else (result.failed_step or "publish"),
        error=None if passed else result.error,
        log=result.log,
        failure=None if passed else failure_label(result),
    )


def failure_label(result: CellResult) -> str | None:
    """How a failed cell failed, for the docs and the page: None when its record predates failure classes."""
    if result.status == Status.INTERRUPTED:
        return "interrupted"
    if result.failure_class == FailureClass.TRANSIENT:
        return f"transient: {result.cause}" if result.cause else "transient"
    return result.failure_class


def outcome_state(outcome: str) -> str:
    """The state word of a smoke outcome: "passed: 612/640 ops" is passed, with its detail after the colon."""
    return outcome.split(":", 1)[0].strip()


def feature_support(outcomes: Mapping[int, str]) -> FeatureSupport:
    """Aggregate one feature's outcome over the cells of a release, keyed by driver major."""
    passed = sorted({d for d, o in outcomes.items() if outcome_state(o) == Status.PASSED})
    failed = sorted({d for d, o in outcomes.items() if o == Status.FAILED})
    unavailable = f"{FeatureState.NOT_AVAILABLE}:"
    missing = sorted({o.split(":", 1)[1].strip() for o in outcomes.values() if o.startswith(unavailable)})
    if failed:
        return FeatureSupport(FeatureState.FAILED, "driver " + ", ".join(map(str, failed)))
    # A passed outcome may carry a detail (the OpInfo pass counts): the table shows the details as the note.
    details = sorted(
        {o.split(":", 1)[1].strip() for o in outcomes.values() if outcome_state(o) == Status.PASSED and ":" in o}
    )
    if passed and len(passed) == len(set(outcomes)):
        return FeatureSupport(FeatureState.AVAILABLE, "; ".join(details))
    if passed:
        return FeatureSupport(FeatureState.PARTIAL, "driver " + ", ".join(map(str, passed)) + " only")
    return FeatureSupport(FeatureState.NOT_AVAILABLE, "; ".join(missing))


def release_features(cells: Iterable[tuple[CompatCell, CellResult]]) -> dict[str, FeatureSupport]:
    """Per feature, its outcome per driver major; a feature that passed for any Python counts as passed there."""
    by_feature: dict[str, dict[int, str]] = {}
    for cell, result in cells:
        for name, outcome in result.features.items():
            known = by_feature.setdefault(name, {})
            if outcome_state(known.get(cell.driver, "")) != Status.PASSED:
                known[cell.driver] = outcome
    return {name: feature_support(by_feature[name]) for name in sorted(by_feature)}


def build_table(
    matrix: Matrix,
    cells: list[Cell],
    results: Iterable[CellResult],
    available_pythons: Mapping[TorchRelease, set[Version]],
    site_url: str = "",
) -> CompatTable:
    """Join the expanded cells with their records; a cell without a (current) record is 'not built'."""
    by_key = {r.cell: r for r in results}
    compat = [compat_cell(matrix, cell, by_key.get(cell.key)) for cell in cells]
    releases = []
    for release in matrix.torch:
        key = release_key(release.minor, release.variant)
        measured = [(c, by_key[c.key]) for c in compat if c.release == key and c.status != Status.NOT_BUILT]
        releases.append(
            Release(
                key,
                release.minor,
                str(release.version),
                release.variant,
                release.requirement_version,
                release.wheels.describe(),
                tuple(_short(v) for v in sorted(available_pythons.get(release, set()))),
                release_features(measured),
            )
        )
    return CompatTable(
        plugin=matrix.plugin.distribution,
        plugin_version=str(matrix.plugin.version),
        driver_distribution=matrix.driver_distribution,
        pythons=tuple(_short(v) for v in matrix.python),
        drivers=tuple(DriverColumn(d.major, str(d.api)) for d in matrix.drivers),
        releases=tuple(releases),
        cells=tuple(compat),
        site_url=site_url,
    )


def available_from_table(table: CompatTable, matrix: Matrix) -> dict[TorchRelease, set[Version]]:
    """The registry's answers as recorded in the table, to re-expand the matrix offline."""
    recorded = {r.key: r for r in table.releases}
    return {
        rel: {Version(p) for p in recorded[release_key(rel.minor, rel.variant)].pythons}
        for rel in matrix.torch
        if release_key(rel.minor, rel.variant) in recorded
    }


def stale_problems(table: CompatTable, matrix: Matrix) -> list[str]:
    """Ways the recorded table no longer describes matrix.yaml (so docs/compatibility.json must be regenerated)."""
    problems = []
    if (table.plugin, table.plugin_version) != (matrix.plugin.distribution, str(matrix.plugin.version)):
        problems.append(
            f"plugin {table.plugin} {table.plugin_version} is now {matrix.plugin.distribution} {matrix.plugin.version}"
        )
    declared = [(release_key(r.minor, r.variant), str(r.version)) for r in matrix.torch]
    recorded = [(r.key, r.version) for r in table.releases]
    if declared != recorded:
        problems.append(f"torch releases {recorded} are now {declared}")
        return problems
    try:
        cells = expand(matrix, available_from_table(table, matrix))
    except MatrixError as exc:
        return [*problems, f"matrix.yaml no longer expands with the recorded Pythons: {exc}"]
    expected = build_table(matrix, cells, [], available_from_table(table, matrix))
    if [c.id for c in expected.cells] != [c.id for c in table.cells]:
        problems.append(f"cells {[c.id for c in table.cells]} are now {[c.id for c in expected.cells]}")
    if (expected.pythons, expected.drivers) != (table.pythons, table.drivers):
        problems.append("the matrix's Pythons or driver versions changed")
    return problems


@dataclass(frozen=True)
class InstallChoice:
    """What the page offers for one selector choice: the exact cell, or the nearest one that was built."""

    release: str
    python: str
    driver: int
    cell: str | None  # id of the cell whose wheel is installed; None: nothing is installable
    exact: bool
    note: str
    index_command: str = ""  # exact pins from the release's own index (squat-proof with pip and uv)
    find_links_command: str = ""  # the same pins from the release's find-links page
    release_index_command: str = ""  # no pin: the release's own index picks the wheel for the user's Python


@dataclass(frozen=True)
class InstallCommands:
    """The ways to install one cell's wheels (pip syntax; `uv pip install` takes the same arguments)."""

    release_index: str  # plain `pip install torch-emu` from the release's own index: keeps the installed torch
    pinned: str  # exact pins; both versions carry local labels, which the public index cannot host
    find_links: str  # the same pins from the release's find-links page


def _minor_distance(a: str, b: str) -> int:
    return abs(Version(a).minor - Version(b).minor) + 100 * abs(Version(a).major - Version(b).major)


def release_index_url(minor: str, site: str = SITE_PLACEHOLDER) -> str:
    return f"{site}/torch{minor}/simple/"


def release_index_command(table: CompatTable, minor: str, site: str = SITE_PLACEHOLDER) -> str:
    """Installs the plugin wheel for the installed torch release and the running Python, and never touches torch."""
    return f"pip install {table.plugin} --extra-index-url {release_index_url(minor, site)}"


def any_torch_command(table: CompatTable, site: str = SITE_PLACEHOLDER) -> str:
    """One line for whatever torch is installed, from the all-releases index: restating the installed torch as a
    requirement makes pip and uv backtrack to the plugin wheel built for it instead of upgrading torch.

    The version is the installed distribution's, which is what resolvers compare: torch.__version__ can differ
    (2.4.1+cu121 for the registry's 2.4.1), and `pip freeze` prints a URL for a torch installed from a file.
    """
    installed = "$(python -c \"from importlib.metadata import version; print(version('torch'))\")"
    return f'pip install {table.plugin} "torch=={installed}" --extra-index-url {site}/simple/'


def install_commands(table: CompatTable, cell: CompatCell, site: str = SITE_PLACEHOLDER) -> InstallCommands:
    """Commands that install this cell's wheels, never an sdist; the pinned ones can only ever install its wheels."""
    assert cell.driver_wheel is not None
    driver_version = parse_wheel_filename(cell.driver_wheel.filename)[1]
    pins = f"{cell.requirement} {table.driver_distribution}=={driver_version}"
    only_binary = f"--only-binary={table.plugin},{table.driver_distribution}"
    minor = table.release(cell.release).minor
    return InstallCommands(
        release_index=release_index_command(table, minor, site),
        pinned=f"pip install {pins} {only_binary} --extra-index-url {release_index_url(minor, site)}",
        find_links=f"pip install {pins} {only_binary} --find-links {site}/torch{minor}/",
    )


def nearest_cell(table: CompatTable, release: str, python: str, driver: int) -> CompatCell | None:
    """The installable cell closest to the choice: same driver first (the machine's driver is hardest to change),
    then the closest torch release, then the closest Python (the newer one on a tie)."""
    order = [r.key for r in table.releases]
    candidates = [c for c in table.cells if c.installable]
    if not candidates:
        return None
    return min(
        candidates,
        key=lambda c: (
            c.driver != driver,
            abs(order.index(c.release) - order.index(release)),
            _minor_distance(c.python, python),
            -Version(c.python).minor,
            c.id,
        ),
    )


def install_choice(
    table: CompatTable, release: str, python: str, driver: int, site: str = SITE_PLACEHOLDER
) -> InstallChoice:
    exact = table.cell(release, python, driver)
    rel = table.release(release)
    if exact is not None and exact.installable:
        commands = install_commands(table, exact, site)
        return InstallChoice(
            release,
            python,
            driver,
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
    near = nearest_cell(table, release, python, driver)
    if near is None:
        note = f"torch {rel.version}, Python {python}, driver {driver}: {reason}; no wheel is published yet"
        return InstallChoice(release, python, driver, None, False, note)
    nrel = table.release(near.release)
    commands = install_commands(table, near, site)
    note = (
        f"torch {rel.version}, Python {python}, driver {driver}: {reason}. "
        f"Nearest supported choice: torch {nrel.version}, Python {near.python}, driver {near.driver}"
    )
    return InstallChoice(
        release,
        python,
        driver,
        near.id,
        False,
        note,
        commands.pinned,
        commands.find_links,
        commands.release_index,
    )


def all_choices(table: CompatTable, site: str = SITE_PLACEHOLDER) -> list[InstallChoice]:
    return [
        install_choice(table, r.key, p, d.major, site)
        for r in table.releases
        for p in table.pythons
        for d in table.drivers
    ]


def smoke_summary(smoke: SmokeCounts | None) -> str:
    if smoke is None:
        return "no smoke counts"
    parts = [f"{smoke.passed} passed"] + [
        f"{n} {what}"
        for n, what in ((smoke.failed, "failed"), (smoke.errors, "errors"), (smoke.skipped, "skipped"))
        if n
    ]
    return ", ".join(parts)

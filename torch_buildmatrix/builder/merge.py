"""Merges wheels/ trees built on several machines into one, checking every wheel against its record first.

A tree holds cell records (results/cells/) and build records (results/builds/): a CI cell job's tree carries its
build's record, log and wheel beside its own record, so the same build arrives from every cell of it, byte-identical.

The trees come from other machines (CI artifacts): nothing in them is trusted. Only regular files reached through no
symlink are read (a log linked to /etc/passwd is refused, never copied and published), records are parsed as
untrusted (records/parse.py), and nothing is written through a symlink in the destination.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TypeVar

from torch_buildmatrix.builder.records.model import BuildResult, CellResult, WheelRecord
from torch_buildmatrix.builder.records.parse import RecordRules
from torch_buildmatrix.builder.records.store import ResultStore, read_build_record, read_record
from torch_buildmatrix.builder.tiers import settle_records, unsettled
from torch_buildmatrix.errors import MergeError, RecordError
from torch_buildmatrix.util.atomic import copy_file_atomic, write_text_atomic
from torch_buildmatrix.util.fingerprint import file_sha256
from torch_buildmatrix.util.paths import regular_file
from torch_buildmatrix.vocab import Status


@dataclass(frozen=True)
class TreeFile:
    """A file one tree contributes (a wheel or a log), with the tree it comes from."""

    tree: Path
    rel: str  # POSIX path relative to the tree, the same in the merged tree
    sha256: str
    log: bool = False  # a log: timestamped, never byte-identical between runs, and no part of what was built

    @property
    def path(self) -> Path:
        return self.tree / self.rel


@dataclass(frozen=True)
class TreeRecord:
    """One cell's or build's record as found in a tree: the parsed result and its exact bytes."""

    tree: Path
    result: CellResult | BuildResult
    text: str


@dataclass
class MergePlan:
    """What the merged tree will hold; only made when no tree has a problem."""

    records: dict[str, TreeRecord] = field(default_factory=dict)  # cells, by id
    builds: dict[str, TreeRecord] = field(default_factory=dict)  # builds, by id
    files: dict[str, TreeFile] = field(default_factory=dict)


@dataclass(frozen=True)
class MergeReport:
    cells: list[CellResult]
    wheels: int  # distinct wheel files in the merged tree's records
    copied: int  # files copied (wheels and logs already present with the same bytes are not)


def _safe_rel(rel: str) -> str | None:
    """The relative POSIX path if it stays inside the tree, else None."""
    path = PurePosixPath(rel)
    if not rel or path.is_absolute() or ".." in path.parts:
        return None
    return path.as_posix()


class _Planner:
    """Reads every tree, collecting all problems before any file is written."""

    def __init__(self, rules: RecordRules | None = None) -> None:
        self.plan = MergePlan()
        self.problems: list[str] = []
        self.rules = rules

    def add_tree(self, tree: Path, required: bool) -> None:
        cells_dir, builds_dir = tree / "results" / "cells", tree / "results" / "builds"
        if not tree.is_dir():
            if required:
                self.problems.append(f"{tree}: no such directory (expected a wheels/ tree made by `build`)")
            return
        for part in (tree / "results", cells_dir, builds_dir):
            if part.is_symlink() or (part.exists() and not part.is_dir()):
                self.problems.append(f"{part}: not a directory of the tree (a symlink or a file); refused")
                return
        for path in sorted(builds_dir.iterdir()) if builds_dir.is_dir() else []:
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                continue
            if path.suffix != ".json":
                self.problems.append(f"{path}: not a build record (results/builds/ holds <build id>.json only)")
                continue
            self.add_build(tree, path)
        records = sorted(cells_dir.iterdir()) if cells_dir.is_dir() else []
        if not records:
            if required:
                self.problems.append(
                    f"{tree}: no cell records in {cells_dir} (expected a wheels/ tree made by `build`)"
                )
            return
        for path in records:
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                continue  # an interrupted atomic write, never a record
            if path.suffix != ".json":
                self.problems.append(f"{path}: not a cell record (results/cells/ holds <cell id>.json only)")
                continue
            self.add_record(tree, path)

    def add_record(self, tree: Path, path: Path) -> None:
        try:  # a regular file, strict UTF-8, every type, bound, path and the cell id checked
            result = read_record(tree, f"results/cells/{path.name}", expected_id=path.stem, rules=self.rules)
            text = path.read_text(encoding="utf-8")
        except RecordError as exc:
            self.problems.append(str(exc))
            return
        advice = f"keep one of the two (delete the other's results/cells/{result.id}.json)"
        clash = f"cell {result.id}"
        self._take(tree, path, result, text, self.plan.records, owner=result.id, clash=clash, advice=advice)

    def add_build(self, tree: Path, path: Path) -> None:
        try:
            result = read_build_record(tree, f"results/builds/{path.name}", expected_id=path.stem, rules=self.rules)
            text = path.read_text(encoding="utf-8")
        except RecordError as exc:
            self.problems.append(str(exc))
            return
        advice = (
            "every cell of a build must test the one its build job made: keep one "
            f"(delete the other's results/builds/{result.id}.json)"
        )
        owner = f"build {result.id}"
        self._take(tree, path, result, text, self.plan.builds, owner=owner, clash=owner, advice=advice)

    def _take(
        self,
        tree: Path,
        path: Path,
        result: CellResult | BuildResult,
        text: str,
        taken: dict[str, TreeRecord],
        *,
        owner: str,
        clash: str,
        advice: str,
    ) -> None:
        """A checked record joins the plan with its files, unless another tree holds different bytes for its id."""
        files = self.record_files(tree, path, result)
        if files is None:
            return
        earlier = taken.get(result.id)
        # A record the merged tree holds settled by its build's deep tier (tiers.settle) agrees with the job's own.
        if earlier is not None and earlier.text != text and unsettled(earlier.result) != unsettled(result):
            self.problems.append(
                f"{clash}: {earlier.tree} and {tree} hold different records "
                f"({_describe(earlier.result)} vs {_describe(result)}); {advice} and merge again"
            )
            return
        taken[result.id] = TreeRecord(tree, result, text)
        for item in files:
            self.add_file(item, owner)

    def record_files(self, tree: Path, path: Path, result: CellResult | BuildResult) -> list[TreeFile] | None:
        """The wheels and log a record names, each checked against the tree; None (and problems) if any is wrong."""
        found: list[TreeFile] = []
        ok = True
        if result.status == Status.PASSED and result.wheel is None:
            self.problems.append(f"{path}: {result.id} passed but its record names no plugin wheel")
            ok = False
        wheels: list[tuple[str, WheelRecord]] = [
            (kind, record) for kind, record in (("wheel", result.wheel), ("SDK wheel", result.sdk_wheel)) if record
        ]
        for kind, record in wheels:
            rel = _safe_rel(record.path)
            if rel is None:
                self.problems.append(f"{path}: {kind} path {record.path!r} leaves the tree")
                ok = False
                continue
            try:
                file = regular_file(tree, rel)
            except ValueError as exc:
                self.problems.append(f"{path}: {kind} {exc}")
                ok = False
                continue
            digest = file_sha256(file)
            if digest != record.sha256:
                self.problems.append(
                    f"{file}: sha256 {digest} is not the {record.sha256} the record of {result.id} names"
                )
                ok = False
                continue
            found.append(TreeFile(tree, rel, digest))
        if result.log:
            try:
                log = regular_file(tree, result.log)
            except ValueError as exc:
                self.problems.append(f"{path}: log {exc}")
                ok = False
            else:
                found.append(TreeFile(tree, result.log, file_sha256(log), log=True))
        return found if ok else None

    def add_file(self, item: TreeFile, cell_id: str) -> None:
        earlier = self.plan.files.get(item.rel)
        if earlier is not None and item.log and earlier.log:
            return  # the same record's log from another tree: the first is kept (logs carry times; never a conflict)
        if earlier is not None and earlier.sha256 != item.sha256:
            self.problems.append(
                f"{item.rel} (cell {cell_id}): {earlier.tree} and {item.tree} hold different files "
                f"(sha256 {earlier.sha256[:16]}… vs {item.sha256[:16]}…); builds of the same wheel must be reproducible"
            )
            return
        self.plan.files.setdefault(item.rel, item)


def _describe(result: CellResult | BuildResult) -> str:
    sha = result.wheel.sha256[:12] if result.wheel else "no wheel"
    return f"{result.status}, inputs {result.inputs_hash[:12]}, {sha}"


def plan_merge(sources: list[Path], into: Path, rules: RecordRules | None = None) -> MergePlan:
    """Check every source tree (and what `into` already holds); raises MergeError listing every problem."""
    planner = _Planner(rules)
    if not sources:
        planner.problems.append("no source trees given")
    planner.add_tree(into, required=False)  # what is already merged must agree with the sources too
    for source in sources:
        if source.resolve() == into.resolve():
            planner.problems.append(f"{source}: is the destination itself")
            continue
        planner.add_tree(source, required=True)
    records = [f"results/cells/{cell}.json" for cell in planner.plan.records]
    records += [f"results/builds/{build}.json" for build in planner.plan.builds]
    for rel in sorted({*planner.plan.files, *records}):
        if problem := _destination_problem(into, rel):
            planner.problems.append(problem)
    if planner.problems:
        raise MergeError(planner.problems)
    return planner.plan


def _destination_problem(into: Path, rel: str) -> str:
    """Why writing `rel` into the merged tree would go through a symlink or onto a special file ('' when not)."""
    path = into
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            return f"{path}: a symlink in the destination; nothing is written through one"
    if path.exists() and not path.is_file():
        return f"{path}: not a regular file in the destination"
    return ""


_Result = TypeVar("_Result", CellResult, BuildResult)


def _replaced(results: list[_Result], changed: list[_Result]) -> list[_Result]:
    by_id = {r.id: r for r in changed}
    return [by_id.get(r.id, r) for r in results]


def merge_wheel_trees(sources: list[Path], into: Path, rules: RecordRules | None = None) -> MergeReport:
    """Merge wheels/ trees (results/cells/*.json, the wheels and logs they name) into `into`, then its summary.

    Either every source is merged or, on any problem, nothing is written. Wheels and logs are copied before the
    records that name them, so an interrupted merge never leaves a record whose wheel is missing.
    """
    plan = plan_merge(sources, into, rules)
    copied = 0
    for item in sorted(plan.files.values(), key=lambda f: f.rel):
        dest = into / item.rel
        if item.tree != into and not (dest.is_file() and file_sha256(dest) == item.sha256):
            copy_file_atomic(item.path, dest)
            copied += 1
    store = ResultStore(into / "results")
    for record in plan.builds.values():
        if record.tree != into:
            write_text_atomic(store.build_path(record.result.id), record.text)
    for record in plan.records.values():
        if record.tree != into:
            write_text_atomic(store.path(record.result.id), record.text)  # the exact bytes: a re-merge compares them
    merged = [r for cell_id in sorted(plan.records) if isinstance(r := plan.records[cell_id].result, CellResult)]
    builds = [r for build_id in sorted(plan.builds) if isinstance(r := plan.builds[build_id].result, BuildResult)]
    # The fan-out's jobs each knew their own cell: the deep tier of each build, run in its deep cell's job, is given
    # to the build's other cells (a failed one fails them) and to the build's record here.
    settled_cells, settled_builds = settle_records(merged, builds)
    for cell in settled_cells:
        store.save(cell)
    for build in settled_builds:
        store.save_build(build)
    merged = _replaced(merged, settled_cells)
    builds = _replaced(builds, settled_builds)
    store.write_summary(merged, builds=builds)
    wheels = {r.path for c in merged for r in (c.wheel, c.sdk_wheel) if r is not None}
    return MergeReport(merged, len(wheels), copied)


def merge_results(sources: list[Path], into: Path, matrix_path: Path) -> MergeReport:
    """merge_wheel_trees for `merge-results`: with the project's matrix.yaml (when there is one), every record's
    wheels are checked against its distributions too, and the merge runs under the run lock a build takes
    (RunLocked, exit 6): a build writing wheels/ meanwhile would mix its records with the merged ones."""
    from torch_buildmatrix.builder.workspace import RunLock, Workspace
    from torch_buildmatrix.model.loader import load_matrix

    matrix = load_matrix(matrix_path.resolve()) if matrix_path.is_file() else None
    if matrix is None:
        return merge_wheel_trees(sources, into)
    with RunLock(Workspace.for_root(matrix.root)):
        return merge_wheel_trees(sources, into, RecordRules.of(matrix))

"""Merges wheels/ trees built on several machines into one, checking every wheel against its record first."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from buildmatrix.builder.results import CellResult, ResultStore, WheelRecord
from buildmatrix.errors import MergeError, RecordError
from buildmatrix.model.vocab import Status
from buildmatrix.util.atomic import copy_file_atomic, write_text_atomic
from buildmatrix.util.fingerprint import file_sha256


@dataclass(frozen=True)
class TreeFile:
    """A file one tree contributes (a wheel or a log), with the tree it comes from."""

    tree: Path
    rel: str  # POSIX path relative to the tree, the same in the merged tree
    sha256: str

    @property
    def path(self) -> Path:
        return self.tree / self.rel


@dataclass(frozen=True)
class TreeRecord:
    """One cell's record as found in a tree: the parsed result and its exact bytes."""

    tree: Path
    result: CellResult
    text: str


@dataclass
class MergePlan:
    """What the merged tree will hold; only made when no tree has a problem."""

    records: dict[str, TreeRecord] = field(default_factory=dict)
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

    def __init__(self) -> None:
        self.plan = MergePlan()
        self.problems: list[str] = []

    def add_tree(self, tree: Path, required: bool) -> None:
        cells_dir = ResultStore(tree / "results").directory / "cells"
        if not tree.is_dir():
            if required:
                self.problems.append(f"{tree}: no such directory (expected a wheels/ tree made by `build`)")
            return
        records = sorted(cells_dir.glob("*.json")) if cells_dir.is_dir() else []
        if not records:
            if required:
                self.problems.append(
                    f"{tree}: no cell records in {cells_dir} (expected a wheels/ tree made by `build`)"
                )
            return
        for path in records:
            self.add_record(tree, path)

    def add_record(self, tree: Path, path: Path) -> None:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:  # every type, path and the cell id checked: a record cannot lead a write out of the merged tree
            result = CellResult.from_json(text, str(path), expected_id=path.stem)
        except RecordError as exc:
            self.problems.append(str(exc))
            return
        files = self.record_files(tree, path, result)
        if files is None:
            return
        earlier = self.plan.records.get(result.id)
        if earlier is not None and earlier.text != text:
            self.problems.append(
                f"cell {result.id}: {earlier.tree} and {tree} hold different records "
                f"({_describe(earlier.result)} vs {_describe(result)}); "
                f"keep one of the two (delete the other's results/cells/{result.id}.json) and merge again"
            )
            return
        self.plan.records[result.id] = TreeRecord(tree, result, text)
        for item in files:
            self.add_file(item, result.id)

    def record_files(self, tree: Path, path: Path, result: CellResult) -> list[TreeFile] | None:
        """The wheels and log a record names, each checked against the tree; None (and problems) if any is wrong."""
        found: list[TreeFile] = []
        ok = True
        if result.status == Status.PASSED and (result.wheel is None or result.driver_wheel is None):
            self.problems.append(f"{path}: cell {result.id} passed but its record names no plugin or driver wheel")
            ok = False
        wheels: list[tuple[str, WheelRecord]] = [
            (kind, record)
            for kind, record in (("wheel", result.wheel), ("driver wheel", result.driver_wheel))
            if record
        ]
        for kind, record in wheels:
            rel = _safe_rel(record.path)
            if rel is None:
                self.problems.append(f"{path}: {kind} path {record.path!r} leaves the tree")
                ok = False
                continue
            file = tree / rel
            if not file.is_file():
                self.problems.append(f"{path}: {kind} {rel} is missing from {tree}")
                ok = False
                continue
            digest = file_sha256(file)
            if digest != record.sha256:
                self.problems.append(
                    f"{file}: sha256 {digest} is not the {record.sha256} the record of cell {result.id} names"
                )
                ok = False
                continue
            found.append(TreeFile(tree, rel, digest))
        if result.log:
            rel = _safe_rel(result.log)
            if rel is None or not (tree / rel).is_file():
                self.problems.append(f"{path}: log {result.log!r} is missing from {tree}")
                ok = False
            else:
                found.append(TreeFile(tree, rel, file_sha256(tree / rel)))
        return found if ok else None

    def add_file(self, item: TreeFile, cell_id: str) -> None:
        earlier = self.plan.files.get(item.rel)
        if earlier is not None and earlier.sha256 != item.sha256:
            self.problems.append(
                f"{item.rel} (cell {cell_id}): {earlier.tree} and {item.tree} hold different files "
                f"(sha256 {earlier.sha256[:16]}… vs {item.sha256[:16]}…); builds of the same wheel must be reproducible"
            )
            return
        self.plan.files.setdefault(item.rel, item)


def _describe(result: CellResult) -> str:
    sha = result.wheel.sha256[:12] if result.wheel else "no wheel"
    return f"{result.status}, inputs {result.inputs_hash[:12]}, {sha}"


def plan_merge(sources: list[Path], into: Path) -> MergePlan:
    """Check every source tree (and what `into` already holds); raises MergeError listing every problem."""
    planner = _Planner()
    if not sources:
        planner.problems.append("no source trees given")
    planner.add_tree(into, required=False)  # what is already merged must agree with the sources too
    for source in sources:
        if source.resolve() == into.resolve():
            planner.problems.append(f"{source}: is the destination itself")
            continue
        planner.add_tree(source, required=True)
    if planner.problems:
        raise MergeError(planner.problems)
    return planner.plan


def merge_wheel_trees(sources: list[Path], into: Path) -> MergeReport:
    """Merge wheels/ trees (results/cells/*.json, the wheels and logs they name) into `into`, then its summary.

    Either every source is merged or, on any problem, nothing is written. Wheels and logs are copied before the
    records that name them, so an interrupted merge never leaves a record whose wheel is missing.
    """
    plan = plan_merge(sources, into)
    copied = 0
    for item in sorted(plan.files.values(), key=lambda f: f.rel):
        dest = into / item.rel
        if item.tree != into and not (dest.is_file() and file_sha256(dest) == item.sha256):
            copy_file_atomic(item.path, dest)
            copied += 1
    store = ResultStore(into / "results")
    for record in plan.records.values():
        if record.tree != into:
            write_text_atomic(store.path(record.result.id), record.text)  # the exact bytes: a re-merge compares them
    merged = [plan.records[cell_id].result for cell_id in sorted(plan.records)]
    store.write_summary(merged)
    wheels = {r.path for c in merged for r in (c.wheel, c.driver_wheel) if r is not None}
    return MergeReport(merged, len(wheels), copied)

"""The records on disk: one JSON file per cell in <dir>/cells/ and per build in <dir>/builds/, written atomically,
read back through the parser (parse.py), and merged into a summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from torch_buildmatrix.builder.records.fields import MAX_RECORD_BYTES
from torch_buildmatrix.builder.records.model import RESULT_SCHEMA_VERSION, BuildResult, CellResult
from torch_buildmatrix.builder.records.parse import ParseMemo, RecordRules, parse_build_record, parse_record
from torch_buildmatrix.errors import RecordError
from torch_buildmatrix.util.atomic import write_text_atomic
from torch_buildmatrix.util.paths import name_problem, read_regular
from torch_buildmatrix.vocab import Status


class ResultStore:
    """One record per cell in <dir>/cells/<id>.json and per build in <dir>/builds/<id>.json, written atomically; a
    summary merges them."""

    def __init__(self, directory: Path, rules: RecordRules | None = None) -> None:
        self.directory = directory
        self.rules = rules  # what the matrix says the records' wheels must be (None: types and paths only)
        self.memo = ParseMemo()  # versions, Pythons and tag checks its records share, parsed once

    def path(self, cell_id: str) -> Path:
        problem = name_problem(cell_id)
        if problem:  # a cell id from a record must never lead out of cells/
            raise RecordError(str(self.directory / "cells"), f"cell id {cell_id!r:.80} {problem}")
        return self.directory / "cells" / f"{cell_id}.json"

    def save(self, result: CellResult) -> None:
        """Write the cell's record once the reader has read it back whole (RecordError otherwise, nothing written)."""
        path = self.path(result.id)
        text = result.to_json() + "\n"
        _readable(lambda: parse_record(text, str(path), result.id, self.rules, self.memo))
        write_text_atomic(path, text)

    def build_path(self, build_id: str) -> Path:
        problem = name_problem(build_id)
        if problem:  # a build id from a record must never lead out of builds/
            raise RecordError(str(self.directory / "builds"), f"build id {build_id!r:.80} {problem}")
        return self.directory / "builds" / f"{build_id}.json"

    def save_build(self, result: BuildResult) -> None:
        """Write the build's record once the reader has read it back whole (RecordError otherwise, nothing written)."""
        path = self.build_path(result.id)
        text = result.to_json() + "\n"
        _readable(lambda: parse_build_record(text, str(path), result.id, self.rules, self.memo))
        write_text_atomic(path, text)

    def load_build(self, build_id: str) -> BuildResult | None:
        """The build's record, None when there is none; raises RecordError when it is damaged."""
        path = self.build_path(build_id)
        if not path.exists() and not path.is_symlink():
            return None
        return read_build_record(self.directory / "builds", f"{build_id}.json", build_id, self.rules, self.memo)

    def scan_builds(self) -> tuple[list[BuildResult], list[RecordError]]:
        """Every readable build record, and the damaged ones as errors naming their files."""
        return _scan(self.directory / "builds", self.load_build)

    def load(self, cell_id: str) -> CellResult | None:
        """The cell's record, None when there is none; raises RecordError when it is damaged."""
        path = self.path(cell_id)
        if not path.exists() and not path.is_symlink():
            return None
        return read_record(
            self.directory / "cells", f"{cell_id}.json", expected_id=cell_id, rules=self.rules, memo=self.memo
        )

    def scan(self) -> tuple[list[CellResult], list[RecordError]]:
        """Every readable record, and the damaged ones as errors naming their files."""
        return _scan(self.directory / "cells", self.load)

    def all(self) -> list[CellResult]:
        """Every record; raises RecordError naming every damaged one, so no cell silently drops out."""
        results, damaged = self.scan()
        if damaged:
            raise RecordError(
                str(self.directory / "cells"),
                f"{len(damaged)} damaged record(s); fix or delete them (a deleted record's cell is rebuilt):\n"
                + "\n".join(f"  {exc}" for exc in damaged),
            )
        return results

    def write_summary(
        self,
        results: list[CellResult],
        damaged: list[RecordError] | None = None,
        builds: list[BuildResult] | None = None,
    ) -> Path:
        path = self.directory / "summary.json"
        write_text_atomic(path, summary_json(results, damaged or [], builds or []))
        return path


def _readable(read_back: Callable[[], object]) -> None:
    """Run the reader over a record about to be written: one validator for writing and reading, so the tool never
    writes a record it would then refuse (exit 7 on every later command until deleted by hand)."""
    try:
        read_back()
    except RecordError as exc:
        raise RecordError(
            exc.source, f"not written: the record would not read back ({exc.problem}); the one there is kept"
        ) from None


def read_record(
    base: Path,
    relative: str,
    expected_id: str | None = None,
    rules: RecordRules | None = None,
    memo: ParseMemo | None = None,
) -> CellResult:
    """The record at base/relative, read as untrusted (_record_text); raises RecordError naming it."""
    source = str(base / relative)
    return parse_record(_record_text(base, relative), source, expected_id, rules, memo)


def read_build_record(
    base: Path,
    relative: str,
    expected_id: str | None = None,
    rules: RecordRules | None = None,
    memo: ParseMemo | None = None,
) -> BuildResult:
    """The build record at base/relative, read as untrusted as a cell's (_record_text)."""
    source = str(base / relative)
    return parse_build_record(_record_text(base, relative), source, expected_id, rules, memo)


def _record_text(base: Path, relative: str) -> str:
    """A record's text: a regular file reached through no symlink, at most MAX_RECORD_BYTES, strict UTF-8; raises
    RecordError naming base/relative for anything else."""

    source = str(base / relative)
    try:
        return read_regular(base, relative, MAX_RECORD_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(source, f"not UTF-8 ({exc}); a record is written as UTF-8 JSON") from None
    except ValueError as exc:
        raise RecordError(source, f"unreadable: {exc}") from None


Record = TypeVar("Record", CellResult, BuildResult)


def _scan(directory: Path, load: Callable[[str], Record | None]) -> tuple[list[Record], list[RecordError]]:
    """Every readable record of directory/*.json by `load` (by id: the file's stem), and the damaged ones as errors."""
    out, damaged = [], []
    for path in sorted(directory.glob("*.json")):
        try:
            result = load(path.stem)
        except RecordError as exc:
            damaged.append(exc)
            continue
        if result is not None:
            out.append(result)
    return out, damaged


def summary_json(
    results: list[CellResult], damaged: list[RecordError] | None = None, builds: list[BuildResult] | None = None
) -> str:
    counts = {str(s): sum(r.status == s for r in results) for s in (Status.PASSED, Status.FAILED)}
    interrupted = sum(r.status == Status.INTERRUPTED for r in results)
    if interrupted:  # only then, so summaries of runs that were never stopped keep their shape
        counts[str(Status.INTERRUPTED)] = interrupted
    not_built = sum(r.status == Status.NOT_BUILT for r in results)
    if not_built:  # only then too: a run that left no cell unbuilt (no Docker engine) keeps the shape
        counts[str(Status.NOT_BUILT)] = not_built
    body: dict[str, Any] = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "counts": counts,
        "cells": {r.id: r.to_dict() for r in sorted(results, key=lambda r: r.id)},
        "builds": {b.id: b.to_dict() for b in sorted(builds or [], key=lambda b: b.id)},
    }
    if damaged:
        body["damaged"] = {exc.source: exc.problem for exc in damaged}
    return json.dumps(body, indent=2, sort_keys=True) + "\n"

"""scripts/bench_full_matrix.py's figures, as pure functions of records made with the record model: core-minutes by
kind, the cost without tiers, the fan-out's critical path, the run's records and the disk sampler's growth."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.records.model import BuildResult, CellResult, StepResult, TierResult
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.model.cellkey import BuildKey, CellKey
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName, Status, TierStatus

from conftest import REPO


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_full_matrix", REPO / "scripts" / "bench_full_matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


bench = load_script()

OK = Status.PASSED
B213 = BuildKey(Version("2.13.0"), "cpu", None, Version("2.1"), "drv2", "torch.2.13.drv.2")
B212 = BuildKey(Version("2.12.0"), "cpu", None, Version("2.1"), "drv2", "torch.2.12.drv.2")


def cell_key(build: BuildKey, python: str) -> CellKey:
    return CellKey(build.torch, "cpu", Python.parse(python), build.sdk, "drv2", build.label, built_by=build)


def build(key: BuildKey, started: float, compile_s: float, env_s: float) -> BuildResult:
    steps = [("source", 1.0), ("sdk", 4.0), ("build-env", env_s), ("build", compile_s), ("check", 2.0)]
    return BuildResult(
        key,
        "h",
        {},
        RunnerName.LOCAL,
        status=OK,
        steps=[StepResult(name, OK, s) for name, s in steps],
        started=started,
        finished=started + compile_s + env_s + 7,
    )


def cell(key: CellKey, started: float, quick_s: float, deep_s: float | None, deep_cell: CellKey) -> CellResult:
    steps = [("interpreter", 0.5), ("smoke-env", 10.0), ("smoke", quick_s)]
    if deep_s is not None:
        steps.append(("deep", deep_s))
    seconds = sum(s for _, s in steps)
    status = TierStatus.PASSED
    return CellResult(
        key,
        "h",
        {},
        RunnerName.LOCAL,
        status=OK,
        steps=[StepResult(name, OK, s) for name, s in steps],
        started=started,
        finished=started + seconds,
        deep=TierResult(deep_cell.id, status, seconds=deep_s or 0.0),
    )


C311, C312, C313 = (cell_key(B213, p) for p in ("3.11", "3.12", "3.13"))
D311 = cell_key(B212, "3.11")
BUILDS = [build(B213, 1000.0, 300.0, 60.0), build(B212, 1000.0, 100.0, 30.0)]
CELLS = [
    cell(C311, 1400.0, 120.0, 400.0, C311),  # the 2.13 build's deep cell: 530.5 s
    cell(C312, 1400.0, 100.0, None, C311),
    cell(C313, 1600.0, 90.0, None, C311),
    cell(D311, 1200.0, 80.0, 50.0, D311),  # the 2.12 build's only cell, its deep cell: 140.5 s
]


def test_core_seconds_by_kind_count_each_step_once_under_its_kind() -> None:
    kinds = bench.seconds_by_kind([*BUILDS, *CELLS])
    assert kinds == {
        bench.Kind.TOOL: 2 * (1 + 2) + 4 * 0.5,
        bench.Kind.COMPILE: 400.0,
        bench.Kind.DEEP: 450.0,
        bench.Kind.QUICK: 390.0,
        bench.Kind.SETUP: 2 * 4 + 90 + 4 * 10,
    }
    assert bench.seconds_by_step([*BUILDS, *CELLS], bench.SETUP_STEPS) == {
        "sdk": 8.0,
        "build-env": 90.0,
        "smoke-env": 40.0,
        "image": 0.0,
    }


def test_without_tiers_every_cell_of_a_build_pays_its_deep_tier() -> None:
    # 2.13: three cells, the deep tier ran once (400 s): two more; 2.12: one cell, nothing more.
    assert bench.extra_without_tiers(CELLS) == 800.0
    assert bench.extra_without_tiers(CELLS[1:3]) == 0.0  # no deep cell among them: nothing known to add


def test_critical_path_is_a_build_and_its_own_slowest_cell() -> None:
    path = bench.critical_path(BUILDS, CELLS)
    assert (path.build.id, path.cell.id) == (B213.id, C311.id)
    assert path.seconds == 367.0 + 530.5
    assert path.setup_seconds == 4 + 60 + 10
    # A build whose cells are not among the records is a path of its own.
    alone = bench.critical_path(BUILDS, CELLS[3:])
    assert (alone.build.id, alone.cell) == (B213.id, None)
    assert bench.critical_path([], CELLS) is None


def test_the_run_is_its_finished_records_since_a_time_and_spans_first_start_to_last_finish() -> None:
    unfinished = cell(C312, 5000.0, 1.0, None, C311)
    unfinished.finished = None
    records = [*BUILDS, *CELLS, unfinished]
    assert bench.of_run(records, 0.0) == [*BUILDS, *CELLS]
    assert bench.of_run(records, 1300.0) == CELLS[:3]
    assert bench.wall_seconds([*BUILDS, *CELLS]) == 1400.0 + 530.5 - 1000.0  # the 2.13 deep cell ends last


def test_the_report_reads_the_records_back_through_the_store(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    for made_build in BUILDS:
        store.save_build(made_build)
    for made_cell in CELLS:
        store.save(made_cell)
    builds, damaged_builds = store.scan_builds()
    cells, damaged_cells = store.scan()
    assert not damaged_builds and not damaged_cells
    lines = bench.report(builds, cells, 2, str(tmp_path), 0.0)
    total = 8 + 400 + 450 + 390 + 138  # every step above, as the kinds add them up
    assert f"wall time {930.5 / 60:.1f} min" in lines[0] and "within the 60-minute goal" in lines[0]
    assert "2 build(s): 2 passed; 4 cell(s): 4 passed; deep tiers run: 2 passed" in lines[1]
    assert f"{total / 60:.1f} core-min in steps" in lines[2]
    assert f"{(total + 800) / 60:.1f} core-min" in lines[4]
    assert f"critical path {897.5 / 60:.1f} min" in lines[5] and "within the 15-minute goal" in lines[5]
    assert f"lower bound on 2 cores {total / 2 / 60:.1f} min" in lines[-1]


def test_disk_growth_is_the_peak_above_the_first_sample(tmp_path: Path) -> None:
    growth = bench.disk_growth("100 5000\n160 9000\n\n220 7000\n", "disk.log")
    assert (growth.grown, growth.peak, growth.samples) == (4000, (160.0, 9000), 3)
    with pytest.raises(ValueError, match=r"disk.log:2: '160 lots'"):
        bench.disk_growth("100 5000\n160 lots\n", "disk.log")
    with pytest.raises(ValueError, match="no samples"):
        bench.disk_growth("\n", "disk.log")


def test_download_time_is_uvs_preparing_time_in_the_runs_logs(tmp_path: Path) -> None:
    log = "Resolved 30 packages in 2.1s\nPrepared 8 packages in 19.44s\nInstalled 28 packages in 175ms\n"
    assert bench.prepared_seconds(log + "Prepared 1 package in 512ms\nPrepared 13 packages in 1m 05s\n") == (
        pytest.approx(19.44 + 0.512 + 65)
    )
    assert bench.prepared_seconds("Prepared the ground in 3s\n  Prepared 2 packages in 3s\n") == 0.0
    (tmp_path / "logs" / "builds").mkdir(parents=True)
    (tmp_path / "logs" / "builds" / "b.log").write_text(log)
    (tmp_path / "logs" / "c.log").write_text("Prepared 2 packages in 1.5s\n")
    records = [
        replace(BUILDS[0], log="logs/builds/b.log"),
        replace(CELLS[0], log="logs/c.log"),
        replace(CELLS[1], log="logs/gone.log"),  # removed since: adds nothing
        replace(CELLS[2], log=None),
    ]
    assert bench.run_prepared_seconds(records, tmp_path) == (pytest.approx(20.94), 2)
    lines = bench.report(BUILDS, CELLS, 2, str(tmp_path), 0.0, prepared=(126.0, 2))
    assert "download and unpack (uv's Prepared lines in 2 log(s)): 2.1 core-min" in lines[3]
    assert "download time: not told apart (the logs were not read)" in bench.report(BUILDS, CELLS, 2, "r", 0.0)[3]

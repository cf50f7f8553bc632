#!/usr/bin/env python3
"""Benchmark (not a test): the release ledger at its size limit (publish/ledger.py's MAX_WHEELS, shared by writer and
reader), and below it.

For each size it makes a ledger of that many wheels (each tested by two cells, every tenth yanked with a two-line
reason), then times the writer (`Ledger.to_json`, which reads its output back with the reader before returning) and
the reader alone (`parse_ledger`, what every publish and fetch-site does first), and prints the file's size and the
process's peak memory. Run from the repository root:
    python scripts/bench_ledger.py [--wheels 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torch_buildmatrix.publish.ledger import MAX_LEDGER_BYTES, MAX_WHEELS, Ledger, parse_ledger


def make(count: int) -> Ledger:
    ledger = Ledger()
    for i in range(count):
        path = f"torch2.{i % 20}/plugin-{i // 20}.{i % 7}.0+torch.2.{i % 20}.drv.{i % 3}-py3-none-any.whl"
        ledger.add(
            path,
            f"{i:064x}",
            metadata_sha256=f"{i * 7:064x}",
            requires_python=">=3.9",
            when="2026-05-03T10:22:07Z",
            indexes=[f"2.{i % 20}"],
            cells=[f"torch2.{i % 20}-cpu-cp311-drv{i % 3}", f"torch2.{i % 20}-cpu-cp312-drv{i % 3}"],
        )
        if i % 10 == 0:
            ledger.yank(path, "wrong results\nsee issue 42", "2026-06-01T08:00:00Z")
    return ledger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=int, nargs="+", default=[10_000, 100_000, MAX_WHEELS])
    args = parser.parse_args()
    print(f"limit: {MAX_WHEELS} wheels, {MAX_LEDGER_BYTES} bytes (one constant for the writer and the reader)")
    print(f"{'wheels':>9} {'MB':>8} {'write+check s':>14} {'read s':>8} {'peak RSS MB':>12}")
    for count in args.wheels:
        ledger = make(count)
        start = time.process_time()
        text = ledger.to_json()
        written = time.process_time() - start
        start = time.process_time()
        back = parse_ledger(text, "released.json")
        read = time.process_time() - start
        assert len(back) == count
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{count:>9} {len(text) / 1e6:>8.1f} {written:>14.2f} {read:>8.2f} {peak:>12.0f}")
        del ledger, back, text


if __name__ == "__main__":
    main()

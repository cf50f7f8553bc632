"""Prints what the subprocess choke point costs: short tools (as wheelcheck's nm calls) and the stop latency."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torch_buildmatrix.errors import Interrupted, StepFailed
from torch_buildmatrix.util.process import CHILDREN, run_captured, run_logged


def main() -> None:
    runs = 100
    started = time.monotonic()
    for _ in range(runs):
        run_captured(["true"])
    per = (time.monotonic() - started) / runs
    print(f"run_captured(['true']): {per * 1000:.1f} ms per call over {runs} calls")

    log = Path("/tmp/bench_process.log")
    started = time.monotonic()
    with contextlib.suppress(StepFailed):
        run_logged("bench", ["bash", "-c", "sleep 60 & while true; do echo tick; sleep 0.01; done"], log, timeout=1)
    print(f"timeout=1 on a chatty step with a grandchild: returned after {time.monotonic() - started:.2f} s")

    def stop_soon() -> None:
        time.sleep(0.5)
        CHILDREN.stop("SIGTERM")

    threading.Thread(target=stop_soon).start()
    started = time.monotonic()
    with contextlib.suppress(Interrupted):
        run_logged("bench", ["sleep", "60"], log)
    print(f"stop 0.5 s into a 60 s step: returned after {time.monotonic() - started:.2f} s")
    CHILDREN.reset()


if __name__ == "__main__":
    main()

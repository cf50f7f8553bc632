"""Sanitizer runs of our C++ (`nox -s sanitize`); prints each part's wall time.

`driver`: driver/tests against a driver built with AddressSanitizer and UndefinedBehaviorSanitizer (EMU_SANITIZE, read
by the tests' build and by driver/setup.py), then driver/tests/stream_threads.cpp, a C++ program of the stream and event
API with a host thread per stream, once under ThreadSanitizer and once under ASan + UBSan with the leak check on.
Python itself is not instrumented: the ASan runtime is preloaded (LD_PRELOAD) so the instrumented
libraries load in it, its leak check is off there (every Python process "leaks" its interned objects at exit; the C++
program checks the driver's leaks), and reports from libpython and libtorch frames are suppressed by sanitizers/*.supp.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUPPRESSIONS = ROOT / "sanitizers"
ADDRESS_UNDEFINED = "address,undefined"


def runtime(name: str) -> str:
    """The compiler's sanitizer runtime library (libasan.so), to preload into an uninstrumented Python."""
    path = subprocess.run(["g++", f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout
    return path.strip()


def sanitized_env(leaks: bool) -> dict[str, str]:
    return {
        **os.environ,
        "EMU_SANITIZE": ADDRESS_UNDEFINED,
        "ASAN_OPTIONS": f"detect_leaks={int(leaks)}:suppressions={SUPPRESSIONS / 'asan.supp'}:abort_on_error=0",
        "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:suppressions={SUPPRESSIONS / 'ubsan.supp'}",
    }


def timed(what: str, command: list[str], env: dict[str, str], cwd: Path = ROOT) -> None:
    print("$", " ".join(command), flush=True)
    start = time.monotonic()
    done = subprocess.run(command, env=env, cwd=cwd, check=False)
    print(f"== {what}: {time.monotonic() - start:.0f} s", flush=True)
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit code {done.returncode})")


def stream_program(out: Path, sanitize: str) -> Path:
    include = out / "include"
    include.mkdir(parents=True, exist_ok=True)
    template = (ROOT / "driver" / "include" / "emu_driver_version.h.in").read_text()
    (include / "emu_driver_version.h").write_text(template.replace("@MAJOR@", "2").replace("@MINOR@", "2"))
    program = out / f"stream_threads-{sanitize.replace(',', '-')}"
    sources = sorted(str(p) for p in (ROOT / "driver" / "src").glob("*.cpp"))
    command = ["g++", "-std=c++17", "-O1", "-g", "-pthread", f"-fsanitize={sanitize}", "-fno-omit-frame-pointer"]
    command += ["-Wall", "-Wextra", "-Werror", f"-I{include}", f"-I{ROOT / 'driver' / 'include'}"]
    command += [*sources, str(ROOT / "driver" / "tests" / "stream_threads.cpp"), "-o", str(program)]
    timed(f"build stream_threads ({sanitize})", command, dict(os.environ))
    return program


def driver(pytest_args: list[str]) -> None:
    env = {**sanitized_env(leaks=False), "LD_PRELOAD": runtime("libasan.so")}
    timed("driver/tests under ASan + UBSan", [sys.executable, "-m", "pytest", "driver/tests", *pytest_args], env)
    with tempfile.TemporaryDirectory() as scratch:
        tsan = stream_program(Path(scratch), "thread")
        timed("stream_threads under TSan", [str(tsan)], {**os.environ, "TSAN_OPTIONS": "halt_on_error=1"})
        asan = stream_program(Path(scratch), ADDRESS_UNDEFINED)
        timed("stream_threads under ASan + UBSan (leaks checked)", [str(asan)], sanitized_env(leaks=True))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "driver":
        sys.exit("usage: sanitize.py driver [pytest arguments]")
    driver(sys.argv[2:])

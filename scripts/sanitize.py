"""Sanitizer runs of our C++ (`nox -s sanitize`, `nox -s sanitize-plugin`); prints each part's wall time.

`driver`: driver/tests against a driver built with AddressSanitizer and UndefinedBehaviorSanitizer (EMU_SANITIZE, read
by the tests' build and by driver/setup.py), then driver/tests/stream_threads.cpp, a C++ program of the stream, event
and graph API with a host thread per stream, once under ThreadSanitizer and once under ASan + UBSan with the leak check
on.
`plugin`: the driver and plugin built the same way into this environment (torch must be installed there), then
plugin/tests but for its slowest files (models, OpInfo, compile). Python itself is not instrumented: the ASan runtime
is preloaded (LD_PRELOAD) so the instrumented libraries load in it, its leak check is off there (every Python process
"leaks" its interned objects at exit; the C++ program checks the driver's leaks), and reports from libpython and
libtorch frames are suppressed by sanitizers/*.supp.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUPPRESSIONS = ROOT / "sanitizers"
ADDRESS_UNDEFINED = "address,undefined"
SANITIZE_FLAGS = "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
SLOW_PLUGIN_TESTS = ["test_models.py", "test_opinfo.py", "test_compile.py"]


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
    (include / "emu_driver_version.h").write_text(template.replace("@MAJOR@", "2").replace("@MINOR@", "3"))
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


def plugin(pytest_args: list[str]) -> None:
    env = sanitized_env(leaks=False)
    pip = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--force-reinstall", "-q"]
    timed("driver built with ASan + UBSan", [*pip, "./driver"], {**env, "EMU_DRIVER_API_VERSION": "2.4"})
    with tempfile.TemporaryDirectory() as scratch:
        # The plugin's build takes the environment's compile and link flags; it reads its version from PLUGIN_VERSION,
        # which the build matrix writes: this copy gets one. The suite runs from a copy with a pytest.ini of its own,
        # as the build matrix stages it (the project's pytest settings are its tests', and the source tree's
        # torch_emu/ must not shadow the installed one).
        tree = Path(scratch) / "plugin"
        shutil.copytree(ROOT / "plugin", tree)
        (tree / "PLUGIN_VERSION").write_text("0+sanitize\n")
        build_env = {**env, "CXXFLAGS": SANITIZE_FLAGS, "LDFLAGS": "-fsanitize=address,undefined"}
        timed("plugin built with ASan + UBSan", [*pip, str(tree)], build_env)
        suite = Path(scratch) / "suite"
        shutil.copytree(ROOT / "plugin" / "tests", suite / "tests")
        (suite / "pytest.ini").write_text("[pytest]\n")
        # libstdc++ preloaded too: Python does not link it, and ASan's __cxa_throw interceptor, set up when the
        # runtime starts, would find no real __cxa_throw and abort at the first C++ exception (a TORCH_CHECK).
        preload = f"{runtime('libasan.so')} {runtime('libstdc++.so')}"
        ignored = [f"--ignore={suite / 'tests' / name}" for name in SLOW_PLUGIN_TESTS]
        command = [sys.executable, "-m", "pytest", "tests", "--import-mode=importlib", *ignored, *pytest_args]
        timed("plugin/tests under ASan + UBSan", command, {**env, "LD_PRELOAD": preload}, cwd=suite)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in {"driver", "plugin"}:
        sys.exit("usage: sanitize.py driver|plugin [pytest arguments]")
    {"driver": driver, "plugin": plugin}[sys.argv[1]](sys.argv[2:])

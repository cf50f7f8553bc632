"""actions/setup-python stand-in: each requested version from the runner's tool cache, in a fresh virtual environment.

The tool cache ($RUNNER_TOOL_CACHE/Python/<X.Y.Z>/x64/bin/pythonX.Y) is what the runner's image offers; a version it
lacks fails the step with the real action's message, because a hosted runner would download it and this one cannot.

PATH gets, for each version, its environment's bin and, right behind it, the tool cache's x64/bin (the directory the
real action puts on PATH). `python`, `pip` and what a job installs are the environment's; a program that looks for an
interpreter that is not a virtual environment's, as `torch-buildmatrix build` does, finds the tool cache's pythonX.Y,
the one it finds on a hosted runner, instead of skipping to whatever pythonX.Y the host has further down PATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(.*)")
SPEC = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def installed(tool_cache: Path) -> list[tuple[tuple[int, int, int], str, Path]]:
    """(version, suffix, x64 directory) of every Python in the tool cache, newest first."""
    found = []
    for entry in (tool_cache / "Python").glob("*"):
        match = RELEASE.fullmatch(entry.name)
        if match and (entry / "x64").is_dir():
            version = (int(match[1]), int(match[2]), int(match[3]))
            found.append((version, match[4], entry / "x64"))
    return sorted(found, key=lambda item: (item[0], item[1] == ""), reverse=True)


def choose(spec: str, tool_cache: Path, prereleases: bool) -> tuple[str, Path]:
    match = SPEC.fullmatch(spec)
    if not match:
        sys.exit(f"::error::setup-python stand-in: version '{spec}' is not X.Y or X.Y.Z (all it implements)")
    wanted = tuple(int(part) for part in match.groups() if part is not None)
    candidates = [(v, s, d) for v, s, d in installed(tool_cache) if v[: len(wanted)] == wanted]
    final = [c for c in candidates if not c[1]]
    chosen = final or (candidates if prereleases else [])
    if not chosen:
        sys.exit(
            f"::error::The version '{spec}' with architecture 'x64' was not found for this operating system. "
            f"(setup-python stand-in: the tool cache {tool_cache / 'Python'} holds "
            f"{', '.join(d.parent.name for _v, _s, d in installed(tool_cache)) or 'nothing'}; it downloads nothing)"
        )
    version, suffix, directory = chosen[0]
    return ".".join(map(str, version)) + suffix, directory


def main() -> None:
    tool_cache = Path(os.environ["RUNNER_TOOL_CACHE"])
    specs = [line.strip() for line in os.environ["INPUT_PYTHON_VERSION"].splitlines() if line.strip()]
    if not specs:
        sys.exit("::error::setup-python stand-in: no python-version given (reading .python-version is not implemented)")
    prereleases = os.environ["INPUT_ALLOW_PRERELEASES"] == "true"
    temp = Path(os.environ["RUNNER_TEMP"]) / "setup-python"
    outputs = ""
    with Path(os.environ["GITHUB_PATH"]).open("a", encoding="utf-8") as path_file:
        for index, spec in enumerate(specs):
            full, directory = choose(spec, tool_cache, prereleases)
            major, minor = full.split(".")[:2]
            interpreter = directory / "bin" / f"python{major}.{minor}"
            env = temp / full
            if not env.exists():
                subprocess.run([str(interpreter), "-m", "venv", "--without-pip", str(env)], check=True)
            if index == len(specs) - 1 and not (env / "bin" / "pip").exists():
                # pip where it is the default Python, the one a job's `python -m pip` reaches
                subprocess.run([str(env / "bin" / "python"), "-m", "ensurepip", "--default-pip"], check=True)
            # act prepends each line of $GITHUB_PATH: the last line written comes first, so the environment's bin
            # ends up before the tool cache's, and the last version listed before the others, as `python`
            path_file.write(f"{directory / 'bin'}\n")
            path_file.write(f"{env / 'bin'}\n")
            print(f"Python {full} from {directory} in {env}")
            outputs = f"python-version={full}\npython-path={env / 'bin' / 'python'}\n"
    with Path(os.environ["GITHUB_ENV"]).open("a", encoding="utf-8") as env_file:
        env_file.write(f"pythonLocation={env}\n")
    with Path(os.environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as output:
        output.write(outputs)


if __name__ == "__main__":
    main()

"""Find installed CPython interpreters (PATH and pyenv), never from hard-coded machine paths."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from torch_buildmatrix.errors import InterpreterNotFound, StepFailed
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util.process import run_captured

# A virtual environment's interpreter (sys.prefix is not sys.base_prefix) is never chosen: which one comes first on
# PATH depends on how the command was started (nox puts its session's environment first), and the choice must not.
_PROBE = (
    "import json,sys,platform,sysconfig;print(json.dumps([platform.python_version(), sys.implementation.name,"
    " sys.executable, sys.prefix != sys.base_prefix, bool(sysconfig.get_config_var('Py_GIL_DISABLED'))]))"
)


@dataclass(frozen=True)
class Interpreter:
    executable: Path
    version: Version  # full version, e.g. 3.11.7
    free_threaded: bool = False

    @property
    def python(self) -> Python:
        """The cell axis value it serves (3.11, 3.13t)."""
        return Python.of(self.version, self.free_threaded)


def _candidates(series: Python, path_env: str, pyenv_root: Path | None) -> list[Path]:
    name = series.executable_name
    found: list[Path] = []
    for directory in path_env.split(os.pathsep):
        candidate = Path(directory) / name
        if directory and candidate.is_file() and os.access(candidate, os.X_OK) and "shims" not in candidate.parts:
            found.append(candidate)
    if pyenv_root is not None and (pyenv_root / "versions").is_dir():
        for prefix in sorted((pyenv_root / "versions").iterdir(), reverse=True):
            candidate = prefix / "bin" / name
            if prefix.name.startswith(f"{series.major}.{series.minor}.") and candidate.is_file():
                found.append(candidate)
    return found


def pyenv_root() -> Path | None:
    """pyenv's root (PYENV_ROOT, else `pyenv root`, else ~/.pyenv when there), None without pyenv."""
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv:
        try:
            found = run_captured([pyenv, "root"], step="interpreter", timeout=30)
        except StepFailed:
            return None
        return Path(found.stdout.strip()) if found.returncode == 0 else None
    default = Path.home() / ".pyenv"
    return default if default.is_dir() else None


_auto_root = pyenv_root  # find_interpreter's parameter has the function's name


def _newest_first(version: Version) -> tuple[int, ...]:
    return tuple(-part for part in version.release)


def find_interpreter(
    series: Python, path_env: str | None = None, pyenv_root: Path | str | None = "auto"
) -> Interpreter:
    """The CPython of the X.Y series the tool builds with, whatever the order of PATH: among the working ones on PATH
    and under pyenv that are not a virtual environment's, the newest release (3.11.7 over 3.11.2; of two copies of one
    release, the first found). How the tool is started changes PATH's order (pyenv's shims put their version's bin
    first, nox its session's environment), never the release chosen. Raises InterpreterNotFound saying where it
    looked."""
    path_env = os.environ.get("PATH", "") if path_env is None else path_env
    root = _auto_root() if pyenv_root == "auto" else (Path(pyenv_root) if pyenv_root else None)
    working: list[Interpreter] = []
    seen: set[Path] = set()
    for candidate in _candidates(series, path_env, root):
        # /bin/python3.11 and /usr/bin/python3.11 are one file (/bin links to /usr/bin). The file itself is not
        # resolved: a virtual environment's python links to its base, but runs as the environment.
        real = candidate.parent.resolve() / candidate.name
        if real in seen:
            continue
        seen.add(real)
        try:
            probed = run_captured([candidate, "-c", _PROBE], step="interpreter", timeout=60)
            answer: list[Any] = json.loads(probed.stdout) if probed.returncode == 0 else ["", "", "", False, False]
            version, implementation, executable, in_venv, free_threaded = answer
        except (StepFailed, ValueError):
            continue
        if not version or in_venv:
            continue
        full = Version(version)
        found = Interpreter(Path(executable), full, free_threaded)
        if implementation == "cpython" and found.python == series:
            working.append(found)
    if working:
        return min(working, key=lambda i: _newest_first(i.version))  # the first found of the newest
    where = f"PATH and pyenv ({root})" if root else "PATH (no pyenv found)"
    raise InterpreterNotFound(
        f"no CPython {series} interpreter found (looked for {series.executable_name} in {where}); "
        f"install one, e.g. `pyenv install {series}` or `uv python install {series}`, "
        f"or drop Python {series} from the selection"
    )

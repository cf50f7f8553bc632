"""Builds the emulated driver's wheel once per API version and driver source state."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from buildmatrix.builder.sourcetree import copy_pristine
from buildmatrix.builder.toolenv import reproducible_env
from buildmatrix.errors import StepFailed
from buildmatrix.model.matrix import DriverVersion
from buildmatrix.util.atomic import copy_file_atomic
from buildmatrix.util.fingerprint import tree_hash
from buildmatrix.util.process import run_logged

# Builds the driver tree (a scratch copy) into a directory: (tree, out_dir, env, log_file).
DriverBuild = Callable[[Path, Path, Mapping[str, str], Path], None]


def driver_version_problem(filename: str, driver: DriverVersion) -> str:
    """Why a built driver wheel cannot be published for `driver`: its version must be <api>.0 with a local label
    (2.1.0+emu). The public index refuses local versions, so an exact pin on it can never resolve to a look-alike."""
    version = parse_wheel_filename(filename)[1]
    if version.release != Version(f"{driver.api}.0").release or not version.local:
        return f"{filename}: version {version} is not {driver.api}.0+<local label> (driver/setup.py sets the label)"
    return ""


class DriverWheels:
    """Cache of driver wheels under cache_dir/<api>-<source hash>/; safe across threads.

    By default the host's uv builds them; `build` builds them elsewhere (the Docker runner: inside the builder image,
    whose libstdc++ may be older than the host's), and then cache_dir must be that builder's own.
    """

    def __init__(
        self, source: Path, distribution: str, cache_dir: Path, uv: str | None = None, build: DriverBuild | None = None
    ) -> None:
        if (uv is None) == (build is None):
            raise ValueError("DriverWheels needs exactly one of uv and build")
        self.source = source
        self.pattern = distribution.replace("-", "_") + "-*.whl"
        self.cache_dir = cache_dir
        self.uv = uv
        self.build = build
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def wheel(self, driver: DriverVersion, log_file: Path) -> Path:
        key = f"{driver.api}-{tree_hash(self.source)[:16]}"
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            target = self.cache_dir / key
            existing = sorted(target.glob(self.pattern)) if target.is_dir() else []
            if existing:
                return existing[0]
            scratch = self.cache_dir / f".{key}.building"
            if scratch.exists():
                shutil.rmtree(scratch)  # left by an interrupted run
            # Build from a copy: builds write build/ and *.egg-info into the tree they build.
            tree = copy_pristine(self.source, scratch / "src")
            env = {"EMU_DRIVER_API_VERSION": str(driver.api), **reproducible_env()}
            if self.build is not None:
                self.build(tree, scratch, env, log_file)
            else:
                assert self.uv is not None
                run_logged(
                    "driver", [self.uv, "build", "--wheel", "--out-dir", scratch, tree], log_file, env=env, timeout=1800
                )
            built = sorted(scratch.glob(self.pattern))
            if len(built) != 1:
                raise StepFailed("driver", f"expected one {self.pattern} in {scratch}, found {[p.name for p in built]}")
            if problem := driver_version_problem(built[0].name, driver):
                raise StepFailed("driver", problem)
            copy_file_atomic(built[0], target / built[0].name)
            shutil.rmtree(scratch, ignore_errors=True)
            return target / built[0].name

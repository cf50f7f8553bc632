"""Builds the emulated driver's wheel once per API version and driver source state."""

from __future__ import annotations

import fcntl
import shutil
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from buildmatrix.builder.sourcetree import copy_pristine
from buildmatrix.builder.toolenv import reproducible_env
from buildmatrix.errors import StepFailed
from buildmatrix.model.matrix import DriverVersion
from buildmatrix.util.atomic import copy_file_atomic, write_text_atomic
from buildmatrix.util.fingerprint import file_sha256, tree_hash
from buildmatrix.util.process import run_logged

# Builds the driver tree (a scratch copy) into a directory: (tree, out_dir, env, log_file).
DriverBuild = Callable[[Path, Path, Mapping[str, str], Path], None]


def driver_version_problem(filename: str, driver: DriverVersion) -> str:
    """Why a built driver wheel cannot be published for `driver`: its version must be <api>.0 with a local label
    (2.2.0+emu). The public index refuses local versions, so an exact pin on it can never resolve to a look-alike."""
    version = parse_wheel_filename(filename)[1]
    if version.release != Version(f"{driver.api}.0").release or not version.local:
        return f"{filename}: version {version} is not {driver.api}.0+<local label> (driver/setup.py sets the label)"
    return ""


class DriverWheels:
    """Cache of driver wheels under cache_dir/<api>-<source hash>/ with their sha256; safe across threads and processes.

    By default the host's uv builds them; `build` builds them elsewhere (the Docker runner: inside the builder image,
    whose libstdc++ may be older than the host's), and then cache_dir must be that builder's own.
    """

    def __init__(
        self,
        source: Path,
        distribution: str,
        cache_dir: Path,
        uv: str | None = None,
        build: DriverBuild | None = None,
        *,
        timeout: float = 1800,
        generated: frozenset[str] = frozenset(),
    ) -> None:
        if (uv is None) == (build is None):
            raise ValueError("DriverWheels needs exactly one of uv and build")
        self.source = source
        self.pattern = distribution.replace("-", "_") + "-*.whl"
        self.cache_dir = cache_dir
        self.uv = uv
        self.build = build
        self.timeout = timeout
        self.generated = generated  # matrix.yaml's build.generated: left out of the cache key and the copy
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._forced: set[str] = set()  # keys rebuilt by --force in this run: once each, not once per cell

    def wheel(self, driver: DriverVersion, log_file: Path, force: bool = False) -> Path:
        """The driver wheel for `driver`: the cached one when it verifies, else built (once, under a lock)."""
        key = f"{driver.api}-{tree_hash(self.source, generated=self.generated)[:16]}"
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        # The thread lock orders this run's cells; the file lock other processes sharing the cache (probe, CI jobs).
        with lock, file_lock(self.cache_dir / f".{key}.lock"):
            target = self.cache_dir / key
            rebuild = force and key not in self._forced
            if force:
                self._forced.add(key)
            existing = sorted(target.glob(self.pattern)) if target.is_dir() else []
            if existing and not rebuild:
                problem = verify_cached(existing[0])
                if not problem:
                    return existing[0]
                _note(log_file, f"cached driver wheel {existing[0]} is damaged ({problem}); building it again")
            if target.exists():
                shutil.rmtree(target)
            return self._build(driver, key, target, log_file)

    def _build(self, driver: DriverVersion, key: str, target: Path, log_file: Path) -> Path:
        scratch = self.cache_dir / f".{key}.building"
        if scratch.exists():
            shutil.rmtree(scratch)  # left by an interrupted run
        # Build from a copy: builds write build/ and *.egg-info into the tree they build.
        tree = copy_pristine(self.source, scratch / "src", self.generated)
        env = {"EMU_DRIVER_API_VERSION": str(driver.api), **reproducible_env()}
        if self.build is not None:
            self.build(tree, scratch, env, log_file)
        else:
            assert self.uv is not None
            run_logged(
                "driver",
                [self.uv, "build", "--wheel", "--out-dir", scratch, tree],
                log_file,
                env=env,
                timeout=self.timeout,
            )
        built = sorted(scratch.glob(self.pattern))
        if len(built) != 1:
            raise StepFailed("driver", f"expected one {self.pattern} in {scratch}, found {[p.name for p in built]}")
        if problem := driver_version_problem(built[0].name, driver):
            raise StepFailed("driver", problem)
        if problem := verify_wheel(built[0]):
            raise StepFailed("driver", f"the driver build wrote a damaged wheel: {problem}")
        # The digest first, then the wheel: a wheel without its digest is never trusted (verify_cached).
        write_text_atomic(target / (built[0].name + DIGEST_SUFFIX), file_sha256(built[0]) + "\n")
        copy_file_atomic(built[0], target / built[0].name)
        shutil.rmtree(scratch, ignore_errors=True)
        return target / built[0].name


DIGEST_SUFFIX = ".sha256"


def verify_wheel(wheel: Path) -> str:
    """Why a wheel file is not a whole wheel ('' when it is): a zip whose every member passes its CRC, with a RECORD."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            bad = archive.testzip()
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        return f"not a readable zip: {exc}"
    if bad is not None:
        return f"member {bad} fails its CRC check"
    if not any(name.endswith(".dist-info/RECORD") for name in names):
        return "no .dist-info/RECORD"
    return ""


def verify_cached(wheel: Path) -> str:
    """Why a cached wheel cannot be used ('' when it can): its sha256 must match the digest written at build."""
    digest = wheel.with_name(wheel.name + DIGEST_SUFFIX)
    try:
        expected = digest.read_text().strip()
    except OSError:
        return f"no digest {digest.name} (written by an interrupted or older run)"
    actual = file_sha256(wheel)
    if actual != expected:
        return f"sha256 {actual[:12]}... is not the {expected[:12]}... recorded when it was built"
    return verify_wheel(wheel)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on path, held for the block; the kernel drops it if the holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _note(log_file: Path, text: str) -> None:
    with log_file.open("a") as handle:
        handle.write(f"# {text}\n")

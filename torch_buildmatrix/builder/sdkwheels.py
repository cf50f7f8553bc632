"""Builds a wheel SDK's wheel (matrix.yaml `sdk: {kind: wheel}`) once per version and source state, and caches it."""

from __future__ import annotations

import fcntl
import shutil
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import parse_wheel_filename

from torch_buildmatrix.builder.sourcetree import copy_pristine
from torch_buildmatrix.builder.toolenv import reproducible_env
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.matrix import Sdk, SdkVersion
from torch_buildmatrix.util.atomic import copy_file_atomic, write_text_atomic
from torch_buildmatrix.util.fingerprint import file_sha256, tree_hash
from torch_buildmatrix.util.process import run_logged

# Builds the SDK's tree (a scratch copy) into a directory: (tree, out_dir, env, log_file).
SdkBuild = Callable[[Path, Path, Mapping[str, str], Path], None]


def sdk_version_problem(filename: str, sdk: SdkVersion) -> str:
    """Why a built SDK wheel cannot be published for `sdk`: its version must be the declared one (2.2 -> 2.2, 2.2.0,
    2.2.3) with a local label (2.2.0+vendor). The public index refuses local versions, so an exact pin on it can never
    resolve to a look-alike."""
    version = parse_wheel_filename(filename)[1]
    declared = sdk.version.release
    padded = version.release + (0,) * max(0, len(declared) - len(version.release))
    if padded[: len(declared)] != declared or not version.local:
        return (
            f"{filename}: version {version} is not {sdk.version}[.x]+<local label> (the SDK's build sets the version; "
            "sdk.version-env tells it which)"
        )
    return ""


class SdkWheels:
    """Cache of SDK wheels under cache_dir/<version>-<source hash>/ with their sha256; safe across threads and
    processes.

    By default the host's uv builds them; `build` builds them elsewhere (the Docker runner: inside the builder image,
    whose libstdc++ may be older than the host's), and then cache_dir must be that builder's own.
    """

    def __init__(
        self,
        sdk: Sdk,
        cache_dir: Path,
        uv: str | None = None,
        build: SdkBuild | None = None,
        *,
        timeout: float = 1800,
        generated: frozenset[str] = frozenset(),
    ) -> None:
        if (uv is None) == (build is None):
            raise ValueError("SdkWheels needs exactly one of uv and build")
        if sdk.source is None:
            raise ValueError(f"the {sdk.kind} SDK {sdk.name} has no source to build")
        self.source = sdk.source
        self.version_env = sdk.version_env
        self.step = "sdk"
        self.pattern = sdk.distribution.replace("-", "_").replace(".", "_") + "-*.whl"
        self.cache_dir = cache_dir
        self.uv = uv
        self.build = build
        self.timeout = timeout
        self.generated = generated  # matrix.yaml's build.generated: left out of the cache key and the copy
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._forced: set[str] = set()  # keys rebuilt by --force in this run: once each, not once per cell

    def wheel(self, sdk: SdkVersion, log_file: Path, force: bool = False) -> Path:
        """The SDK wheel for `sdk`: the cached one when it verifies, else built (once, under a lock)."""
        key = f"{sdk.version}-{tree_hash(self.source, generated=self.generated)[:16]}"
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
                _note(log_file, f"cached SDK wheel {existing[0]} is damaged ({problem}); building it again")
            if target.exists():
                shutil.rmtree(target)
            return self._build(sdk, key, target, log_file)

    def _build(self, sdk: SdkVersion, key: str, target: Path, log_file: Path) -> Path:
        scratch = self.cache_dir / f".{key}.building"
        if scratch.exists():
            shutil.rmtree(scratch)  # left by an interrupted run
        # Build from a copy: builds write build/ and *.egg-info into the tree they build.
        tree = copy_pristine(self.source, scratch / "src", self.generated)
        env = {**({self.version_env: str(sdk.version)} if self.version_env else {}), **reproducible_env()}
        if self.build is not None:
            self.build(tree, scratch, env, log_file)
        else:
            assert self.uv is not None
            run_logged(
                self.step,
                [self.uv, "build", "--wheel", "--out-dir", scratch, tree],
                log_file,
                env=env,
                timeout=self.timeout,
            )
        built = sorted(scratch.glob(self.pattern))
        if len(built) != 1:
            raise StepFailed(self.step, f"expected one {self.pattern} in {scratch}, found {[p.name for p in built]}")
        if problem := sdk_version_problem(built[0].name, sdk):
            raise StepFailed(self.step, problem)
        if problem := verify_wheel(built[0]):
            raise StepFailed(self.step, f"the SDK build wrote a damaged wheel: {problem}")
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

"""Where a run keeps its scratch trees, published wheels, logs and results."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from torch_buildmatrix.errors import RunLocked


@dataclass(frozen=True)
class Workspace:
    root: Path  # the project (holds matrix.yaml)
    build_dir: Path  # scratch: per-cell work trees
    wheels_dir: Path  # published artefacts: wheels, logs, results
    cache_dir: Path  # kept across runs and shared by cells: SDK wheels, registry answers

    @classmethod
    def for_root(
        cls, root: Path, build_dir: Path | None = None, wheels_dir: Path | None = None, cache_dir: Path | None = None
    ) -> Workspace:
        return cls(
            root,
            build_dir or root / "build" / "matrix",
            wheels_dir or root / "wheels",
            cache_dir or root / "build" / "cache",
        )

    @property
    def results_dir(self) -> Path:
        return self.wheels_dir / "results"

    @property
    def logs_dir(self) -> Path:
        return self.wheels_dir / "logs"

    def cell_dir(self, cell_id: str) -> Path:
        return self.build_dir / "cells" / cell_id

    def plugin_wheel_dir(self, torch_minor: str) -> Path:
        return self.wheels_dir / f"torch{torch_minor}"

    def sdk_wheel_dir(self, sdk_name: str) -> Path:
        """Where a wheel SDK's wheels are published: wheels/<sdk.name>/ (the same path on the site)."""
        return self.wheels_dir / sdk_name


class RunLock:
    """One build-matrix run per workspace; the kernel drops the lock if the holder is killed (even SIGKILL)."""

    def __init__(self, workspace: Workspace) -> None:
        self.path = workspace.build_dir / ".lock"
        self.handle: IO[str] | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunLock.Busy(
                f"another build-matrix run (pid {holder}) holds {self.path}; wait for it or stop it"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self.handle = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self.handle:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()

    Busy = RunLocked

"""The words the pipeline uses for states and kinds, as enums: one spelling each, checked by mypy."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What became of a cell in a run."""

    PASSED = "passed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the run was stopped (Ctrl-C, SIGTERM) while the cell ran; rebuilt next run


class FailureClass(StrEnum):
    """Whether the same inputs would fail again: deterministic failures are remembered, transient ones retried."""

    DETERMINISTIC = "deterministic"  # a compile error, a smoke failure, a bad patch
    TRANSIENT = "transient"  # network or registry error, killed by a signal or OOM, timeout, disk full


class Variant(StrEnum):
    """Which build of a torch release a cell uses."""

    CPU = "cpu"
    CUDA = "cuda"


class RunnerName(StrEnum):
    """How cells are built: in local isolated environments, or in Docker through cibuildwheel."""

    AUTO = "auto"
    LOCAL = "local"
    DOCKER = "docker"


class FindingKind(StrEnum):
    """What `outdated` found when it compared matrix.yaml with the torch sources."""

    NEW_MINOR = "new-minor"  # a torch minor matrix.yaml does not list
    NEW_PATCH = "new-patch"  # a newer patch release of a listed minor
    NEW_PYTHON = "new-python"  # a Python newer than matrix.yaml's, published by a listed release
    YANKED = "yanked"  # a listed release the registry has yanked

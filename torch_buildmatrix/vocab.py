"""The words the pipeline uses for states and kinds, as enums: one spelling each, checked by mypy."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What became of a cell in a run."""

    PASSED = "passed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the run was stopped (Ctrl-C, SIGTERM) while the cell ran; rebuilt next run
    # In the compat table: the cell has no record for its current inputs. In a record: a run left it unbuilt (no
    # runner could start for it, e.g. no Docker engine), its error names the command that fixes that.
    NOT_BUILT = "not built"


class Step(StrEnum):
    """The steps of a cell, as its record names them (steps[].name, failed_step); a record naming another is damaged."""

    SETUP = "setup"  # the cell failed before its first step
    INTERPRETER = "interpreter"
    SOURCE = "source"
    IMAGE = "image"
    SDK = "sdk"  # a wheel SDK's wheel is built (records of schema 1 called it "driver")
    BUILD_ENV = "build-env"
    BUILD = "build"
    CHECK = "check"
    SMOKE_ENV = "smoke-env"
    SMOKE = "smoke"
    DEEP = "deep"  # the build's deep tier (smoke.tiers), on its deep cell; on its other cells, a deep tier that failed
    PUBLISH = "publish"


class TierStatus(StrEnum):
    """What a build's deep tier (smoke.tiers) found."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not run"  # every test it selected skipped, or it selected none: nothing was checked


class FailureClass(StrEnum):
    """Whether the same inputs would fail again: deterministic failures are remembered, transient ones retried."""

    DETERMINISTIC = "deterministic"  # a compile error, a smoke failure, a bad patch
    TRANSIENT = "transient"  # network or registry error, killed by a signal or OOM, timeout, disk full


class Cause(StrEnum):
    """Why a transient failure happened (deterministic failures need none: their log says it)."""

    NETWORK = "network"  # a registry or index did not answer, or answered 5xx
    SIGNAL = "signal"  # a child was killed by a signal other than SIGKILL
    OOM = "oom"  # a child was SIGKILLed: the kernel's OOM killer, or a person
    TIMEOUT = "timeout"  # a step ran past its timeout (matrix.yaml timeouts:)
    DISK_FULL = "disk-full"  # no space left on a device
    NOT_WRITABLE = "not-writable"  # a read-only file system or a permission refused
    INTERRUPTED = "interrupted"  # the run was stopped by Ctrl-C or SIGTERM


class SdkKind(StrEnum):
    """What the project's SDK is (matrix.yaml `sdk.kind`; a project without `sdk:` has none)."""

    WHEEL = "wheel"  # a wheel built from a source tree of the project, installed and published with the plugin
    SYSTEM = "system"  # a toolkit a builder image or the building machine provides; nothing built or published


# Torch variants are data (cpu, cuda, cu121, rocm6.2, xpu: matrix.yaml names them); these two have a meaning of their
# own: the registry's Linux wheels are CUDA builds, and PyTorch's CPU builds are labelled +cpu.
CPU_VARIANT = "cpu"
REGISTRY_VARIANT = "cuda"


class RunnerName(StrEnum):
    """How cells are built: in local isolated environments, or in Docker containers of builder images."""

    AUTO = "auto"
    LOCAL = "local"
    DOCKER = "docker"


class FindingKind(StrEnum):
    """What `outdated` found when it compared matrix.yaml with the torch sources."""

    NEW_MINOR = "new-minor"  # a torch minor matrix.yaml does not list
    NEW_PATCH = "new-patch"  # a newer patch release of a listed minor
    NEW_PYTHON = "new-python"  # a Python newer than matrix.yaml's, published by a listed release
    YANKED = "yanked"  # a listed release the registry has yanked


class WheelSourceKind(StrEnum):
    """Where a torch release's wheels come from."""

    REGISTRY = "registry"  # the package index pip is configured with
    FIND_LINKS = "find-links"  # a path or URL given to pip as --find-links
    INDEX = "index"  # a PEP 503 index of its own (e.g. PyTorch's per-variant index), maybe mirrored locally


class FeatureState(StrEnum):
    """How a smoke-tested feature fares across the cells of one torch release (the compat table's feature list)."""

    AVAILABLE = "available"
    PARTIAL = "partial"  # passed with some SDK versions only
    NOT_AVAILABLE = "not available"  # the release lacks it (detected at run time, not a failure)
    FAILED = "failed"

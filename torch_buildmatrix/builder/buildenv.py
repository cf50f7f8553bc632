"""The environment a local build runs in: this process's, the tool's compile settings, matrix.yaml's build.env on top.

A build for a CPU variant of torch sees no CUDA toolkit unless the project asks for one: an extension whose setup.py
builds its CUDA part whenever it finds a CUDA compiler would otherwise fail (or build CUDA code into a CPU wheel) on
a machine with nvcc on PATH. The host's nvcc is hidden (each PATH entry holding it is replaced by a directory of links
to its other programs) and CUDA_HOME and CUDA_PATH are left out; build.env, applied afterwards, can set them again.

build.env replaces a variable's value; `${NAME}` in a value is the variable as the build would otherwise see it, so
`PATH: "/opt/tool/bin:${PATH}"` extends PATH (an unset NAME reads as empty)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CUDA_COMPILER = "nvcc"
CUDA_VARIABLES = ("CUDA_HOME", "CUDA_PATH")
# A fact about torch: cpp_extension takes this directory as CUDA_HOME when neither variable nor nvcc says otherwise;
# no environment variable hides it, so the log says when it is there.
TORCH_DEFAULT_CUDA_HOME = Path("/usr/local/cuda")
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class BuildEnvironment:
    """The whole environment of the build step, and what was changed to make it (for the build's log)."""

    env: dict[str, str]
    notes: tuple[str, ...] = ()


def expand(value: str, env: Mapping[str, str]) -> str:
    """`${NAME}` in a build.env value replaced by NAME's value in `env` (empty when unset)."""
    return REFERENCE.sub(lambda m: env.get(m.group(1), ""), value)


def build_environment(
    inherited: Mapping[str, str],
    tool: Mapping[str, str],
    declared: Mapping[str, str],
    *,
    hide_cuda: bool,
    shadow_root: Path,
) -> BuildEnvironment:
    """inherited (this process's environment) with the tool's settings over it, the CUDA toolkit hidden when
    hide_cuda (a CPU variant's build), then `declared` (build.env, version variables) expanded against that."""
    env = {**inherited, **tool}
    notes: list[str] = []
    if hide_cuda:
        dropped = [name for name in CUDA_VARIABLES if name in env]
        for name in dropped:
            del env[name]
        path, shadowed = _path_without(env.get("PATH", ""), CUDA_COMPILER, shadow_root)
        if shadowed:
            env["PATH"] = path
        if dropped or shadowed:
            hidden = [f"{CUDA_COMPILER} in {', '.join(shadowed)}"] if shadowed else []
            hidden += [f"{name}={inherited.get(name, tool.get(name, ''))}" for name in dropped]
            notes.append(
                f"CPU variant: the CUDA toolkit is hidden from the build ({'; '.join(hidden)}); "
                "set CUDA_HOME or PATH in build.env to give the build one"
            )
        if TORCH_DEFAULT_CUDA_HOME.is_dir():
            notes.append(
                f"CPU variant: {TORCH_DEFAULT_CUDA_HOME} exists, and torch's cpp_extension takes it as CUDA_HOME when "
                "nothing else names a toolkit: a setup.py that asks torch for CUDA_HOME can still find it"
            )
    for name, value in declared.items():
        env[name] = expand(value, env)
    return BuildEnvironment(env, tuple(notes))


def log_notes(log_file: Path, notes: tuple[str, ...]) -> None:
    """The notes as comment lines of the build's log (before the build's own output)."""
    if notes:
        with log_file.open("a") as handle:
            handle.writelines(f"# {note}\n" for note in notes)


def _path_without(path: str, program: str, shadow_root: Path) -> tuple[str, list[str]]:
    """PATH with each entry that holds `program` replaced by a directory of symlinks to its other entries; returns
    the new PATH and the entries replaced."""
    entries, shadowed = [], []
    for index, entry in enumerate(path.split(os.pathsep)):
        directory = Path(entry)
        if entry and os.access(directory / program, os.X_OK) and (directory / program).is_file():
            shadow = shadow_root / f"{index}"
            shadow.mkdir(parents=True, exist_ok=True)
            for child in directory.iterdir():
                link = shadow / child.name
                if child.name != program and not link.exists() and not link.is_symlink():
                    link.symlink_to(child)
            entries.append(str(shadow))
            shadowed.append(entry)
        else:
            entries.append(entry)
    return os.pathsep.join(entries), shadowed

"""The only code that speaks to the docker CLI: every container, image and engine question of the tool."""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.util.process import CHILDREN, run_captured, run_logged
from torch_buildmatrix.util.redact import is_secret
from torch_buildmatrix.vocab import Cause

DOCKER = "docker"
OWNER_LABEL = "org.buildmatrix.owner"


def server_version(timeout: float = 20.0) -> str:
    """The engine's version when `docker info` answers (honours DOCKER_HOST), else ''."""
    if shutil.which(DOCKER) is None:
        return ""
    try:
        proc = run_captured([DOCKER, "info", "--format", "{{.ServerVersion}}"], step="engine", timeout=timeout)
    except StepFailed:
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def engine_problem(timeout: float = 20.0) -> str:
    """Why `docker info` does not answer ('' when it does), in the client's own words."""
    if shutil.which(DOCKER) is None:
        return "no docker client on PATH"
    try:
        proc = run_captured([DOCKER, "info", "--format", "{{.ServerVersion}}"], step="engine", timeout=timeout)
    except StepFailed as exc:
        if exc.cause == Cause.TIMEOUT:
            return f"`docker info` did not answer within {timeout:.0f} s"
        return f"cannot run docker: {exc.message}"
    if proc.returncode == 0 and proc.stdout.strip():
        return ""
    lines = [line for line in (proc.stderr + proc.stdout).strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"`docker info` exited with code {proc.returncode}"


def image_platform(reference: str) -> str:
    """'os/arch' of a local image, or '' when the engine does not have it."""
    proc = run_captured([DOCKER, "image", "inspect", reference, "--format", "{{.Os}}/{{.Architecture}}"], step="image")
    return proc.stdout.strip() if proc.returncode == 0 else ""


def image_exists(reference: str) -> bool:
    return image_platform(reference) != ""


def image_labels(reference: str) -> dict[str, str] | None:
    """A local image's labels, read by parsing `docker image inspect`; None when the engine has no such image."""
    proc = run_captured([DOCKER, "image", "inspect", reference, "--format", "{{json .Config.Labels}}"], step="image")
    if proc.returncode != 0:
        return None
    try:
        labels = json.loads(proc.stdout or "null")
    except ValueError:
        return {}  # there, but unreadable: the caller treats it as damaged
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def import_rootfs(rootfs: Path, reference: str, step: str, log_file: Path, *, platform: str) -> None:
    """`tar -C rootfs -c . | docker import - reference` for platform (linux/amd64), the output appended to log_file."""
    # One bash pipeline under run_logged: both ends share the step's process group, timeout and log.
    tar = shlex.join(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."])
    load = shlex.join([DOCKER, "import", "--platform", platform, "-", reference])
    try:
        run_logged(step, ["bash", "-o", "pipefail", "-c", f"{tar} | {load}"], log_file, timeout=1800)
    except StepFailed as exc:
        raise StepFailed(
            step, f"importing {rootfs} as {reference} failed: {exc.message}", exc.log_tail, exc.failure_class, exc.cause
        ) from None


def build_image(
    context: Path,
    dockerfile: Path,
    reference: str,
    build_args: Mapping[str, str],
    *,
    step: str,
    log_file: Path,
    platform: str,
    labels: Mapping[str, str] | None = None,
) -> None:
    """`docker build` for platform (linux/amd64) with the given --build-arg values; never pulls a base the engine
    already has."""
    # --force-rm: the classic builder otherwise keeps the stopped container of a failed RUN step, one per failed build.
    command: list[str] = [
        DOCKER,
        "build",
        "--force-rm",
        "--platform",
        platform,
        "--file",
        str(dockerfile),
        "--tag",
        reference,
    ]
    arg_options, secret_args = env_options(build_args, "--build-arg")
    command += arg_options
    for key, value in sorted((labels or {}).items()):
        command += ["--label", f"{key}={value}"]
    # The classic builder: the engine's BuildKit may be absent (docker.io without docker-buildx), and it resolves
    # FROM against local images without asking a registry.
    run_logged(step, [*command, str(context)], log_file, env={**secret_args, "DOCKER_BUILDKIT": "0"}, timeout=3600)


def remove_image(reference: str) -> None:
    run_captured([DOCKER, "image", "rm", "--force", reference], step="image")


def run_in_image(reference: str, command: Sequence[str], step: str, log_file: Path) -> str:
    """A throwaway container of reference running command; returns the output's tail."""
    return run_logged(step, [DOCKER, "run", "--rm", "--pull=never", *owner_label(), reference, *command], log_file)


def owner_label() -> list[str]:
    """`--label` naming the run that starts a container: killing the docker client does not stop its container, so
    the run's sweep (remove_owned_containers) finds it by this label."""
    return [f"--label={OWNER_LABEL}={CHILDREN.owner}"] if CHILDREN.owner else []


def remove_owned_containers(owner: str) -> int:
    """Force-remove every container labelled as started by `owner`'s runs; returns how many."""
    listed = run_captured([DOCKER, "ps", "-aq", "--filter", f"label={OWNER_LABEL}={owner}"], step="engine")
    ids = listed.stdout.split() if listed.returncode == 0 else []
    if ids:
        run_captured([DOCKER, "rm", "--force", *ids], step="engine", timeout=300)
    return len(ids)


def run_container(
    reference: str,
    command: Sequence[str],
    step: str,
    log_file: Path,
    *,
    mounts: Sequence[tuple[Path, str, str]] = (),
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    workdir: str | None = None,
    tmpfs: str | None = None,
) -> str:
    """A throwaway container of reference running command with (host, inside, ro|rw) mounts and env, in workdir,
    with a tmpfs mount (`/tmp:exec,size=8g`) when asked; returns the output's tail."""
    options = [f"--volume={host}:{inside}:{mode}" for host, inside, mode in mounts]
    options += [f"--workdir={workdir}"] if workdir else []
    options += [f"--tmpfs={tmpfs}"] if tmpfs else []
    env_args, secret_env = env_options(env or {})
    return run_logged(
        step,
        [DOCKER, "run", "--rm", "--pull=never", *owner_label(), *options, *env_args, reference, *command],
        log_file,
        env=secret_env,
        timeout=timeout,
    )


def env_options(env: Mapping[str, str], flag: str = "--env") -> tuple[list[str], dict[str, str]]:
    """Docker options giving env (flag --env or --build-arg), and what the docker client's own environment needs.

    A secret (a credential-bearing URL, a token or password variable) goes by name only: the client reads its value
    from its environment, so it never appears on a command line, in `ps`, or in a cell's log.
    """
    options, client = [], {}
    for key, value in sorted(env.items()):
        if is_secret(key, value):
            options.append(f"{flag}={key}")
            client[key] = value
        else:
            options.append(f"{flag}={key}={value}")
    return options, client

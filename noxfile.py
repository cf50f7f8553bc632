"""Sessions are thin: each installs the orchestration package and calls its CLI (`python -m torch_buildmatrix`)."""

import hashlib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "unit"]

ORCHESTRATION = [".[docker]", "uv"]
TEST_DEPS = [".[test]", "uv"]
# Two workers (the development machine and CI have two cores), one group per worker at a time and the groups in the
# order tests/parallel_plan.py gives them (long ones first): `-- -n 0` after it runs one test at a time.
PARALLEL = ("-n", "2", "--dist", "loadfile", "--no-loadscope-reorder")
DOCS_DEPS = ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10"]  # the same pins as pyproject.toml's docs extra
CPP_TREES = ("plugin/csrc", "driver")  # all our C++: .clang-format at the root applies to it
PYTHON_TREES = ("torch_buildmatrix", "tests", "driver", "plugin", "examples", "scripts", "noxfile.py")


def install_tool(session: nox.Session) -> None:
    """Install the package unless the reused environment holds this very source: a reinstall (resolve, build the
    package's wheel) took ~4 s of a 6 s no-op build; comparing the source's hash takes milliseconds."""
    files = [Path("pyproject.toml"), *sorted(p for p in Path("torch_buildmatrix").rglob("*") if p.is_file())]
    digest = hashlib.sha256("\0".join(ORCHESTRATION).encode())  # what is installed, then from which source
    for path in (p for p in files if "__pycache__" not in p.parts):
        digest.update(path.as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    stamp = Path(str(session.virtualenv.location)) / "installed-source.sha256"
    if not stamp.is_file() or stamp.read_text() != digest.hexdigest():
        session.install(*ORCHESTRATION)
        stamp.write_text(digest.hexdigest())


@nox.session(name="build-matrix", reuse_venv=True)
def build_matrix(session: nox.Session) -> None:
    """Build and smoke-test every selected cell of matrix.yaml (args after -- go to `torch-buildmatrix build`)."""
    install_tool(session)
    session.run("python", "-m", "torch_buildmatrix", "build", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """Show the expanded cells (-- --json, -- --github for a GitHub Actions strategy.matrix)."""
    session.install(*ORCHESTRATION)
    # stdout is data with --json/--github (a workflow redirects it to a file): errors go to stderr, not into it
    session.run("python", "-m", "torch_buildmatrix", "matrix", *session.posargs, stderr=None)


@nox.session(name="merge-results")
def merge_results(session: nox.Session) -> None:
    """Merge wheels/ trees built on several machines, wheels checked against records (-- DIR [DIR ...] [--into DIR])."""
    session.install(*ORCHESTRATION)
    session.run("python", "-m", "torch_buildmatrix", "merge-results", *session.posargs)


@nox.session(name="compat-table")
def compat_table(session: nox.Session) -> None:
    """Compatibility table (docs/compatibility.md, README), static site and wheel index in wheels/site/."""
    session.install(*ORCHESTRATION)
    session.run("python", "-m", "torch_buildmatrix", "compat-table", *session.posargs)


@nox.session(name="fetch-site")
def fetch_site(session: nox.Session) -> None:
    """Copy the live site's release history into wheels/site, the base compat-table publishes on (-- --site-url URL)."""
    session.install(*ORCHESTRATION)
    session.run("python", "-m", "torch_buildmatrix", "fetch-site", *session.posargs)


@nox.session
def patches(session: nox.Session) -> None:
    """Shim series: `-- check` (all apply, none unused), `-- edit 2.4`, `-- refresh 2.4`."""
    session.install(*ORCHESTRATION)
    session.run("python", "-m", "torch_buildmatrix", "patches", *session.posargs)


@nox.session
def probe(session: nox.Session) -> None:
    """Drift probe: `-- 2.16` builds and smoke-tests a release not in matrix.yaml and groups the breaks by interface."""
    session.install(*ORCHESTRATION)
    session.run("python", "-m", "torch_buildmatrix", "probe", *session.posargs)


@nox.session
def outdated(session: nox.Session) -> None:
    """Compare matrix.yaml with the torch registry (-- --apply edits it and probes each new release; -- --no-probe)."""
    session.install(*ORCHESTRATION)
    session.run("python", "-m", "torch_buildmatrix", "outdated", *session.posargs)


@nox.session
def schema(session: nox.Session) -> None:
    """Regenerate matrix.schema.json and the generated reference pages in docs/reference/ (-- --check)."""
    session.install(*ORCHESTRATION)
    session.run(
        "python",
        "-m",
        "torch_buildmatrix",
        "schema",
        "--schema",
        "matrix.schema.json",
        "--reference",
        "docs/reference/matrix-options.md",
        "--cli",
        "docs/reference/command-line.md",
        "--exit-codes",
        "docs/reference/exit-codes.md",
        *session.posargs,
    )


@nox.session
def docs(session: nox.Session) -> None:
    """Build the docs (mkdocs --strict) into build/docs-site and serve them on 127.0.0.1:8000 (-- --build-only,
    -- --site-dir DIR, -- --port N); a failed build leaves the last good site and serves nothing."""
    session.install(".", *DOCS_DEPS)  # torch-buildmatrix itself: the build checks the pages generated from its code
    session.run("python", "scripts/docs_site.py", *session.posargs)


@nox.session
def unit(session: nox.Session) -> None:
    """Fast tests of the pure logic (no compiler, no torch)."""
    session.install(*TEST_DEPS)
    session.run("pytest", *PARALLEL, "-m", "not integration", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Everything CI runs: unit tests, driver tests, runner integration tests and the real torch 2.13 cell, on two
    workers (tests/parallel_plan.py keeps the tests that share a cache or a fixture on one, and starts the long ones
    first). Tests that download a torch release from the registry (marked `download`, GBs each) are left out: `nox -s
    tests -- -m download` runs them (a later -m replaces this one)."""
    session.install(*TEST_DEPS)
    session.run("pytest", *PARALLEL, "-m", "not docker and not download", *session.posargs)


@nox.session
def act(session: nox.Session) -> None:
    """The GitHub workflows run under act on this machine, with the stand-ins of tests/act/ (part of `tests`)."""
    session.install(*TEST_DEPS)
    session.run("pytest", *PARALLEL, "-m", "act and not docker", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (rules and format) over all our Python; mypy strict over the package, its tests, the plugin's development
    tests and this file; the build epoch confirmed for the build code; then cpp-format."""
    session.install(".[test]", "ruff", "mypy", "types-PyYAML", "nox")
    session.run("ruff", "check", *PYTHON_TREES)
    session.run("ruff", "format", "--check", *PYTHON_TREES)
    session.run("mypy", "torch_buildmatrix", "tests", "plugin/devtests", "noxfile.py")
    session.run("python", "scripts/build_epoch.py", "--check")
    session.notify("cpp-format")


@nox.session(name="build-epoch")
def build_epoch(session: nox.Session) -> None:
    """Re-confirm the build epoch for the current build code (-- --bump: a new epoch, which rebuilds every cell)."""
    session.install(*ORCHESTRATION)
    session.run("python", "scripts/build_epoch.py", *session.posargs)


@nox.session(name="cpp-format", venv_backend="none")
def cpp_format(session: nox.Session) -> None:
    """Fail on C++ that clang-format 14 (Debian bookworm's, as .clang-format says) would change (-- --fix rewrites)."""
    version = session.run("clang-format", "--version", silent=True, external=True) or ""
    if " version 14." not in str(version):
        session.error(f"clang-format 14 is required (each major formats differently), found: {version!s}".strip())
    files = sorted(str(p) for tree in CPP_TREES for p in Path(tree).rglob("*") if p.suffix in {".cpp", ".h"})
    mode = ["-i"] if "--fix" in session.posargs else ["--dry-run", "--Werror"]
    session.run("clang-format", "--style=file", *mode, *files, external=True, silent=True)


@nox.session
def sanitize(session: nox.Session) -> None:
    """The driver under AddressSanitizer + UBSan (driver/tests) and ThreadSanitizer (a C++ program of its streams)."""
    session.install("pytest", "pytest-timeout")
    session.run("python", "scripts/sanitize.py", "driver", "-q", *session.posargs)


@nox.session(name="sanitize-plugin", venv_backend="venv")
def sanitize_plugin(session: nox.Session) -> None:
    """The driver and plugin built with ASan + UBSan; plugin/tests, less the slowest, on torch 2.13 CPU (not in CI)."""
    session.install("torch==2.13.0", "setuptools", "wheel", "ninja", "packaging", "numpy", "pytest", "expecttest")
    session.run("python", "scripts/sanitize.py", "plugin", "-q", *session.posargs)


@nox.session(name="pytorch-distributed", venv_backend="venv")
def pytorch_distributed(session: nox.Session) -> None:
    """PyTorch's DistributedTest suite on eccl (emu tensors) against gloo (CPU tensors), beside torch 2.13.0 CPU
    (plugin/distributed_suite/run_suite.py; not in CI: an hour or more). Builds torch2.13-cpu-drv2 when it is not up
    to date; args after -- go to pytest (e.g. -- -k all_reduce)."""
    import json

    session.install(*ORCHESTRATION, "torch==2.13.0", "numpy", "pytest", "expecttest", "hypothesis")
    build = "torch2.13-cpu-drv2"
    session.run("python", "-m", "torch_buildmatrix", "build", "--builds-only", "--build", build)
    record = json.loads(Path(f"wheels/results/builds/{build}.json").read_text(encoding="utf-8"))
    session.install(*(str(Path("wheels", record[key]["path"])) for key in ("wheel", "sdk_wheel")))
    out = Path("build/distributed-suite")
    session.run("python", "plugin/distributed_suite/run_suite.py", "--out", str(out), "--", *session.posargs)


@nox.session(name="docker-engine")
def docker_engine(session: nox.Session) -> None:
    """Make a Docker engine answer (Debian, root): install docker.io if missing, start dockerd, say what was done."""
    session.install(*ORCHESTRATION)
    session.run("python", "-m", "torch_buildmatrix", "engine", *session.posargs)


@nox.session(name="docker-tests")
def docker_tests(session: nox.Session) -> None:
    """The Docker runner's tests in real containers (needs `nox -s docker-engine`; -m "docker and not slow": fast)."""
    session.install(".[test,docker]", "uv")
    session.run("pytest", "-m", "docker", *session.posargs)

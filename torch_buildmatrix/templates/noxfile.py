"""Sessions for @DISTRIBUTION@'s build matrix (written by `torch-buildmatrix init`): each calls torch-buildmatrix's
command line."""

import nox

nox.options.default_venv_backend = "uv|virtualenv"
BUILDMATRIX = ["@REQUIREMENT_PY@", "uv"]  # init writes the requirement as a Python string literal
# torch-buildmatrix by name is pinned and taken as a wheel only, never built from whatever source distribution an index
# offers under that name; a direct reference (git URL, path) is built as given (:none:).
ONLY_BINARY = "@ONLY_BINARY_PY@"


@nox.session(name="build-matrix")
def build_matrix(session: nox.Session) -> None:
    """Build and smoke-test the selected cells (args after -- go to `torch-buildmatrix build`)."""
    session.install("--only-binary", ONLY_BINARY, *BUILDMATRIX)
    session.run("torch-buildmatrix", "build", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """Show the expanded cells (-- --json, -- --github for a GitHub Actions strategy.matrix)."""
    session.install("--only-binary", ONLY_BINARY, *BUILDMATRIX)
    session.run("torch-buildmatrix", "matrix", *session.posargs)


@nox.session(name="merge-results")
def merge_results(session: nox.Session) -> None:
    """Merge wheels/ trees built on several machines (-- DIR [DIR ...] [--into DIR])."""
    session.install("--only-binary", ONLY_BINARY, *BUILDMATRIX)
    session.run("torch-buildmatrix", "merge-results", *session.posargs)


@nox.session(name="compat-table")
def compat_table(session: nox.Session) -> None:
    """Compatibility table, install page and wheel index in wheels/site/ (-- --site-url URL)."""
    session.install("--only-binary", ONLY_BINARY, *BUILDMATRIX)
    session.run("torch-buildmatrix", "compat-table", *session.posargs)


@nox.session(name="fetch-site")
def fetch_site(session: nox.Session) -> None:
    """Copy the live site's release history into wheels/site, the base compat-table publishes on (-- --site-url URL)."""
    session.install("--only-binary", ONLY_BINARY, *BUILDMATRIX)
    session.run("torch-buildmatrix", "fetch-site", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation of mkdocs.yml, built strictly: `-- --build-only --site-dir DIR` writes it into DIR (the
    workflow's publish job puts it under the site's /docs/); without --build-only it is served on 127.0.0.1:8000."""
    session.install("mkdocs")
    if "--build-only" in session.posargs:
        session.run("mkdocs", "build", "--strict", *(arg for arg in session.posargs if arg != "--build-only"))
    else:
        session.run("mkdocs", "serve", "--strict", "--dev-addr", "127.0.0.1:8000", *session.posargs)

"""actions/checkout stand-in: fetch <owner>/<repo> from the stand-in GitHub ($ACT_STANDIN_GITHUB, bare repositories)
into $GITHUB_WORKSPACE/<path>, as the real action does from github.com: git init, origin set to the repository, a
shallow fetch of the event's commit (or of `ref`), and a checkout of its branch. origin stays the stand-in's bare
repository, so a `git push origin` in a later step lands there, where the test can read it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"::error::checkout stand-in: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def main() -> None:
    repository = os.environ["INPUT_REPOSITORY"]
    server = Path(os.environ["ACT_STANDIN_GITHUB"])
    origin = server / f"{repository}.git"
    if not origin.is_dir():
        sys.exit(f"::error::checkout stand-in: repository '{repository}' not found on the stand-in GitHub ({origin})")
    workspace = Path(os.environ["GITHUB_WORKSPACE"])
    dest = (workspace / os.environ["INPUT_PATH"]).resolve()
    if dest != workspace and workspace not in dest.parents:
        sys.exit(f"::error::checkout stand-in: path '{os.environ['INPUT_PATH']}' is not under $GITHUB_WORKSPACE")
    depth = int(os.environ["INPUT_FETCH_DEPTH"] or "1")
    ref = os.environ["INPUT_REF"]
    if not ref and repository == os.environ["GITHUB_REPOSITORY"]:
        wanted, branch = os.environ["GITHUB_SHA"], os.environ["GITHUB_REF"]  # the event's commit, on its ref
    else:
        wanted, branch = ref or "HEAD", ref
    dest.mkdir(parents=True, exist_ok=True)
    git("init", "-q", str(dest), cwd=dest)
    git("remote", "add", "origin", str(origin), cwd=dest)
    if os.environ["INPUT_PERSIST_CREDENTIALS"] == "true":
        # What the real action persists: the token, as an HTTP header every later git command sends.
        token = os.environ["INPUT_TOKEN"]
        git("config", "--local", "http.https://github.com/.extraheader", f"AUTHORIZATION: basic {token}", cwd=dest)
    fetch = ["fetch", "-q", "--no-tags", "origin"] if depth else ["fetch", "-q", "--tags", "origin"]
    if depth:
        fetch.insert(2, f"--depth={depth}")
    short = branch.removeprefix("refs/heads/") if branch.startswith("refs/heads/") else ""
    if short:
        git(*fetch, f"+{wanted}:refs/remotes/origin/{short}", cwd=dest)
        git("checkout", "-q", "--force", "-B", short, f"refs/remotes/origin/{short}", cwd=dest)
    else:
        git(*fetch, wanted, cwd=dest)
        git("checkout", "-q", "--force", "--detach", "FETCH_HEAD", cwd=dest)
    if not depth:
        git("fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*", cwd=dest)
    commit = git("rev-parse", "HEAD", cwd=dest)
    print(f"checked out {repository} at {commit} ({branch or 'detached'}) into {dest}")
    with Path(os.environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as output:
        output.write(f"ref={branch or commit}\ncommit={commit}\n")


if __name__ == "__main__":
    main()

"""The GitHub CLI (`gh`, part of GitHub's runner images), stood in for: the commands our workflows run, against the
stand-in GitHub. Pull requests are JSON files, $ACT_STANDIN_PULLS/<owner>/<repo>/<number>.json; branches are those of
the stand-in's bare repository ($ACT_STANDIN_GITHUB/<owner>/<repo>.git), where the job's `git push origin` went.
Any other command fails, naming itself, so a workflow that starts using one shows up here first."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

IMPLEMENTED = "gh auth setup-git; gh pr view <branch> --json state --jq .state; gh pr create; gh pr edit <branch>"


def fail(message: str, code: int = 1) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(code)


def repository() -> str:
    return os.environ.get("GH_REPO") or os.environ["GITHUB_REPOSITORY"]


def pulls_dir() -> Path:
    return Path(os.environ["ACT_STANDIN_PULLS"]) / repository()


def pulls() -> list[dict[str, object]]:
    found = [json.loads(p.read_text()) for p in pulls_dir().glob("*.json")] if pulls_dir().is_dir() else []
    return sorted(found, key=lambda pull: int(str(pull["number"])))


def open_pull(branch: str) -> dict[str, object] | None:
    return next((p for p in reversed(pulls()) if p["head"] == branch and p["state"] == "OPEN"), None)


def save(pull: dict[str, object]) -> None:
    pulls_dir().mkdir(parents=True, exist_ok=True)
    (pulls_dir() / f"{pull['number']}.json").write_text(json.dumps(pull, indent=2))


def remote_branch(branch: str) -> str:
    """The head commit of the branch on the stand-in GitHub, or ''."""
    bare = Path(os.environ["ACT_STANDIN_GITHUB"]) / f"{repository()}.git"
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
        cwd=bare,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def main(argv: list[str]) -> None:
    if not (os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN")):
        fail("gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable.", 4)
    if argv[:2] == ["auth", "setup-git"] and len(argv) == 2:
        return  # git talks to the stand-in's bare repositories directly: no credential helper to set
    if argv[:2] != ["pr", "view"] and argv[:2] != ["pr", "create"] and argv[:2] != ["pr", "edit"]:
        fail(f"gh stand-in: `gh {' '.join(argv)}` is not implemented (implemented: {IMPLEMENTED})", 2)
    parser = argparse.ArgumentParser(prog=f"gh pr {argv[1]}")
    if argv[1] == "view":
        parser.add_argument("branch")
        parser.add_argument("--json", required=True)
        parser.add_argument("--jq", required=True)
        args = parser.parse_args(argv[2:])
        if (args.json, args.jq) != ("state", ".state"):
            fail("gh stand-in: `gh pr view` implements only --json state --jq .state", 2)
        pull = next((p for p in reversed(pulls()) if p["head"] == args.branch), None)
        if pull is None:
            fail(f'no pull requests found for branch "{args.branch}"')
        print(pull["state"])
        return
    if argv[1] == "create":
        parser.add_argument("--head", required=True)
        parser.add_argument("--base", default="")
        parser.add_argument("--title", required=True)
        parser.add_argument("--body-file", required=True)
        args = parser.parse_args(argv[2:])
        head = remote_branch(args.head)
        if not head:
            fail(
                f"pull request create failed: GraphQL: Head sha can't be blank, Head ref must be a branch ({args.head})"
            )
        if open_pull(args.head) is not None:
            fail(f'a pull request for branch "{args.head}" already exists')
        number = len(pulls()) + 1
        base = args.base or os.environ.get("ACT_STANDIN_DEFAULT_BRANCH", "main")
        body = Path(args.body_file).read_text()
        save({"number": number, "state": "OPEN", "head": args.head, "head_sha": head, "base": base,
              "title": args.title, "body": body})  # fmt: skip
        print(f"https://github.com/{repository()}/pull/{number}")
        return
    parser.add_argument("branch")
    parser.add_argument("--body-file", required=True)
    args = parser.parse_args(argv[2:])
    pull = open_pull(args.branch)
    if pull is None:
        fail(f'no open pull requests found for branch "{args.branch}"')
    pull["body"] = Path(args.body_file).read_text()
    pull["head_sha"] = remote_branch(args.branch)
    save(pull)
    print(f"https://github.com/{repository()}/pull/{pull['number']}")


if __name__ == "__main__":
    main(sys.argv[1:])

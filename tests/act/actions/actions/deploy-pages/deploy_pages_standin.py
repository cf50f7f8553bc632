"""actions/deploy-pages stand-in: unpack the run's Pages artifact into $ACT_STANDIN_PAGES/deployments/<n>/ and make
it live by replacing the `live` symlink in one rename; the harness serves `live` at $ACT_STANDIN_PAGES_URL."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tarfile
from pathlib import Path


def main() -> None:
    if os.environ["INPUT_PREVIEW"] != "false":
        sys.exit("::error::deploy-pages stand-in: preview deployments are not implemented")
    name = os.environ["INPUT_ARTIFACT_NAME"]
    artifact = Path(os.environ["ACT_STANDIN_ARTIFACTS"]) / name
    if not (artifact / "artifact.json").is_file():
        sys.exit(f"::error::Failed to create deployment: no artifact named '{name}' in this run")
    manifest = json.loads((artifact / "artifact.json").read_text())
    if list(manifest["files"]) != ["artifact.tar"]:
        sys.exit(f"::error::Artifact '{name}' must hold one file, artifact.tar; it holds {sorted(manifest['files'])}")
    archive = artifact / "files" / "artifact.tar"
    if hashlib.sha256(archive.read_bytes()).hexdigest() != manifest["files"]["artifact.tar"]:
        sys.exit(f"::error::Artifact '{name}': artifact.tar does not match its recorded hash")
    pages = Path(os.environ["ACT_STANDIN_PAGES"])
    deployments = pages / "deployments"
    deployments.mkdir(parents=True, exist_ok=True)
    number = len(list(deployments.iterdir())) + 1
    target = deployments / str(number)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            unsafe = member.name.startswith("/") or ".." in Path(member.name).parts
            if unsafe or not (member.isfile() or member.isdir()):
                sys.exit(f"::error::Artifact '{name}': {member.name} is not a file or directory inside the site")
        tar.extractall(target)  # every member checked above (Python 3.11.2's tarfile has no extraction filter)
    staging = pages / f".live-{number}"
    staging.symlink_to(target)
    staging.replace(pages / "live")
    url = os.environ["ACT_STANDIN_PAGES_URL"].rstrip("/") + "/"
    print(f"Deployment {number} is live at {url} (from {target})")
    with Path(os.environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as output:
        output.write(f"page_url={url}\n")


if __name__ == "__main__":
    main()

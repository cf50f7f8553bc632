"""actions/download-artifact stand-in: copy artifacts of this run from $ACT_STANDIN_ARTIFACTS (as the upload-artifact
stand-in stored them) to where the real action puts them, after checking each one's digest."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked(artifact: Path) -> dict[str, str]:
    """The artifact's files (path -> sha256), after checking them and its digest against artifact.json."""
    manifest = json.loads((artifact / "artifact.json").read_text())
    files: dict[str, str] = manifest["files"]
    found = {p.relative_to(artifact / "files").as_posix() for p in (artifact / "files").rglob("*") if p.is_file()}
    digest = hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode()).hexdigest()
    if (
        found != set(files)
        or digest != manifest["digest"]
        or any(sha256(artifact / "files" / p) != h for p, h in files.items())
    ):
        sys.exit(f"::error::Digest validation failed for artifact(s): {manifest['name']}.")
    return files


def main() -> None:
    store = Path(os.environ["ACT_STANDIN_ARTIFACTS"])
    workspace = Path(os.environ["GITHUB_WORKSPACE"])
    destination = (workspace / Path(os.environ["INPUT_PATH"] or workspace).expanduser()).resolve()
    name = os.environ["INPUT_NAME"]
    available = sorted(p.parent for p in store.glob("*/artifact.json")) if store.is_dir() else []
    if name:
        chosen = [a for a in available if a.name == name]
        if not chosen:
            sys.exit(f"::error::Artifact '{name}' not found")
    else:
        pattern = os.environ["INPUT_PATTERN"]
        chosen = [a for a in available if not pattern or fnmatch.fnmatchcase(a.name, pattern)]
    # The real action's rule: a named artifact, merge-multiple, or a lone match lands in path itself.
    flat = bool(name) or os.environ["INPUT_MERGE_MULTIPLE"] == "true" or len(chosen) == 1
    for artifact in chosen:
        files = checked(artifact)
        target = destination if flat else destination / artifact.name
        for relative in files:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(artifact / "files" / relative, target / relative)
        print(f"Artifact {artifact.name} ({len(files)} files) downloaded to {target}")
    print(f"Total of {len(chosen)} artifact(s) downloaded")
    with Path(os.environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as output:
        output.write(f"download-path={destination}\n")


if __name__ == "__main__":
    main()

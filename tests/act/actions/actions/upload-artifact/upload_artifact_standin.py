"""actions/upload-artifact stand-in: choose files as @actions/glob does for the real action, store them under
$ACT_STANDIN_ARTIFACTS/<name>/files/ with artifact.json (id, digest, each file's sha256).

Selection, as the real action's search: one pattern per line, `!` excludes, later lines win; every pattern also
covers the descendants of what it names (implicit descendants), a trailing `/` names directories only; symlinks are
followed; a file or directory whose name starts with a dot is skipped with all it holds unless include-hidden-files.
Layout: paths relative to the one search path (the literal part of the patterns, an ancestor's covering its
descendants'), to the least common ancestor of several, or to its directory for a lone file named exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

FORBIDDEN_NAME = set('":<>|*?\r\n\\/')
GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Pattern:
    negate: bool
    regex: re.Pattern[str]
    directories_only: bool
    search_path: Path


def segment_regex(segment: str) -> str:
    out, i = "", 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[" and "]" in segment[i + 1 :]:
            end = segment.index("]", i + 1)
            body = segment[i + 1 : end]
            out += "[" + ("^" + body[1:] if body.startswith("!") else body) + "]"
            i = end
        else:
            out += re.escape(char)
        i += 1
    return out


def parse(line: str, workspace: Path) -> Pattern:
    negate = line.startswith("!")
    raw = line[1:] if negate else line
    absolute = os.path.normpath(workspace / Path(raw).expanduser())
    segments = absolute.split("/")[1:]
    regex = "".join("(?:/[^/]+)*" if s == "**" else "/" + segment_regex(s) for s in segments)
    literal = []
    for segment in segments:
        if GLOB_CHARS & set(segment):
            break
        literal.append(segment)
    return Pattern(negate, re.compile(regex or "/"), raw.endswith("/"), Path("/", *literal))


def matches(pattern: Pattern, path: Path) -> bool:
    """The pattern names the path or one of its ancestors (implicit descendants)."""
    return any(
        pattern.regex.fullmatch(str(candidate)) and (not pattern.directories_only or candidate.is_dir())
        for candidate in (path, *path.parents)
    )


def walk(root: Path, hidden: bool) -> list[Path]:
    """Every file under root (root itself if a file), following symlinks, skipping hidden names unless asked."""
    if not root.exists() or (not hidden and root.name.startswith(".")):
        return []
    if not root.is_dir():
        return [root]
    found, seen = [], set()
    for current, dirs, files in os.walk(root, followlinks=True):
        real = Path(current).resolve()
        if real in seen:  # a symlink cycle
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if hidden or not d.startswith("."))
        found += [Path(current) / f for f in sorted(files) if hidden or not f.startswith(".")]
    return found


def search_paths(patterns: list[Pattern]) -> list[Path]:
    """The distinct search paths of the including patterns; one inside another is covered by it."""
    paths: list[Path] = []
    for candidate in dict.fromkeys(p.search_path for p in patterns if not p.negate):
        if not any(candidate.is_relative_to(other) for other in paths):
            paths = [p for p in paths if not p.is_relative_to(candidate)] + [candidate]
    return paths


def choose(lines: list[str], workspace: Path, hidden: bool) -> tuple[list[Path], Path]:
    patterns = [parse(line, workspace) for line in lines]
    roots = search_paths(patterns)
    files = []
    for root in roots:
        for path in walk(root, hidden):
            included = False
            for pattern in patterns:
                if matches(pattern, path):
                    included = not pattern.negate
            if included:
                files.append(path)
    files = list(dict.fromkeys(files))
    if len(roots) > 1:
        return files, Path(os.path.commonpath(roots))
    if len(files) == 1 and roots and files[0] == roots[0]:
        return files, files[0].parent
    return files, roots[0] if roots else workspace


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def artifact_digest(files: dict[str, str]) -> str:
    """The stand-in's digest of an artifact: SHA-256 over each stored path and its file's SHA-256, sorted."""
    return hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode()).hexdigest()


def main() -> None:
    name = os.environ["INPUT_NAME"]
    if not name or FORBIDDEN_NAME & set(name):
        sys.exit(f'::error::The artifact name is not valid: {name!r}. It may not contain: " : < > | * ? \\r \\n \\ /')
    lines = [line.strip() for line in os.environ["INPUT_PATH"].splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    workspace = Path(os.environ["GITHUB_WORKSPACE"])
    files, root = choose(lines, workspace, os.environ["INPUT_INCLUDE_HIDDEN_FILES"] == "true")
    if not files:
        message = f"No files were found with the provided path: {' '.join(lines)}. No artifacts will be uploaded."
        behaviour = os.environ["INPUT_IF_NO_FILES_FOUND"]
        if behaviour == "error":
            sys.exit(f"::error::{message}")
        print(f"::warning::{message}" if behaviour == "warn" else message)
        return
    store = Path(os.environ["ACT_STANDIN_ARTIFACTS"])
    store.mkdir(parents=True, exist_ok=True)
    dest = store / name
    if dest.exists() and os.environ["INPUT_OVERWRITE"] != "true":
        sys.exit(
            f"::error::Failed to CreateArtifact: an artifact with this name already exists on the workflow run: {name}"
        )
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=store))
    hashes = {}
    for path in files:
        relative = path.relative_to(root).as_posix()
        target = staging / "files" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)  # the content, as the real upload sends it (symlinks followed)
        hashes[relative] = sha256(target)
    number = len(list(store.glob("*/artifact.json"))) + 1
    digest = artifact_digest(hashes)
    (staging / "artifact.json").write_text(json.dumps({"id": number, "name": name, "digest": digest, "files": hashes}))
    if dest.exists():
        shutil.rmtree(dest)
    staging.rename(dest)
    print(f"Artifact {name} ({len(files)} files from {root}) stored in {dest}")
    with Path(os.environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as output:
        output.write(f"artifact-id={number}\nartifact-url={dest.as_uri()}\nartifact-digest=sha256:{digest}\n")


if __name__ == "__main__":
    main()

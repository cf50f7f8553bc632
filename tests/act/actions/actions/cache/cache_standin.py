"""actions/cache restore and save stand-in: a cache store in a directory ($ACT_STANDIN_CACHES), kept between runs.

Store layout: <store>/<version>/<sha256 of the key>/ holding entry.json (key, paths, created, used) and data/<n>/,
the n-th path of the entry. version is a hash of the list of paths (the real cache's version also covers the
paths, so a restore with other paths misses). Trees are copied both ways (symlinks kept as symlinks), so nothing a
job does to its files reaches a stored entry; entries are written beside the store and renamed in whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

UNUSED_DAYS = 7  # GitHub evicts caches not accessed for this long
RESERVED = "Failed to save: Unable to reserve cache with key {key}, another job may be creating this cache."


def paths_input() -> list[str]:
    return [line.strip() for line in os.environ["INPUT_PATH"].splitlines() if line.strip()]


def resolve(path: str) -> Path:
    if any(mark in path for mark in "*?[!"):
        sys.exit(f"::error::cache stand-in: path '{path}' is a pattern; only plain paths are implemented")
    return Path(os.environ["GITHUB_WORKSPACE"]) / Path(path).expanduser()


def version_dir(paths: list[str]) -> Path:
    store = Path(os.environ["ACT_STANDIN_CACHES"])
    return store / hashlib.sha256("\n".join(paths).encode()).hexdigest()[:16]


def entries(version: Path) -> list[dict[str, object]]:
    found = []
    for manifest in version.glob("*/entry.json"):
        entry = json.loads(manifest.read_text())
        entry["dir"] = str(manifest.parent)
        found.append(entry)
    return found


def copy_tree(source: Path, dest: Path) -> int:
    """Copy every file of source into dest, keeping symlinks as symlinks; returns the number of files.

    The jobs of an act run share one HOME, so another job may be restoring the same entry into dest, or already
    using what it restored (uv hard-links from its cache while a second job restores that cache). So each file is
    written in a staging directory beside dest, outside the tree other jobs walk, then renamed into place; and a file
    already there with the same size and modification time (copy2 keeps it) is left alone, never replaced under a
    reader."""
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.standin-", dir=_existing_parent(dest)))
    try:
        if source.is_symlink() or source.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            place(source, dest, staging)
            return 1
        count = 0
        for root, dirs, files in os.walk(source):
            here = Path(root)
            target = dest / here.relative_to(source)
            target.mkdir(parents=True, exist_ok=True)
            for name in files + [d for d in dirs if (here / d).is_symlink()]:
                place(here / name, target / name, staging)
                count += 1
        return count
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _existing_parent(dest: Path) -> Path:
    """The directory the staging directory goes in: dest's parent, made if missing (the same file system as dest)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    return dest.parent


def same_file(source: Path, dest: Path) -> bool:
    """dest already holds what source would put there: the same symlink target, or the same size and mtime."""
    if source.is_symlink():
        return dest.is_symlink() and dest.readlink() == source.readlink()
    if dest.is_symlink() or not dest.is_file():
        return False
    have, want = dest.stat(), source.stat()
    return have.st_size == want.st_size and have.st_mtime_ns == want.st_mtime_ns


def place(source: Path, dest: Path, staging: Path) -> None:
    """Put one file or symlink in place in one rename from the staging directory, unless it is already there."""
    if same_file(source, dest):
        return
    temporary = staging / f"{os.getpid()}-{dest.name}"
    if source.is_symlink():
        temporary.symlink_to(source.readlink())
    else:
        # A copy, never a hard link: a job that rewrites a restored file in place (ccache's statistics, a tool's
        # own cache) would otherwise change the stored entry, which must stay as it was saved.
        shutil.copy2(source, temporary)
    temporary.replace(dest)


def write_output(**values: str) -> None:
    with Path(os.environ["GITHUB_OUTPUT"]).open("a", encoding="utf-8") as output:
        for name, value in values.items():
            output.write(f"{name.replace('_', '-')}={value}\n")


def touch(entry: dict[str, object]) -> None:
    """Mark the entry used, in one rename: two jobs restoring the same entry at once must never read it half-written
    (a plain write_text truncates first, and the other job's json.loads met an empty file)."""
    manifest = Path(str(entry["dir"])) / "entry.json"
    stored = json.loads(manifest.read_text())
    stored["used"] = time.time()
    temporary = manifest.with_name(f".entry.json.standin-{os.getpid()}")
    temporary.write_text(json.dumps(stored))
    temporary.replace(manifest)


def restore() -> None:
    paths = paths_input()
    key = os.environ["INPUT_KEY"]
    restore_keys = [line.strip() for line in os.environ["INPUT_RESTORE_KEYS"].splitlines() if line.strip()]
    available = entries(version_dir(paths))
    matched = next((e for e in available if e["key"] == key), None)
    for prefix in restore_keys:
        if matched is not None:
            break
        matched = next((e for e in available if e["key"] == prefix), None)
        if matched is None:
            prefixed = [e for e in available if str(e["key"]).startswith(prefix)]
            matched = max(prefixed, key=lambda e: float(str(e["created"])), default=None)
    if matched is None:
        if os.environ["INPUT_FAIL_ON_CACHE_MISS"] == "true":
            sys.exit(f"::error::Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: {key}")
        print(f"Cache not found for input keys: {', '.join([key, *restore_keys])}")
        write_output(cache_hit="false", cache_primary_key=key, cache_matched_key="")
        return
    if os.environ["INPUT_LOOKUP_ONLY"] != "true":
        files = sum(copy_tree(Path(str(matched["dir"])) / "data" / str(n), resolve(p)) for n, p in enumerate(paths))
        print(f"Cache restored from key: {matched['key']} ({files} files)")
    touch(matched)
    write_output(
        cache_hit=str(matched["key"] == key).lower(), cache_primary_key=key, cache_matched_key=str(matched["key"])
    )


def save() -> None:
    paths = paths_input()
    key = os.environ["INPUT_KEY"]
    version = version_dir(paths)
    if any(e["key"] == key for e in entries(version)):
        print(f"::warning::{RESERVED.format(key=key)}")
        return
    present = [(n, resolve(p)) for n, p in enumerate(paths) if resolve(p).exists()]
    if not present:
        print(
            "::warning::Path Validation Error: Path(s) specified in the action for caching do(es) not exist, "
            "hence no cache is being saved."
        )
        return
    version.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".saving-", dir=version))
    files = sum(copy_tree(source, staging / "data" / str(n)) for n, source in present)
    now = time.time()
    (staging / "entry.json").write_text(json.dumps({"key": key, "paths": paths, "created": now, "used": now}))
    try:
        staging.rename(version / hashlib.sha256(key.encode()).hexdigest())
    except OSError:  # another job saved the key meanwhile: the first entry stays
        shutil.rmtree(staging)
        print(f"::warning::{RESERVED.format(key=key)}")
        return
    print(f"Cache saved with key: {key} ({files} files)")
    evict(Path(os.environ["ACT_STANDIN_CACHES"]))


def evict(store: Path) -> None:
    """Drop entries unused for UNUSED_DAYS, then the least recently used while the store exceeds its limit."""
    limit = float(os.environ.get("ACT_STANDIN_CACHE_LIMIT_GB", "10")) * 1e9
    all_entries = [e for version in store.iterdir() if version.is_dir() for e in entries(version)]
    all_entries.sort(key=lambda e: float(str(e["used"])))
    sizes = {str(e["dir"]): tree_size(Path(str(e["dir"]))) for e in all_entries}
    total = sum(sizes.values())
    for entry in all_entries:
        stale = time.time() - float(str(entry["used"])) > UNUSED_DAYS * 86400
        if not stale and total <= limit:
            break
        shutil.rmtree(str(entry["dir"]), ignore_errors=True)
        total -= sizes[str(entry["dir"])]
        print(f"evicted cache {entry['key']} ({'unused for a week' if stale else 'store over its limit'})")


def tree_size(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


if __name__ == "__main__":
    {"restore": restore, "save": save}[sys.argv[1]]()

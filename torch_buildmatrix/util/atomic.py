"""Write files so that readers only ever see the old or the new content, never a partial one."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from torch_buildmatrix.util.failures import is_resource_error

# What we write is published (the site, logs, records): readable by a web server running as another user,
# whatever the umask. mkstemp alone creates 0600.
PUBLIC_FILE = 0o644
PRIVATE_FILE = 0o600


def write_text_atomic(path: Path, text: str, mode: int = PUBLIC_FILE) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), mode)


def write_new(path: Path, data: bytes | str, mode: int = PUBLIC_FILE, *, parent_made: bool = False) -> None:
    """A file of a directory no reader sees yet (a site version being staged): written in place, never over an
    existing file, and not synced: the caller makes the whole directory durable with one sync before it goes live (a
    temporary name and an fsync per file cost about 10 ms each here, 100 s for a site of 10 000 wheels).
    `parent_made`: the caller made the directory already (no mkdir per file: a site of 10 000 cells writes 30 000)."""
    if not parent_made:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)  # fchmod is not filtered by the umask
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
    except BaseException as exc:
        path.unlink(missing_ok=True)
        _name_the_file(exc, path)
        raise


def write_bytes_atomic(path: Path, data: bytes, mode: int = PUBLIC_FILE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)  # fchmod is not filtered by the umask
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _name_the_file(exc, path)
        raise


def copy_file_atomic(source: Path, dest: Path, mode: int = PUBLIC_FILE) -> None:
    """Copy under a hidden temporary name in the destination directory, then rename into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        os.fchmod(fd, mode)
        os.close(fd)
        shutil.copyfile(source, tmp)
        Path(tmp).replace(dest)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _name_the_file(exc, dest)
        raise


def _name_the_file(exc: BaseException, path: Path) -> None:
    """A full disk or a read-only directory is the destination's fault, whatever the error names (a failed write()
    names no file, shutil.copyfile names its source): the message the user sees names the file we meant to write."""
    if isinstance(exc, OSError) and (exc.filename is None or is_resource_error(exc)):
        exc.filename, exc.filename2 = str(path), None

"""Gives a built wheel another version (matrix.yaml's build.relabel): for projects whose build fixes its own version.

A published sdist says `version='2.1.2'` in its setup.py; torch-buildmatrix's wheels need the cell's local label
(2.1.2+pt2.13cpu) so each torch release gets its own file. The wheel is rewritten, not rebuilt: the .dist-info
directory is renamed, METADATA's Version changed, RECORD's hashes and sizes recomputed, and the file renamed.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from torch_buildmatrix.errors import StepFailed


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def relabel_wheel(wheel: Path, version: Version, out_dir: Path) -> Path:
    """A copy of `wheel` in out_dir whose version is `version`; its public version must be the wheel's own."""
    name, old, build, tags = parse_wheel_filename(wheel.name)
    if Version(old.public) != Version(version.public):
        raise StepFailed(
            "build",
            f"{wheel.name} is version {old}; build.relabel only adds the cell's local label, so plugin.version must "
            f"be {old.public} (matrix.yaml says {version.public})",
        )
    stem = wheel.name.split("-")[0]  # the distribution as the file spells it (normalized by the build backend)
    old_info, new_info = f"{stem}-{old}.dist-info/", f"{stem}-{version}.dist-info/"
    with zipfile.ZipFile(wheel) as source:
        if not any(n.startswith(old_info) for n in source.namelist()):
            raise StepFailed("build", f"{wheel.name} has no {old_info}")
        members = [(info, source.read(info)) for info in source.infolist() if not info.is_dir()]
    rewritten: list[tuple[zipfile.ZipInfo, bytes]] = []
    record_name = f"{new_info}RECORD"
    for info, original in members:
        target = new_info + info.filename[len(old_info) :] if info.filename.startswith(old_info) else info.filename
        data = original
        if target == f"{new_info}METADATA":
            lines = original.decode().split("\n")
            data = "\n".join(f"Version: {version}" if line.startswith("Version: ") else line for line in lines).encode()
        if target == record_name:
            continue  # written last, from the new contents
        copy = zipfile.ZipInfo(target, date_time=info.date_time)
        copy.external_attr, copy.compress_type = info.external_attr, zipfile.ZIP_DEFLATED
        rewritten.append((copy, data))
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for info, data in rewritten:
        writer.writerow([info.filename, _record_hash(data), len(data)])
    writer.writerow([record_name, "", ""])
    # The file's own build tag and tag string (cp311-cp311-linux_x86_64) stay as the backend spelled them.
    del build, tags
    filename = wheel.name.replace(f"{stem}-{old}-", f"{stem}-{version}-", 1)
    if canonicalize_name(name) != canonicalize_name(stem):
        raise StepFailed("build", f"{wheel.name}: its file name does not start with its distribution")
    out_dir.mkdir(parents=True, exist_ok=True)
    target_path = out_dir / filename
    with zipfile.ZipFile(target_path, "w") as archive:
        for info, data in rewritten:
            archive.writestr(info, data)
        stamp = rewritten[0][0].date_time if rewritten else (1980, 1, 1, 0, 0, 0)
        record_info = zipfile.ZipInfo(record_name, date_time=stamp)
        record_info.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(record_info, record.getvalue())
    return target_path

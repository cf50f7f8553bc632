"""Which Pythons a torch release supports, read from the wheels actually published (PEP 691 JSON or a find-links directory)."""

from __future__ import annotations

import configparser
import json
import logging
import os
import platform
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from buildmatrix.errors import UserError
from buildmatrix.model.matrix import TorchRelease, WheelSource
from buildmatrix.util.atomic import write_text_atomic

log = logging.getLogger(__name__)

DEFAULT_INDEX = "https://pypi.org/simple/"
PEP691 = "application/vnd.pypi.simple.v1+json"
CACHE_SECONDS = 24 * 3600


class RegistryError(UserError):
    exit_code = 7


@dataclass(frozen=True)
class PublishedWheel:
    filename: str
    version: Version
    python: Version  # interpreter the wheel is for, e.g. 3.11
    url: str


def pythons_from_filenames(filenames: list[tuple[str, str]], version: Version, machine: str) -> list[PublishedWheel]:
    """Keep CPython (non free-threaded) Linux wheels of exactly `version` for this machine's architecture."""
    out = []
    for filename, url in filenames:
        if not filename.endswith(".whl"):
            continue
        try:
            _name, wheel_version, _build, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        if wheel_version != version:
            continue
        for tag in tags:
            if (
                tag.interpreter.startswith("cp")
                and tag.abi == tag.interpreter
                and "linux" in tag.platform
                and tag.platform.endswith(machine)
            ):
                digits = tag.interpreter[2:]
                out.append(PublishedWheel(filename, wheel_version, Version(f"{digits[0]}.{digits[1:]}"), url))
                break
    return out


def pip_configured_find_links() -> list[str]:
    """The find-links pip uses on this machine: PIP_FIND_LINKS, else pip's config files (later files win)."""
    env = os.environ.get("PIP_FIND_LINKS")
    if env:
        return env.split()
    files = [
        Path("/etc/pip.conf"),
        Path("/etc/xdg/pip/pip.conf"),
        Path.home() / ".config/pip/pip.conf",
        Path.home() / ".pip/pip.conf",
    ]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    found: list[str] = []
    for file in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(file)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                found = parser.get(section, "find-links").split()
    return found


class Registry:
    """Answers 'which wheels of torch X exist?', caching index answers on disk."""

    def __init__(self, cache_dir: Path, index_url: str = DEFAULT_INDEX, offline: bool = False) -> None:
        self.cache_dir = cache_dir
        self.index_url = index_url.rstrip("/") + "/"
        self.offline = offline
        self.machine = platform.machine()

    def find_links_locations(self, source: WheelSource) -> list[str]:
        if source.location == "pip-config":
            locations = pip_configured_find_links()
            if not locations:
                raise RegistryError(
                    "wheels: pip-find-links, but pip has no find-links configured (PIP_FIND_LINKS or pip.conf)"
                )
            return locations
        return [source.location]

    def wheels(self, release: TorchRelease) -> list[PublishedWheel]:
        if release.wheels.kind == "registry":
            files = self._index_files("torch")
            return pythons_from_filenames(files, release.version, self.machine)
        out: list[PublishedWheel] = []
        for location in self.find_links_locations(release.wheels):
            directory = Path(location.removeprefix("file://"))
            if not directory.is_dir():
                log.warning("find-links location %s is not a directory; skipped", location)
                continue
            files = [(p.name, p.as_uri()) for p in sorted(directory.glob("torch-*.whl"))]
            local = Version(release.requirement_version)
            out += pythons_from_filenames(files, local, self.machine)
        return out

    def pythons(self, release: TorchRelease) -> set[Version]:
        return {w.python for w in self.wheels(release)}

    def index_files(self, project: str) -> list[tuple[str, str]]:
        """(filename, url) of every file the index lists for the project (cached for a day)."""
        return self._index_files(project)

    def _index_files(self, project: str) -> list[tuple[str, str]]:
        cache = self.cache_dir / f"{project}.json"
        fresh = cache.is_file() and time.time() - cache.stat().st_mtime < CACHE_SECONDS
        if not fresh and not self.offline:
            try:
                request = urllib.request.Request(self.index_url + project + "/", headers={"Accept": PEP691})
                with urllib.request.urlopen(request, timeout=60) as response:
                    body = response.read().decode()
                json.loads(body)
                write_text_atomic(cache, body)
            except (OSError, ValueError) as exc:
                if not cache.is_file():
                    raise RegistryError(
                        f"cannot read {self.index_url}{project}/ ({exc}) and no cached copy in {cache}"
                    ) from None
                log.warning("registry unreachable (%s); using cached %s", exc, cache)
        if not cache.is_file():
            raise RegistryError(f"offline and no cached copy of the {project} index in {cache}")
        data = json.loads(cache.read_text())
        return [(f["filename"], f["url"]) for f in data.get("files", [])]

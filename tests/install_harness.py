"""The install commands we publish, as a user meets them: collected from the pages compat-table writes, run by real
pip or uv through a shell into a real environment, against a site and a stand-in public index served on 127.0.0.1;
then whether what was installed is, byte for byte, the wheel a record names."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import shlex
import subprocess
import zipfile
from pathlib import Path

from fake_wheels import make_wheel
from torch_envs import python_of

COMMAND = re.compile(r"(?:uv )?pip install [^`\n<]+")


def markdown_commands(text: str) -> list[str]:
    """The install commands in Markdown text (code blocks and code spans)."""
    return [m.group(0).strip() for m in COMMAND.finditer(text)]


def page_commands(page: str) -> list[str]:
    """The commands the HTML shows (text of <pre> and <code>) and every one its script can show (the choices)."""
    shown = [html.unescape(m) for m in re.findall(r"<(?:pre|code)[^>]*>([^<]*)</(?:pre|code)>", page)]
    choices = json.loads(re.search(r'<script id="choices" type="application/json">(.*?)</script>', page, re.S)[1])  # type: ignore[index]
    scripted = [
        command
        for choice in choices["choices"].values()
        for key in ("index_command", "release_index_command", "find_links_command")
        if (command := choice[key])
    ]
    # "`uv pip install` takes the same arguments" names the tool, not a command to run
    return [c for c in shown if "pip install " in c] + scripted


def public_index(root: Path, squatted: bool) -> None:
    """A PEP 503 index (directory listings serve as project pages): newer torch (tiny stand-ins named `torch`, so an
    installer that wanted to upgrade torch could, and a test would see it), and with `squatted` look-alikes of
    torch_emu's names: torch-emu 99.0.0 and emu-driver 1.4.0, 2.1.0 and 2.99.0."""
    for version in ("2.13.0", "2.15.0"):
        make_wheel(root / "torch", "torch", version)
    if squatted:
        make_wheel(root / "torch-emu", "torch-emu", "99.0.0", extra_files={"torch_emu/SQUATTER": "x"})
        for version in ("1.4.0", "2.1.0", "2.99.0"):
            make_wheel(root / "emu-driver", "emu-driver", version, extra_files={"emu_driver/SQUATTER": "x"})


def environment(public_url: str, env: Path) -> dict[str, str]:
    """The machine's own index configuration is replaced by the public index at `public_url`; nothing is cached."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    return {
        **clean,
        "PATH": f"{env / 'bin'}{os.pathsep}{clean.get('PATH', '')}",  # `python` in $(...) is the user's
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": public_url,
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_NO_CONFIG": "1",
        "UV_INDEX_URL": public_url,
        "UV_NO_CACHE": "1",
    }


def run(command: str, tool: str, env: Path, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The documented command through a shell (it may hold $(...)), as pip in the env or as `uv pip --python`."""
    assert command.startswith("pip install "), command
    python = shlex.quote(str(python_of(env)))
    prefix = f"{python} -m pip install" if tool == "pip" else f"uv pip install --python {python}"
    return subprocess.run(
        prefix + command.removeprefix("pip install"),
        shell=True,
        capture_output=True,
        text=True,
        env=variables,
        timeout=600,
        check=False,
    )


def record_hashes(wheel: Path) -> dict[str, str]:
    """RECORD of a wheel: path -> sha256 (urlsafe base64), for the files a user imports."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        lines = archive.read(name).decode().splitlines()
    out = {}
    for line in lines:
        path, digest, _size = line.rsplit(",", 2)
        if digest and ".dist-info/" not in path:
            out[path] = digest.removeprefix("sha256=")
    return out


def site_packages(env: Path, python: str) -> Path:
    return env / "lib" / f"python{python}" / "site-packages"


def installed_is_ours(site: Path, recorded: Path, sha256: str) -> bool:
    """The installed files (in site-packages `site`) are those of the recorded wheel, which has the record's sha256."""
    assert hashlib.sha256(recorded.read_bytes()).hexdigest() == sha256
    for path, digest in record_hashes(recorded).items():
        file = site / path
        if not file.is_file():
            return False
        got = base64.urlsafe_b64encode(hashlib.sha256(file.read_bytes()).digest()).rstrip(b"=").decode()
        if got != digest:
            return False
    return True

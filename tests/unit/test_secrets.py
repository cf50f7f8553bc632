"""No secret reaches a log, a record or the site: URL credentials and secret variables are redacted, and containers
get secret variables by name only (docker reads the value from its own environment)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from torch_buildmatrix.builder.runners.base import BuildJob
from torch_buildmatrix.builder.runners.containers import build_container, build_env_command
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.docker import oci
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.builds import plan_builds
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util.process import run_logged
from torch_buildmatrix.util.redact import is_secret, redact, secret_values

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
INDEX = "https://fakeuser:FAKE-INDEX-PASSWORD@index.invalid/simple/"
PROXY = "http://proxyuser:FAKE-PROXY-PASSWORD@127.0.0.1:9"
TOKEN = "FAKE-GH-TOKEN-0123456789"
SECRETS = ("FAKE-INDEX-PASSWORD", "FAKE-PROXY-PASSWORD", TOKEN)
FAKE_ENV = {"PIP_INDEX_URL": INDEX, "HTTPS_PROXY": PROXY, "GITHUB_TOKEN": TOKEN}


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("PIP_INDEX_URL", INDEX, True),
        ("PIP_INDEX_URL", "https://pypi.org/simple/", False),
        ("HTTPS_PROXY", PROXY, True),
        ("https_proxy", "http://proxy.local:3128", False),
        ("GITHUB_TOKEN", TOKEN, True),
        ("TWINE_PASSWORD", "hunter22", True),
        ("AWS_SECRET_ACCESS_KEY", "abcd1234", True),
        ("UV_FIND_LINKS", "https://TOKENONLY@host/links", True),
        ("MAX_JOBS", "2", False),
        ("PATH", "/usr/bin:/bin", False),
        ("GPG_PASSPHRASE", "correct horse", True),
        ("PASSPHRASE", "correct horse", True),
        ("DB_PWD", "hunter22", True),
        ("PWD", "/work/project", False),  # the shell's working directory
        ("OLDPWD", "/work", False),
        ("GH_PAT", "ghp_FAKE0123", True),
        ("PATTERN", "*.whl", False),
        ("CODECOV_APITOKEN", "abcd1234", True),
        ("MYAPITOKEN", "abcd1234", True),
        ("SIGNING_KEY", "-----BEGIN FAKE-----", True),
        ("RELEASE_SIGNING_KEY", "-----BEGIN FAKE-----", True),
        ("KEYRING", "/etc/apt/trusted.gpg", False),
    ],
)
def test_which_variables_are_secret(name: str, value: str, secret: bool) -> None:
    assert is_secret(name, value) is secret
    # and a secret one's value never survives redaction of a text that shows it
    shown = redact(f"{name}={value} used", secret_values({name: value}))
    assert (value not in shown) is secret, shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('curl -H "Authorization: Bearer FAKE-BEARER-abc.def"', 'curl -H "Authorization: Bearer ***"'),
        ("authorization: bearer FAKE-BEARER-1", "authorization: bearer ***"),
        ("> Authorization: Basic ZmFrZTpmYWtl\r\n", "> Authorization: Basic ***\r\n"),
        ("Proxy-Authorization: Basic ZmFrZTpmYWtl", "Proxy-Authorization: Basic ***"),
        ("Authorization: token FAKE-GH-0123", "Authorization: token ***"),
        ("Authorization: FAKE-RAW-KEY", "Authorization: ***"),
        ("headers={'Authorization': 'Bearer FAKE-1'}", "headers={'Authorization': 'Bearer ***'}"),
        ("no header here: Bearer of news", "no header here: Bearer of news"),
    ],
)
def test_authorization_headers_are_masked(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_redact_masks_userinfo_and_secret_values() -> None:
    secrets = secret_values(FAKE_ENV)
    text = f"pip install --index-url {INDEX} --proxy {PROXY} (token {TOKEN}); password FAKE-INDEX-PASSWORD again"
    shown = redact(text, secrets)
    assert not any(s in shown for s in SECRETS) and "fakeuser" not in shown and "proxyuser" not in shown
    assert "https://***@index.invalid/simple/" in shown and "http://***@127.0.0.1:9" in shown


def test_run_logged_redacts_command_output_and_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in FAKE_ENV.items():
        monkeypatch.setenv(key, value)
    log = tmp_path / "cell.log"
    script = 'echo "index=$PIP_INDEX_URL token=$GITHUB_TOKEN"; echo "proxy $HTTPS_PROXY" >&2; exit 3'
    with pytest.raises(StepFailed) as failed:
        run_logged("build", ["sh", "-c", script, "--index-url", INDEX], log, env={"EXTRA_TOKEN": "FAKE-EXTRA-TOKEN"})
    text = log.read_text()
    everything = text + failed.value.message + failed.value.log_tail
    assert not any(s in everything for s in (*SECRETS, "FAKE-EXTRA-TOKEN")), everything
    assert "index=https://***@index.invalid/simple/ token=***" in text and "proxy http://***@127.0.0.1:9" in text
    assert "--index-url https://***@index.invalid/simple/" in text and "exit code 3" in failed.value.message


def test_docker_gets_secrets_by_name_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in docker client records its arguments (what a log or `ps` shows) and the environment it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "seen-by-docker"
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "docker $*"\necho "$PIP_INDEX_URL|$HTTPS_PROXY" >> {seen}\n')
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "cell.log"
    oci.run_container("img", ["true"], "driver", log, env={"PIP_INDEX_URL": INDEX, "UV_LINK_MODE": "copy"})
    oci.build_image(
        tmp_path,
        tmp_path / "Dockerfile",
        "img",
        {"HTTPS_PROXY": PROXY, "BASE": "debian"},
        step="image",
        log_file=log,
        platform="linux/amd64",
    )
    text = log.read_text()
    assert not any(s in text for s in SECRETS), text
    assert "--env=PIP_INDEX_URL " in text and "--env=UV_LINK_MODE=copy" in text
    assert "--build-arg=HTTPS_PROXY " in text and "--build-arg=BASE=debian" in text
    # docker itself still gets the values, from its environment
    assert seen.read_text().splitlines() == [f"{INDEX}|", f"|{PROXY}"]


def test_build_container_arguments_hold_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in FAKE_ENV.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(
        "schema-version: 2\n"
        "plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}\n"
        'python: ["3.11"]\n'
        'torch:\n  - {version: "2.13.0", variant: cpu, wheels: pip-find-links}\n'
        'images:\n  bookworm: {base: "debootstrap:bookworm", python: ["3.11"]}\n'
        "runner: docker\n"
    )
    matrix = load_matrix(root / "matrix.yaml")
    cells = expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch})
    [build] = plan_builds(matrix, cells).values()
    workspace = Workspace.for_root(root)
    job = BuildJob(build, matrix, workspace, tmp_path / "work", root / "plugin", tmp_path / "log", ())
    # the no-SDK shape of the tiny project: no SDK wheel to mount
    container = build_container(job, None, tmp_path / "cache", uv_cache=tmp_path / "uv")
    options, client = oci.env_options(container.env)  # as oci.run_container hands them to docker
    shown = (
        " ".join(options) + " ".join(str(mount) for mount in container.mounts) + " ".join(build_env_command(job, None))
    )
    assert not any(s in shown for s in SECRETS), shown
    assert "--env=HTTPS_PROXY" in options and client["HTTPS_PROXY"] == PROXY


def test_image_notes_never_show_a_mirror_credential(tmp_path: Path) -> None:
    from torch_buildmatrix.docker import images

    log = tmp_path / "image.log"
    images._note(
        log,
        "made buildmatrix-base:bookworm with debootstrap from https://apt:FAKE-MIRROR-PASSWORD@mirror.invalid/debian",
    )
    assert (
        log.read_text() == "# made buildmatrix-base:bookworm with debootstrap from https://***@mirror.invalid/debian\n"
    )

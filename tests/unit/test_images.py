"""Builder image planning: content-hashed tags, the base a matrix image names, host settings, the apt mirror."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from torch_buildmatrix.docker.images import base_reference, debian_mirror, debootstrap_command, passed_env, plan_image
from torch_buildmatrix.model.matrix import BuildImage
from torch_buildmatrix.model.pythons import Python

BOOKWORM = BuildImage("bookworm", "debootstrap:bookworm", (Python.parse("3.11"),))
MANYLINUX = BuildImage("ml", "quay.io/pypa/manylinux_2_28_x86_64", (Python.parse("3.12"),))


@pytest.fixture
def docker_dir(tmp_path: Path) -> Path:
    (tmp_path / "debian.Dockerfile").write_text("FROM ${BASE}\n")
    (tmp_path / "manylinux.Dockerfile").write_text("FROM ${BASE}\n")
    (tmp_path / "ca.crt").write_text("CA\n")
    return tmp_path


def test_debootstrap_base_or_plain_reference() -> None:
    assert BOOKWORM.suite == "bookworm" and base_reference(BOOKWORM) == "buildmatrix-base:bookworm"
    assert MANYLINUX.suite is None and base_reference(MANYLINUX) == "quay.io/pypa/manylinux_2_28_x86_64"


def test_tag_is_stable_and_follows_every_input(docker_dir: Path) -> None:
    ca = docker_dir / "ca.crt"
    plan = plan_image(BOOKWORM, ca, {}, docker_dir)
    assert plan.tag == plan_image(BOOKWORM, ca, {"PATH": "/elsewhere"}, docker_dir).tag
    assert plan.tag.startswith("buildmatrix-builder:bookworm-") and plan.build_args == {
        "BASE": "buildmatrix-base:bookworm",
        "PYTHONS": "3.11",
    }
    assert plan.dockerfile.name == "debian.Dockerfile"
    assert plan_image(MANYLINUX, ca, {}, docker_dir).dockerfile.name == "manylinux.Dockerfile"
    changed = [
        plan_image(BuildImage("bookworm", "debootstrap:bookworm", (Python.parse("3.12"),)), ca, {}, docker_dir).tag,
        plan_image(BuildImage("bookworm", "debootstrap:trixie", (Python.parse("3.11"),)), ca, {}, docker_dir).tag,
        plan_image(BOOKWORM, ca, {"HTTPS_PROXY": "http://proxy:3128"}, docker_dir).tag,
    ]
    (docker_dir / "debian.Dockerfile").write_text("FROM ${BASE}\nRUN true\n")
    changed.append(plan_image(BOOKWORM, ca, {}, docker_dir).tag)
    ca.write_text("another CA\n")
    changed.append(plan_image(BOOKWORM, ca, {}, docker_dir).tag)
    assert len({plan.tag, *changed}) == 6


def test_passed_env_keeps_proxies_and_network_indexes_only() -> None:
    env = {
        "HTTPS_PROXY": "http://p:3128",
        "PIP_INDEX_URL": "https://mirror/simple",
        "PIP_EXTRA_INDEX_URL": "file:///opt/pypi/simple",
        "PIP_FIND_LINKS": "/opt/wheels",
        "HOME": "/root",
        "NO_PROXY": "",
    }
    assert passed_env(env) == {"HTTPS_PROXY": "http://p:3128", "PIP_INDEX_URL": "https://mirror/simple"}


@pytest.mark.parametrize(
    ("files", "mirror"),
    [
        ({"sources.list": "deb http://ftp.de.debian.org/debian bookworm main\n"}, "http://ftp.de.debian.org/debian"),
        (
            {"sources.list.d/debian.sources": "Types: deb\nURIs: http://snapshot.example/debian/\nSuites: bookworm\n"},
            "http://snapshot.example/debian",
        ),
        (
            {
                "sources.list": "deb [arch=amd64] https://packages.cloud.google.com/apt cloud-sdk main\n"
                "deb [signed-by=/k.gpg] http://m/debian trixie main\n"
            },
            "http://m/debian",
        ),
        ({}, "http://deb.debian.org/debian"),
    ],
)
def test_debian_mirror_from_apt_sources(tmp_path: Path, files: dict[str, str], mirror: str) -> None:
    (tmp_path / "sources.list.d").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert debian_mirror(tmp_path) == mirror


def test_image_failure_names_the_error_line_not_the_echoed_command() -> None:
    from torch_buildmatrix.docker.images import _last_error

    tail = (
        'Step 8/11 : RUN set -e; echo "error: cannot serve $v" >&2\n ---> Running in 1\n'
        "error: this base's python3 is 3.11; it cannot serve Python 3.13\n"
        "\x1b[0mThe command '/bin/sh -c set -e; echo \"error: cannot serve $v\"' returned a non-zero code: 1\n"
    )
    assert _last_error(tail) == "error: this base's python3 is 3.11; it cannot serve Python 3.13"
    assert _last_error(
        "I: Retrieving InRelease\nE: Failed getting release file http://m/debian/dists/x/Release\n"
    ).startswith("E: Failed")


FAKE_DOCKER = """#!{python}
# A docker CLI stand-in that keeps images as label files in $FAKE_DOCKER_STATE and logs every call.
import json, os, sys
from pathlib import Path
state = Path(os.environ["FAKE_DOCKER_STATE"])
args = sys.argv[1:]
with (state / "calls").open("a") as log:
    log.write(" ".join(args[:2]) + "\\n")
def image(tag):
    return state / tag.replace(":", "_").replace("/", "_")
if args[:2] == ["image", "inspect"]:
    if not image(args[2]).exists():
        sys.exit(1)
    print(image(args[2]).read_text())
elif args[:2] == ["image", "rm"]:
    image(args[-1]).unlink(missing_ok=True)
elif args[0] == "ps":
    wanted = args[args.index("--filter") + 1].removeprefix("label=")
    for line in (state / "containers").read_text().splitlines():
        if line.split(" ", 1)[1] == wanted:
            print(line.split(" ", 1)[0])
elif args[0] == "rm":
    gone = set(args[2:])
    kept = [c for c in (state / "containers").read_text().splitlines() if c.split(" ", 1)[0] not in gone]
    (state / "containers").write_text("".join(c + "\\n" for c in kept))
elif args[0] == "build":
    with (state / "builds").open("a") as log:
        log.write(" ".join(args) + "\\n")
    tag = args[args.index("--tag") + 1]
    labels = dict(a.split("=", 1) for i, a in enumerate(args) if i and args[i - 1] == "--label")
    image(tag).write_text(json.dumps(labels))
"""


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import os
    import sys

    state = tmp_path / "engine"
    state.mkdir()
    (state / "calls").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER.format(python=sys.executable))
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))
    return state


def test_builder_image_is_verified_on_use_and_rebuilt_when_damaged(
    docker_dir: Path, fake_docker: Path, tmp_path: Path
) -> None:
    from torch_buildmatrix.docker.images import ImageBuilder

    plan = plan_image(MANYLINUX, docker_dir / "ca.crt", {}, docker_dir)
    log = tmp_path / "cell.log"

    def builds() -> int:
        return (fake_docker / "calls").read_text().count("build ")

    assert ImageBuilder(tmp_path / "cache", docker_dir / "ca.crt").ensure(plan, log) == plan.tag
    assert builds() == 1
    ImageBuilder(tmp_path / "cache", docker_dir / "ca.crt").ensure(plan, log)
    assert builds() == 1  # verified by its labels: reused
    stored = fake_docker / plan.tag.replace(":", "_")
    stored.write_text("{not json")  # an image the engine answers for, but not ours (or half imported)
    ImageBuilder(tmp_path / "cache", docker_dir / "ca.crt").ensure(plan, log)
    assert builds() == 2 and "building it again" in log.read_text()
    assert '"org.buildmatrix.image": "ml"' in stored.read_text()
    forced = ImageBuilder(tmp_path / "cache", docker_dir / "ca.crt")
    forced.ensure(plan, log, force=True)
    forced.ensure(plan, log, force=True)  # a second cell on the same image in this run
    assert builds() == 3 and "image rm" in (fake_docker / "calls").read_text()


def test_sweep_removes_only_the_containers_of_this_workspace(fake_docker: Path) -> None:
    from torch_buildmatrix.docker.oci import OWNER_LABEL, owner_label, remove_owned_containers
    from torch_buildmatrix.util.process import CHILDREN

    # What killed docker clients leave: their containers, labelled by the run that started them.
    (fake_docker / "containers").write_text(
        f"c1 {OWNER_LABEL}=/ws/build\nc2 {OWNER_LABEL}=/other/build\nc3 {OWNER_LABEL}=/ws/build\n"
    )
    assert remove_owned_containers("/ws/build") == 2
    assert (fake_docker / "containers").read_text() == f"c2 {OWNER_LABEL}=/other/build\n"
    assert remove_owned_containers("/ws/build") == 0
    CHILDREN.owner = "/ws/build"
    try:
        assert owner_label() == [f"--label={OWNER_LABEL}=/ws/build"]
    finally:
        CHILDREN.owner = None
    assert owner_label() == []


def test_a_suite_newer_than_debootstrap_is_made_with_sids_script(tmp_path: Path) -> None:
    # Debian 12's debootstrap has scripts up to trixie (each a link to sid); forky has none, and fails without one.
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "sid").write_text("# sid\n")
    (scripts / "bookworm").symlink_to("sid")
    rootfs = tmp_path / "rootfs"
    known = debootstrap_command("bookworm", rootfs, "http://mirror/debian", scripts)
    assert known == ["debootstrap", "--variant=minbase", "bookworm", rootfs, "http://mirror/debian"]
    newer = debootstrap_command("forky", rootfs, "http://mirror/debian", scripts)
    assert newer == [*known[:2], "forky", rootfs, "http://mirror/debian", scripts / "sid"]
    (scripts / "sid").unlink()  # no sid script either: debootstrap itself says the suite is unknown
    assert debootstrap_command("forky", rootfs, "http://mirror/debian", scripts)[-1] == "http://mirror/debian"


def _layered(tmp_path: Path, **extra: object) -> BuildImage:
    project = tmp_path / "project"
    (project / "docker").mkdir(parents=True, exist_ok=True)
    (project / "docker" / "sdk.Dockerfile").write_text("ARG BUILDER\nFROM ${BUILDER}\nCOPY sdk /sdk\n")
    (project / "sdk").mkdir(exist_ok=True)
    (project / "sdk" / "lib.c").write_text("int f(void) { return 1; }\n")
    return BuildImage(
        "tk2",
        "debootstrap:bookworm",
        (Python.parse("3.11"),),
        layer=project / "docker" / "sdk.Dockerfile",
        context=project,
        build_args=(("SDK_VERSION", "2.0"),),
        **extra,  # type: ignore[arg-type]
    )


def test_a_layer_is_built_on_the_builder_image_and_follows_its_inputs(
    docker_dir: Path, fake_docker: Path, tmp_path: Path
) -> None:
    from torch_buildmatrix.docker.images import ImageBuilder

    image = _layered(tmp_path)
    ca = docker_dir / "ca.crt"
    plan = plan_image(image, ca, {}, docker_dir)
    plain = plan_image(BuildImage("tk2", "debootstrap:bookworm", (Python.parse("3.11"),)), ca, {}, docker_dir)
    assert plan.builder_tag == plain.tag and plan.tag.startswith(plain.tag + "-")
    assert plan.layer is not None and plan.layer.build_args == {"BUILDER": plain.tag, "SDK_VERSION": "2.0"}
    (fake_docker / plan.base_reference.replace(":", "_")).write_text("{}")  # the debootstrapped base exists
    assert ImageBuilder(tmp_path / "cache", ca).ensure(plan, tmp_path / "log") == plan.tag
    builds = (fake_docker / "builds").read_text().splitlines()
    assert len(builds) == 2 and f"--tag {plain.tag} " in builds[0] and f"--tag {plan.tag} " in builds[1]
    assert f"--build-arg=BUILDER={plain.tag}" in builds[1] and "--build-arg=SDK_VERSION=2.0" in builds[1]
    assert builds[1].endswith(str(tmp_path / "project")) and "sdk.Dockerfile" in builds[1]
    ImageBuilder(tmp_path / "cache", ca).ensure(plan, tmp_path / "log")
    assert len((fake_docker / "builds").read_text().splitlines()) == 2  # both exist: nothing rebuilt
    (tmp_path / "project" / "sdk" / "lib.c").write_text("int f(void) { return 2; }\n")  # the context changed
    changed = plan_image(image, ca, {}, docker_dir)
    assert changed.builder_tag == plan.builder_tag and changed.tag != plan.tag
    other_args = plan_image(replace(image, build_args=(("SDK_VERSION", "1.4"),)), ca, {}, docker_dir)
    assert other_args.tag not in (plan.tag, changed.tag)


def test_the_projects_own_recipe_replaces_the_packages(docker_dir: Path, tmp_path: Path) -> None:
    own = tmp_path / "mine.Dockerfile"
    own.write_text("ARG BASE\nFROM ${BASE}\n")
    image = BuildImage("b", "debootstrap:bookworm", (Python.parse("3.11"),), dockerfile=own, build_args=(("X", "1"),))
    plan = plan_image(image, docker_dir / "ca.crt", {}, docker_dir)
    assert plan.dockerfile == own and plan.context == tmp_path and plan.build_args["X"] == "1"
    assert plan.tag != plan_image(BOOKWORM, docker_dir / "ca.crt", {}, docker_dir).tag and plan.layer is None

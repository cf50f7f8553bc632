"""The declared options table drives the loader, matrix.schema.json and the reference page: none drifts."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.options import OPTIONS, Kind
from torch_buildmatrix.model.optreader import PARSERS
from torch_buildmatrix.model.reference import first_sentence, reference_markdown
from torch_buildmatrix.model.schema import KIND_SCHEMA, schema_json

from conftest import VALID, WriteMatrix, run_cli

ROOT = Path(__file__).parents[2]
SCHEMA = json.loads((ROOT / "matrix.schema.json").read_text())
REFERENCE = ROOT / "docs" / "reference" / "matrix-options.md"


def test_committed_schema_is_generated_from_the_table() -> None:
    assert (ROOT / "matrix.schema.json").read_text() == schema_json(), "run `nox -s schema`"


def test_committed_reference_page_is_generated_from_the_table() -> None:
    assert REFERENCE.read_text() == reference_markdown(), "run `nox -s schema`"


def test_every_option_is_documented_on_the_reference_page() -> None:
    page = reference_markdown()
    for path, option in OPTIONS.items():
        assert f"`{path}`" in page and option.doc in page


def test_every_kind_has_a_parser_and_a_schema() -> None:
    containers = {Kind.MAPPING, Kind.LIST, Kind.NAMED}
    assert set(PARSERS) == set(Kind)
    assert set(KIND_SCHEMA) | containers == set(Kind)


def test_schema_check_command(tmp_path: Path) -> None:
    schema, page = tmp_path / "matrix.schema.json", tmp_path / "docs" / "options.md"
    wrote = run_cli(tmp_path, "schema", "--schema", str(schema), "--reference", str(page), timeout=60)
    assert wrote.returncode == 0, wrote.stderr
    assert schema.read_text() == schema_json() and page.read_text() == reference_markdown()
    assert run_cli(tmp_path, "schema", "--schema", str(schema), "--check", timeout=60).returncode == 0
    schema.write_text("{}\n")
    stale = run_cli(tmp_path, "schema", "--schema", str(schema), "--reference", str(page), "--check", timeout=60)
    assert stale.returncode == 1 and "matrix.schema.json" in stale.stdout
    assert schema.read_text() == "{}\n"  # --check writes nothing
    printed = run_cli(tmp_path, "schema", timeout=60)
    assert json.loads(printed.stdout) == json.loads(schema_json())


# Matrices that, together, set every declared option (each loads): a wheel SDK, a system SDK, no SDK.
SYSTEM_SDK = """\
sdk:
  kind: system
  name: toolkit
  versions:
    - {version: "3.1", provided-by: bookworm}
    - {version: "3.0", provided-by: host}
  library-dirs: [/opt/toolkit/lib]
  libraries: ["libtk*.so*"]
"""
EVERY_OPTION = [
    VALID,
    VALID.replace("  distribution: emu-driver\n", "  distribution: emu-driver\n  title: driver API\n").replace(
        "  source: driver\n", "  source: driver\n  version-env: EMU_DRIVER_API_VERSION\n  libraries: [libemu*.so*]\n"
    )
    + """\
exclude:
  - {torch: "2.4", python: "3.9", sdk: "1", variant: cuda}
include:
  - {torch: "2.4", python: "3.9", sdk: "1", variant: cuda}
images:
  bookworm: {base: "debootstrap:bookworm", python: ["3.11"]}
  layered:
    base: "debootstrap:bookworm"
    python: ["3.11"]
    layer: plugin/Dockerfile
    dockerfile: plugin/Dockerfile
    context: .
    build-args: {SDK_VERSION: "2.0"}
timeouts: {sdk: 1, build-env: 2, build: 3, check: 4, smoke-env: 5, smoke: 6, image: 7}
variants:
  cu121: {wheels: {index: https://example.org/whl/cu121}}
patches: patches
build:
  version-file: VERSION
  version-env: MY_VERSION
  sdk-version-env: MY_SDK_VERSION
  relabel: false
  requires: [ninja]
  project-requires: true
  env: {FORCE_CUDA: "0"}
  generated: [VERSION]
check: {torch-pin: none, build-info: pkg/_build_info.py, build-info-torch: TORCH}
smoke: {requires: [pytest], args: ["--features={features}"], requires-for: [{torch: "<2.6", requires: [tqdm]}]}
probe: {interfaces: [{prefix: csrc/aten/, interface: ATen kernels}]}
publish: {readme: README.md, docs: docs}
""",
    VALID.replace(
        "    wheels: pip-find-links", "    wheels: {index: https://example.org/whl/cpu, local-find-links: /}"
    ).replace(
        "    patches: [pre-2.7]",
        '    patches: [pre-2.7]\n    python: ["3.11"]\n    variant: cpu\n    wheels: {find-links: /}',
    ),
    VALID[: VALID.index("sdk:")].replace("drv.{sdk_major}", "{variant}")
    + VALID[VALID.index("python:") :]
    + SYSTEM_SDK.replace("sdk:", "images:\n  bookworm: {base: debian:12, python: ['3.11']}\nsdk:", 1),
]


def test_the_loader_reads_every_declared_option_and_only_those(write_matrix: WriteMatrix) -> None:
    read: set[str] = set()
    (write_matrix().parent / "plugin" / "Dockerfile").write_text("ARG BUILDER\nFROM ${BUILDER}\n")
    for text in EVERY_OPTION:
        read |= load_matrix(write_matrix(text)).options_read
    assert read == set(OPTIONS)


def test_project_matrix_validates() -> None:
    jsonschema.validate(yaml.safe_load((ROOT / "matrix.yaml").read_text()), SCHEMA)


@pytest.mark.parametrize("text", EVERY_OPTION)
def test_schema_accepts_what_the_loader_accepts(text: str) -> None:
    jsonschema.validate(yaml.safe_load(text), SCHEMA)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("python",), ["3.11", "3.11.0"]),
        (("python",), ["3.11", "3.11"]),
        (("plugin", "source"), "/etc"),
        (("plugin", "source"), "../outside"),
        (("sdk", "source"), "."),
        (("sdk", "kind"), "none"),
        (("plugin", "label"), ""),
        (("images",), {"deb": {"base": "debootstrap:../../X", "python": ["3.11"]}}),
        (("images",), {"deb": {"base": "/srv/rootfs", "python": ["3.11"]}}),
        (("images",), {"../x": {"base": "debian:12", "python": ["3.11"]}}),
        (("runner",), "autp"),
        (("plugin", "distribution"), "a/b"),
        (("timeouts",), {"build": -1}),
        (("exclude",), [{}]),
        (("torch", 0, "wheels"), {"find-links": "/x", "index": "https://x"}),
        (("torch", 0, "wheels"), "ftp"),
        (("schema-version",), 1),
        (("build",), {"version-file": "/abs"}),
        (("build",), {"version-file": "a/../b"}),
        (("build",), {"version-env": "1X"}),
        (("build",), {"relabel": "yes"}),
        (("build",), {"env": {"X": 1}}),
        (("check",), {"torch-pin": "exact"}),
        (("smoke",), {"args": "--x"}),
    ],
)
def test_schema_refuses_what_the_parser_refuses(where: tuple[str | int, ...], value: object) -> None:
    document = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    target = document
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def test_schema_accepts_image_references() -> None:
    document = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    document["images"] = {
        "a": {"base": "quay.io/pypa/manylinux_2_28_x86_64:2024.11.16-1", "python": ["3.11"]},
        "b": {"base": "localhost:5000/debian:12", "python": ["3.11"]},
        "c": {"base": "debian:12", "python": ["3.11"]},
    }
    jsonschema.validate(document, SCHEMA)


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("One. Two.", "One."),
        ("A name (letters, digits, . _ -). More.", "A name (letters, digits, . _ -)."),
        ("Pick one, e.g. `x.y`. Then.", "Pick one, e.g. `x.y`."),
        ("No full stop", "No full stop"),
    ],
)
def test_first_sentence(text: str, first: str) -> None:
    assert first_sentence(text) == first

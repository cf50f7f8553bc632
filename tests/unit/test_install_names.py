"""Every install command we write names only distributions we mean: ours (this repository's and its examples'), torch,
a tool we name (uv, nox, pip), or one on ALLOWED below, each with its reason. The commands are collected from the
README, docs/**/*.md, `init`'s templates, what `init` writes, and the install page and Markdown table compat-table
renders, so a command that would install someone else's package under a name like ours fails here (issue 37)."""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from install_harness import COMMAND, page_commands
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from torch_buildmatrix.publish.advice import ONLY_BINARY
from torch_buildmatrix.publish.markdown import compatibility_markdown, readme_section
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.tableparse import parse_table
from torch_buildmatrix.starter import TEMPLATES, project_facts, starter_files

REPO = Path(__file__).parents[2]
PUBLISHED = REPO / "tests" / "fixtures" / "published" / "compatibility.json"  # a full run: every command is given


def _distributions_of(matrix: Path) -> set[str]:
    data = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    sdk = data.get("sdk") or {}
    return {data["plugin"]["distribution"], *([sdk["distribution"]] if "distribution" in sdk else [])}


OURS = {"torch-buildmatrix", *_distributions_of(REPO / "matrix.yaml")} | {
    name for matrix in sorted((REPO / "examples").glob("*/matrix.yaml")) for name in _distributions_of(matrix)
}
TOOLS = {"torch", "uv", "nox", "pip"}
ALLOWED = {
    "ruff": "the linter `nox -s lint` runs: the developers' setup in docs/how-to/check-a-change.md",
    "mypy": "the type checker `nox -s lint` runs: the same setup",
    "types-pyyaml": "PyYAML's type stubs for mypy: the same setup",
    "pre-commit": "runs .pre-commit-config.yaml on each commit: the same setup",
    "mkdocs": "the `docs` session of the noxfile `init` writes builds the adopter's documentation with it",
    "torch-scatter": "the adopters' guide's worked example: a published extension built from its own sdist and "
    "installed from the site that example publishes",
    "my-ext": "the adopters' guide's placeholder for the adopter's own distribution",
}
# Named only to say never to install it: the text around each such command must say so.
NEVER = {"buildmatrix": re.compile(r"Never `$|so `$")}

# Options that take the next argument as their value (pip's and uv pip's), so the value is no requirement.
VALUE_OPTIONS = {
    "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-p", "--python", "-r", "--requirement",
    "-c", "--constraint", "--only-binary", "--no-binary", "-t", "--target", "--prefix", "--root",
}  # fmt: skip
PLACEHOLDER = re.compile(r"@[A-Z_]+@")  # a template's field, filled by init (its output is checked as written)


def requirement_names(arguments: list[str]) -> list[str]:
    """The distributions an installer's arguments name (PEP 503 names): requirements, and wheels or projects by
    path (a wheel's name from its file name; a project directory is this repository's own)."""
    names = []
    skip = False
    for argument in arguments:
        if skip:
            skip = False
            continue
        if argument.startswith("-"):
            skip = argument in VALUE_OPTIONS
            continue
        if argument in ("...", "") or PLACEHOLDER.fullmatch(argument):
            continue
        if argument.startswith((".", "/", "~")):
            path = Path(argument.split("[", 1)[0])
            names.append(
                canonicalize_name(path.name.split("-", 1)[0]) if path.suffix == ".whl" else "torch-buildmatrix"
            )
            continue
        try:
            names.append(canonicalize_name(Requirement(argument).name))
        except InvalidRequirement:
            pytest.fail(f"{argument!r} is neither an option, a path nor a requirement")
    return names


def substituted(command: str) -> str:
    """The command with each $(...) (parentheses may nest inside) replaced by a value, 0."""
    while (start := command.find("$(")) >= 0:
        depth, end = 0, start + 1
        for end in range(start + 1, len(command)):
            depth += {"(": 1, ")": -1}.get(command[end], 0)
            if depth == 0:
                break
        command = command[:start] + "0" + command[end + 1 :]
    return command


def shell_arguments(command: str) -> list[str]:
    """The arguments after `install` of one shell command (up to &&, ;, | or a comment); $(...) stands for a value."""
    text = re.split(r"&&|\|\||;|\||\s#", substituted(command.replace("\\\n", " ")))[0]
    try:
        words = shlex.split(text)
    except ValueError:  # cut short inside quotes (COMMAND stops at a <placeholder>): closed where it was cut
        words = shlex.split(text + ('"' if text.count('"') % 2 else "'"))
    return words[words.index("install") + 1 :]


def text_commands(where: str, text: str) -> list[tuple[str, str, str]]:
    """(where, command, the 12 characters before it) for each pip or uv pip command in the text."""
    text = re.sub(r"\n\s*", "\n", text.replace("\\\n", " "))
    joined = re.sub(r"(`[^`\n]*)\n([^`\n]*`)", r"\1 \2", text)  # a code span wrapped over two lines of prose
    return [(where, m.group(0).strip(), joined[max(0, m.start() - 12) : m.start()]) for m in COMMAND.finditer(joined)]


def noxfile_installs(where: str, source: str) -> list[tuple[str, list[str]]]:
    """(where, arguments) of each `session.install(...)` in a noxfile, with module-level lists of strings resolved."""
    tree = ast.parse(source)
    lists = {
        target.id: [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    strings = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    installs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "install":
            arguments: list[str] = []
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    arguments.append(arg.value)
                elif isinstance(arg, ast.Name) and arg.id in strings:
                    arguments.append(strings[arg.id])
                elif isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
                    arguments += lists[arg.value.id]
                else:
                    pytest.fail(f"{where}: session.install argument {ast.unparse(arg)} is not a literal")
            installs.append((where, arguments))
    return installs


def init_output(root: Path) -> dict[str, str]:
    (root / "tests").mkdir()
    return {str(rel): text for rel, text in starter_files(root, project_facts(root)).items()}


def collected(tmp_path: Path) -> list[tuple[str, str, list[str], str]]:
    """(where, command, its arguments, the text before it) of every install command we write."""
    texts = {"README.md": (REPO / "README.md").read_text(encoding="utf-8")}
    texts |= {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").rglob("*.md"))}
    texts |= {f"template {p.name}": p.read_text(encoding="utf-8") for p in sorted(TEMPLATES.iterdir())}
    written = init_output(tmp_path)
    texts |= {f"init's {rel}": text for rel, text in written.items()}
    table = parse_table(PUBLISHED.read_text(encoding="utf-8"))
    texts |= {
        "rendered compatibility page": compatibility_markdown(table),
        "rendered README block": readme_section(table),
    }
    found = [(w, c, shell_arguments(c), before) for w, t in texts.items() for w, c, before in text_commands(w, t)]
    found += [("rendered site page", c, shell_arguments(c), "") for c in page_commands(site_page(table))]
    noxfiles = {
        "template noxfile.py": (TEMPLATES / "noxfile.py").read_text(),
        "init's noxfile.py": written["noxfile.py"],
    }
    for where, source in noxfiles.items():
        found += [(w, f"session.install{tuple(a)}", a, "") for w, a in noxfile_installs(where, source)]
    return found


def test_every_install_command_names_only_distributions_we_mean(tmp_path: Path) -> None:
    commands = collected(tmp_path)
    wheres = {where for where, *_ in commands}
    for expected in ("README.md", "docs/guide/use-buildmatrix.md", "template workflow.yml", "init's noxfile.py"):
        assert expected in wheres, f"no install command collected from {expected}"
    assert {"rendered site page", "rendered compatibility page", "rendered README block"} <= wheres
    unexpected = []
    for where, command, arguments, before in commands:
        for name in requirement_names(arguments):
            if name in NEVER:
                assert NEVER[name].search(before), f"{where}: {command!r} installs {name}, which is not ours"
            elif name not in OURS | TOOLS | ALLOWED.keys():
                unexpected.append(f"{where}: {name} in {command!r}")
    assert unexpected == [], "install commands name distributions that are not ours nor allowed:\n" + "\n".join(
        unexpected
    )


def bare_installs_of_the_tool(arguments: list[str]) -> list[str]:
    """The requirements for torch-buildmatrix by name that an index could answer with anything: not pinned to one
    version, or not taken as a wheel only (--only-binary :all: or naming it). A path or URL is what it names."""
    only_binary: set[str] = set()
    for option, following in zip(arguments, [*arguments[1:], ""], strict=True):
        if option.startswith("--only-binary"):
            value = option.partition("=")[2] or following
            only_binary |= {canonicalize_name(v) if v != ":all:" else v for v in value.split(",")}
    bare = []
    values = {i + 1 for i, argument in enumerate(arguments) if argument in VALUE_OPTIONS}
    for argument in (a for i, a in enumerate(arguments) if i not in values and not a.startswith("-")):
        try:
            requirement = Requirement(argument)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != "torch-buildmatrix" or requirement.url:
            continue
        pinned = [s for s in requirement.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if not pinned or not only_binary & {":all:", "torch-buildmatrix"}:
            bare.append(argument)
    return bare


def test_no_command_leaves_our_tools_name_to_an_index(tmp_path: Path) -> None:
    """Issue 37: our instructions install torch-buildmatrix from a path, a URL, or pinned and as a wheel only."""
    bare = [
        f"{where}: {command!r}"
        for where, command, arguments, _ in collected(tmp_path)
        if bare_installs_of_the_tool(arguments)
    ]
    assert bare == [], "installs of torch-buildmatrix that an index could answer with anything:\n" + "\n".join(bare)
    assert bare_installs_of_the_tool(shell_arguments('pip install "torch-buildmatrix[docker]" uv'))
    assert bare_installs_of_the_tool(shell_arguments('pip install "torch-buildmatrix[docker]==0.2.0" uv'))
    assert not bare_installs_of_the_tool(shell_arguments('pip install --only-binary=:all: "torch-buildmatrix==0.2.0"'))
    assert not bare_installs_of_the_tool(["--only-binary", "torch_buildmatrix", "torch-buildmatrix[docker]==0.2.0"])


@pytest.mark.parametrize(
    ("command", "names"),
    [
        ("pip install torch-emu --only-binary=:all: --extra-index-url ", ["torch-emu"]),
        ("pip install nox uv && nox -s lint", ["nox", "uv"]),
        ("pip install -e '.[test]' ruff types-PyYAML", ["torch-buildmatrix", "ruff", "types-pyyaml"]),
        ("uv pip install --python /tmp/x/bin/python torch==2.13.0 --index-url https://e.org/cpu", ["torch"]),
        ('pip install torch-emu "torch==$(python -c "print(v(\'torch\'))")" --no-deps', ["torch-emu", "torch"]),
        ("pip install ./torch_buildmatrix-0.2.0-py3-none-any.whl uv", ["torch-buildmatrix", "uv"]),
        ('pip install "torch-buildmatrix[docker] @ git+https://github.com/o/r@v1" uv', ["torch-buildmatrix", "uv"]),
        ("pip install buildmatrix", ["buildmatrix"]),
    ],
)  # fmt: skip
def test_the_names_a_command_installs(command: str, names: list[str]) -> None:
    assert requirement_names(shell_arguments(command)) == names


def test_a_look_alike_in_a_command_is_caught(tmp_path: Path) -> None:
    commands = text_commands("x.md", "Run `pip install torch-buildmatrix buildmatrix-tools` then")
    assert [requirement_names(shell_arguments(c)) for _w, c, _b in commands] == [
        ["torch-buildmatrix", "buildmatrix-tools"]
    ]
    assert "buildmatrix-tools" not in OURS | TOOLS | ALLOWED.keys()
    warning = text_commands("x.md", "Never `pip install buildmatrix`: it is another program")
    assert NEVER["buildmatrix"].search(warning[0][2])
    assert not NEVER["buildmatrix"].search(text_commands("x.md", "Run `pip install buildmatrix`")[0][2])


def binary_only(arguments: list[str]) -> bool:
    """--only-binary :all:, in either spelling pip and uv take."""
    pairs = zip(arguments, [*arguments[1:], ""], strict=True)
    return ONLY_BINARY in arguments or ("--only-binary", ":all:") in pairs


def test_every_command_for_our_wheels_is_binary_only(tmp_path: Path) -> None:
    """torch-emu and emu-driver by name (a public index may hold an sdist or a look-alike under either) are installed
    as wheels only wherever we say how, the plugin doctor's suggestions (shown in docs/how-to/install-wheel.md)
    included."""
    wheels_only = {"torch-emu", "emu-driver"}
    lacking = [
        f"{where}: {command!r}"
        for where, command, arguments, _ in collected(tmp_path)
        if wheels_only & set(requirement_names(arguments)) and not binary_only(arguments) and "..." not in arguments
    ]
    assert lacking == [], "commands that could build our names from source:\n" + "\n".join(lacking)


def test_the_plugin_doctor_suggests_binary_only_commands() -> None:
    spec = importlib.util.spec_from_file_location("torch_emu_guard_names", REPO / "plugin" / "torch_emu" / "_guard.py")
    assert spec is not None and spec.loader is not None
    guard = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = guard  # its dataclasses look their module up
    spec.loader.exec_module(guard)
    build = {"TORCH_VERSION": "2.4.1", "DRIVER_VERSION": "2.1.0+emu", "DRIVER_API_MAJOR": "2", "DRIVER_API": "2.1"}
    for command in (guard.index_command((2, 12)), guard.driver_command(build, "<site>")):
        assert binary_only(shell_arguments(command)), command

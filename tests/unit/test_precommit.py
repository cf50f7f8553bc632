"""The pre-commit hooks (.pre-commit-config.yaml) run what `nox -s lint` runs: the same commands over the same trees,
each check once, every one of them local (no hook repository fetched from the network)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def _constants(module: ast.Module) -> dict[str, tuple[str, ...]]:
    """The noxfile's module-level tuples and lists of strings (PYTHON_TREES...), by name."""
    out = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Tuple | ast.List) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
            ):
                out[node.targets[0].id] = tuple(str(e.value) for e in value.elts)  # type: ignore[attr-defined]
    return out


def _words(args: list[ast.expr], constants: dict[str, tuple[str, ...]]) -> list[str]:
    words: list[str] = []
    for arg in args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            words.append(arg.value)
        elif isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) and arg.value.id in constants:
            words.extend(constants[arg.value.id])
        else:
            raise AssertionError(f"noxfile.py:{arg.lineno}: a lint argument this test cannot read: {ast.dump(arg)}")
    return words


def nox_lint_commands(noxfile: Path) -> list[list[str]]:
    """What the lint session runs: each session.run's command, and each session it notifies as `nox -s NAME`."""
    module = ast.parse(noxfile.read_text(), str(noxfile))
    constants = _constants(module)
    [lint] = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "lint"]
    commands = []
    for node in ast.walk(lint):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "run":
                commands.append(_words(node.args, constants))
            elif node.func.attr == "notify":
                commands.append(["nox", "-s", *_words(node.args, constants)])
    return commands


def hook_commands(config: dict[str, Any]) -> list[list[str]]:
    return [[*hook["entry"].split(), *hook.get("args", [])] for repo in config["repos"] for hook in repo["hooks"]]


def test_the_hooks_run_what_nox_lint_runs() -> None:
    nox = nox_lint_commands(REPO / "noxfile.py")
    assert ["nox", "-s", "cpp-format"] in nox and any(c[:2] == ["ruff", "check"] for c in nox)  # it read the session
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    hooks = hook_commands(config)
    assert sorted(hooks) == sorted(nox)
    assert len(hooks) == len({tuple(h) for h in hooks})  # each check once


def test_every_hook_is_local_and_runs_over_the_whole_trees() -> None:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    for hook in config["repos"][0]["hooks"]:
        # The session's commands name their trees: the staged files appended would check them twice, or alone.
        assert hook["language"] == "system" and hook["pass_filenames"] is False, hook["id"]


def test_the_reader_sees_a_step_the_hooks_lack(tmp_path: Path) -> None:
    noxfile = (REPO / "noxfile.py").read_text()
    marker = '    session.notify("cpp-format")\n'
    assert marker in noxfile
    changed = tmp_path / "noxfile.py"
    changed.write_text(noxfile.replace(marker, marker + '    session.run("codespell", *PYTHON_TREES)\n'))
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    assert sorted(hook_commands(config)) != sorted(nox_lint_commands(changed))

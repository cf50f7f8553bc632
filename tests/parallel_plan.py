"""How a test run is spread over pytest-xdist's workers (`nox -s tests` runs two: `-n 2 --dist loadfile
--no-loadscope-reorder`, so a module's tests and its module fixtures stay on one worker): which tests start first,
and the groups a `--dist loadgroup` run would keep together. Under loadgroup, xdist 3.8 still split the act tests,
whose explicit group is below, over both workers; two act runs met apt's locks, so act runs also take one machine-wide
lock (tests/act_harness.py). Loaded for every run (`-p
parallel_plan` in pyproject.toml); without xdist it only orders the tests.

Groups: each test gets at most one `xdist_group`, and a group runs on one worker, one test after another.
- Tests that share a module- or session-scoped fixture of ours are one group, so the fixture is made once: xdist
  makes a session fixture once per worker, and a module fixture again wherever the module's tests go (the real
  plugin's 2.13 cells, an act run, a built site or package).
- An explicit `xdist_group` mark joins a test to a group for what no fixture shows: the act tests share the cache
  store (~/.cache/buildmatrix-act, kept between runs), which every run restores from, saves to and evicts from, and
  the runs of one stand-in repository share its entries.
Tests joined by a fixture and a mark are one group, named by the mark; two different marks in one group are an error.
Everything else is independent: servers listen on port 0, projects and HOMEs are copied into tmp_path, the tool's
caches are per project, and the shared ones (uv's, ccache, tests/torch_envs.py's) take their own locks.

Order: xdist hands groups and tests out in collection order and knows nothing of durations, so the long work goes
first and the short tests fill the gaps at the end: act runs, then `slow` tests (the real plugin built and
smoke-tested), then the other integration tests, then unit tests; among equals, groups holding more slow tests first.
Tests of one module stay together, as written (module fixtures are made once in a run without xdist too).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

SHARED_SCOPES = ("module", "package", "session")


def pytest_configure(config: pytest.Config) -> None:
    # xdist registers it too; without xdist the marks stay valid under --strict-markers
    config.addinivalue_line("markers", "xdist_group(name): run on one worker with the other tests of the group")


def _ours(path: str | None, root: Path) -> bool:
    if not path:
        return False
    resolved = Path(path).resolve()
    return resolved.is_relative_to(root) and "site-packages" not in resolved.parts


def shared_fixtures(item: pytest.Item, root: Path) -> set[str]:
    """Keys of the fixture instances of ours the test shares with others: one per module for a module-scoped
    fixture (its instance is the test module's), one per fixture for a package- or session-scoped one."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    keys = set()
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name, ())
        if not defs or defs[-1].scope not in SHARED_SCOPES:  # the last definition is the one the test gets
            continue
        fixturedef = defs[-1]
        try:
            source = inspect.getsourcefile(fixturedef.func)
        except TypeError:
            continue
        if not _ours(source, root):
            continue
        if fixturedef.scope == "module":
            keys.add(f"module {item.path}")
        else:
            keys.add(f"{fixturedef.scope} {source}::{name}")
    return keys


def explicit_group(item: pytest.Item) -> str | None:
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    if len(names) > 1:
        raise pytest.UsageError(f"{item.nodeid}: more than one xdist_group ({', '.join(sorted(names))})")
    return next(iter(names), None)


class _Sets:
    """Union-find over keys: tests sharing any key end in one set."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def join(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        for other in keys[1:]:
            a, b = self.find(keys[0]), self.find(other)
            if a != b:
                self.parent[max(a, b)] = min(a, b)


def plan_groups(items: list[pytest.Item], root: Path) -> dict[str, str]:
    """Each grouped test's group name, by nodeid."""
    sets = _Sets()
    keys: dict[str, set[str]] = {}
    for item in items:
        mine = shared_fixtures(item, root)
        mark = explicit_group(item)
        if mark is not None:
            mine.add(f"mark {mark}")
        if mine:
            keys[item.nodeid] = mine
            sets.join(sorted(mine))
    members: dict[str, set[str]] = {}
    for mine in keys.values():
        members.setdefault(sets.find(next(iter(mine))), set()).update(mine)
    names = {}
    for root_key, every in members.items():
        marks = sorted(k.removeprefix("mark ") for k in every if k.startswith("mark "))
        if len(marks) > 1:
            raise pytest.UsageError(
                f"tests of xdist groups {', '.join(marks)} share a fixture ({', '.join(sorted(every))}): "
                "give them one group"
            )
        names[root_key] = marks[0] if marks else _short(root_key, root)
    return {nodeid: names[sets.find(next(iter(mine)))] for nodeid, mine in keys.items()}


def _short(key: str, root: Path) -> str:
    """A group name for messages and -v output: the key with paths relative to the repository."""
    return key.replace(f"{root}/", "")


@dataclass
class _Unit:
    """Tests that run together: a group, or an ungrouped test module."""

    rank: int  # 0 act, 1 slow, 2 integration, 3 the rest
    slow: int  # slow tests in it
    first: int  # its first test's position as collected


def rank(item: pytest.Item) -> int:
    for position, marker in enumerate(("act", "slow", "integration")):
        if item.get_closest_marker(marker) is not None:
            return position
    return 3


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath.resolve()
    groups = plan_groups(items, root)
    units: dict[str, _Unit] = {}
    unit_of = {}
    for index, item in enumerate(items):
        group = groups.get(item.nodeid)
        if group is not None and explicit_group(item) is None:
            item.add_marker(pytest.mark.xdist_group(group))
        name = f"group {group}" if group is not None else f"module {item.path}"
        unit_of[item.nodeid] = name
        unit = units.setdefault(name, _Unit(rank(item), 0, index))
        unit.rank = min(unit.rank, rank(item))
        unit.slow += item.get_closest_marker("slow") is not None
    order = {id(item): index for index, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple[int, int, int, int]:
        unit = units[unit_of[item.nodeid]]
        return unit.rank, -unit.slow, unit.first, order[id(item)]

    items.sort(key=key)

"""Smoke suite of torch_emu: runs against the INSTALLED wheel, from any directory.

Tests name the feature they exercise with @pytest.mark.feature("snake_case_key") (matrix.yaml's smoke.features
gives each key the title the compatibility page shows); with
--emu-features-json=PATH the session writes each feature's outcome there
("passed" or "passed: <detail>", "failed", or "not available: <reason>") for the compatibility table.
Driver- or torch-gated tests skip with the reason, through smoke_gates.requires_driver / requires_torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("EMU_DEVICE_COUNT", "2")

import sys

import torch

# Test modules import the gates from smoke_gates.py beside this file (pytest runs with --import-mode=importlib).
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--emu-features-json", default=None, help="write each feature's outcome to this JSON file")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "feature(name): the feature a smoke test exercises (for the compatibility table)"
    )
    config.addinivalue_line(
        "markers", "deep: a heavy check of the wheel and torch alone (smoke.tiers' deep tier: once per build)"
    )
    config._emu_features = {}  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("feature")
    if marker is None:
        return
    features: dict[str, str] = item.config._emu_features  # type: ignore[attr-defined]
    name = marker.args[0]
    if report.skipped and report.when in ("setup", "call"):
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else "skipped"
        reason = reason.replace("Skipped: ", "")
        features.setdefault(name, reason if reason.startswith("not available") else f"not available: {reason}")
    elif report.failed:
        features[name] = "failed"
    elif report.when == "call" and report.passed and features.get(name) != "failed":
        detail = getattr(item, "_emu_feature_detail", "")
        features[name] = f"passed: {detail}" if detail else "passed"


@pytest.fixture
def emu_feature_detail(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Call with a short text (e.g. pass counts) that the feature's outcome carries: "passed: <text>"."""

    def record(text: str) -> None:
        request.node._emu_feature_detail = text

    return record


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--emu-features-json")
    if path:
        with Path(path).open("w") as handle:
            json.dump(dict(sorted(session.config._emu_features.items())), handle, indent=2)  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _device_zero_and_drained():
    """Each test starts on emu:0 and leaves no queued work behind."""
    torch.emu.set_device(0)
    yield
    for index in range(torch.emu.device_count()):
        torch.emu.synchronize(index)
    torch.emu.set_device(0)

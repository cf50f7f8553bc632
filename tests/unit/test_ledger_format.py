"""The release ledger's one format: what the writer writes, the reader reads back exactly (property tests through the
real writer and reader), every ledger the previous release could write still reads, the size limit is one constant
for both, and a withdrawal's first reason and date are kept for good."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torch_buildmatrix.errors import LedgerFull, RecordError
from torch_buildmatrix.publish.ledger import (
    LEDGER_SCHEMA_VERSION,
    MAX_LEDGER_BYTES,
    MAX_REASON_BYTES,
    MAX_WHEELS,
    Ledger,
    LedgerLimits,
    WithdrawalKind,
    parse_ledger,
    reason_problem,
)
from torch_buildmatrix.util.when import utc_iso

SHA = "ab" * 32
META = "cd" * 32
WHEN = "2026-05-03T10:22:07Z"
LATER = "2026-06-01T08:00:00Z"
PATH = "torch2.13/torch_emu-0.1.0+torch.2.13.drv.2-py3-none-any.whl"
HOSTILE_TEXT = [
    "wrong results\nsee issue 42",
    "tab\there",
    "x" * 5000,
    "\r\n\x01\x1f\x7f\u2028\u0085 </a><script>",
    '"quoted" & <angled>',
    "",
]


def entry_of(ledger: Ledger, path: str = PATH, **options: object) -> None:
    ledger.add(
        path,
        SHA,
        metadata_sha256=META,
        requires_python=options.get("requires_python", ">=3.9"),  # type: ignore[arg-type]
        when=WHEN,
        indexes=["2.13"],
        cells=["torch2.13-cpu-cp311-drv2"],
    )


def previous_release_ledger(reason: str, requires_python: str) -> str:
    """released.json as the previous release (schema 2) wrote it: json.dumps of whatever it was given."""
    entry = {
        "sha256": SHA,
        "metadata_sha256": META,
        "requires_python": requires_python,
        "published": WHEN,
        "indexes": ["2.13"],
        "cells": ["torch2.13-cpu-cp311-drv2"],
        "yanked": reason,
    }
    removed = dict(entry, removed={"reason": reason, "on": WHEN, "restorable": False})
    other = PATH.replace("0.1.0", "0.2.0")
    body = {"schema_version": 2, "wheels": {PATH: entry, other: removed}}
    return json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"


@pytest.mark.parametrize("text", HOSTILE_TEXT[:-1])
def test_every_ledger_the_previous_release_wrote_reads(text: str) -> None:
    """Multi-line, tabbed and long reasons and a tabbed Requires-Python: the previous reader refused them (exit 7 on
    every later publish); they read, and the next write is schema 3 that reads back the same."""
    ledger = parse_ledger(previous_release_ledger(text, f">=3.9,\t<4{text}"), "released.json")
    assert ledger.upgraded_from == 2
    assert ledger.wheels[PATH].yanked == text and ledger.wheels[PATH].requires_python == f">=3.9,\t<4{text}"
    assert ledger.wheels[PATH.replace("0.1.0", "0.2.0")].removed == text
    again = parse_ledger(ledger.to_json(), "again")
    assert again.wheels == ledger.wheels and json.loads(ledger.to_json())["schema_version"] == LEDGER_SCHEMA_VERSION


@pytest.mark.parametrize("reason", HOSTILE_TEXT[:-1])
def test_a_withdrawal_reason_round_trips_exactly(reason: str) -> None:
    ledger = Ledger()
    entry_of(ledger)
    ledger.yank(PATH, reason, WHEN)
    back = parse_ledger(ledger.to_json(), "released.json")
    assert back.wheels[PATH].yanked == reason and back.wheels[PATH].yanked_on == WHEN


def test_a_second_withdrawal_keeps_the_first_reason_and_date_and_adds_history() -> None:
    ledger = Ledger()
    entry_of(ledger)
    ledger.remove(PATH, "built from a bad tag", WHEN)
    ledger.remove(PATH, "again, on CI", LATER)
    ledger.yank(PATH, "and yanked", LATER)
    back = parse_ledger(ledger.to_json(), "released.json").wheels[PATH]
    assert (back.removed, back.removed_on) == ("built from a bad tag", WHEN)
    assert [(h.kind, h.reason, h.on) for h in back.history] == [
        (WithdrawalKind.REMOVE, "again, on CI", LATER),
        (WithdrawalKind.YANK, "and yanked", LATER),
    ]
    ledger2 = Ledger()
    entry_of(ledger2)
    ledger2.yank(PATH, "first", WHEN)
    ledger2.yank(PATH, "second", LATER)
    yanked = parse_ledger(ledger2.to_json(), "x").wheels[PATH]
    assert (yanked.yanked, yanked.yanked_on, len(yanked.history)) == ("first", WHEN, 1)


def test_the_size_limit_is_one_constant_for_writer_and_reader() -> None:
    assert MAX_WHEELS >= 1_000_000 and MAX_LEDGER_BYTES >= MAX_WHEELS * 400
    small = LedgerLimits(wheels=2)
    ledger = Ledger(limits=small)
    entry_of(ledger, PATH)
    entry_of(ledger, PATH.replace("0.1.0", "0.2.0"))
    with pytest.raises(LedgerFull, match="more than 2 wheels"):
        entry_of(ledger, PATH.replace("0.1.0", "0.3.0"))
    assert len(ledger) == 2
    text = ledger.to_json()
    parse_ledger(text, "ok", small)
    with pytest.raises(RecordError, match="at most 1"):
        parse_ledger(text, "over", LedgerLimits(wheels=1))
    with pytest.raises(LedgerFull, match="bytes"):
        Ledger(dict(ledger.wheels), limits=LedgerLimits(bytes=len(text) - 1)).to_json()


def test_the_writer_refuses_a_path_the_reader_would_refuse() -> None:
    with pytest.raises(RecordError, match="cannot record"):
        entry_of(Ledger(), "torch2.13/a__-0-py3-none-any.whl")
    with pytest.raises(RecordError, match="cannot record"):
        entry_of(Ledger(), "../outside/x-1-py3-none-any.whl")


def test_a_new_reason_is_any_text_up_to_16_kib() -> None:
    assert reason_problem("line one\n\tline two") == ""
    assert reason_problem("é" * (MAX_REASON_BYTES // 2)) == ""
    assert "16 KiB" in reason_problem("é" * (MAX_REASON_BYTES // 2 + 1))
    assert "empty" in reason_problem(" \n\t")
    assert "UTF-8" in reason_problem("bad \udcff byte")


# ---- property tests: the real writer, then the real reader ---------------------------------------------------------

free_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
names = st.from_regex(r"[a-z][a-z0-9]{0,10}(_[a-z0-9]{1,5})?", fullmatch=True)
versions = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True)
cells = st.from_regex(r"[A-Za-z0-9_+][A-Za-z0-9._+-]{0,40}", fullmatch=True)
when = st.integers(0, 4_000_000_000).map(utc_iso)


@st.composite
def ledgers(draw: st.DrawFn) -> Ledger:
    ledger = Ledger()
    for name, version in draw(st.lists(st.tuples(names, versions), max_size=6, unique=True)):
        path = f"torch2.13/{name}-{version}-py3-none-any.whl"
        ledger.add(
            path,
            draw(st.text("0123456789abcdef", min_size=64, max_size=64)),
            metadata_sha256=draw(st.sampled_from(["", META])),
            requires_python=draw(st.none() | free_text),
            when=draw(when),
            indexes=draw(st.lists(st.from_regex(r"\d{1,4}\.\d{1,4}", fullmatch=True), max_size=3)),
            cells=draw(st.lists(cells, max_size=3)),
        )
        for kind, reason, on in draw(st.lists(st.tuples(st.sampled_from(WithdrawalKind), free_text, when), max_size=3)):
            if kind is WithdrawalKind.YANK:
                ledger.yank(path, reason, on)
            else:
                ledger.remove(path, reason, on)
    return ledger


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledgers())
def test_whatever_the_writer_writes_the_reader_reads_back_exactly(ledger: Ledger) -> None:
    back = parse_ledger(ledger.to_json(), "released.json")
    assert back.wheels == ledger.wheels
    assert back.to_json() == ledger.to_json()


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(string.printable, max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=20,
        ).map(lambda v: json.dumps({"schema_version": 3, "wheels": {PATH: v}})),
    )
)
def test_a_hostile_ledger_is_a_record_error_never_a_traceback(text: str) -> None:
    try:
        ledger = parse_ledger(text, "released.json")
    except RecordError as exc:
        assert "released.json" in str(exc)
    else:
        assert parse_ledger(ledger.to_json(), "again").wheels == ledger.wheels

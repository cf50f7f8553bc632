"""Times as the published files spell them: UTC, ISO 8601 to the second ("2026-05-03T10:22:07Z")."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def utc_iso(seconds: float | None = None) -> str:
    """`seconds` since the epoch (default: now) as 2026-05-03T10:22:07Z."""
    return datetime.fromtimestamp(time.time() if seconds is None else seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_problem(text: str) -> str:
    """Why `text` is not such a time ('' when it is)."""
    if not ISO.fullmatch(text):
        return "is not a UTC time like 2026-05-03T10:22:07Z"
    try:
        datetime.fromisoformat(text[:-1])  # the pattern matched: only the ranges are left to check
    except ValueError as exc:
        return f"is not a date ({exc})"
    return ""


def day(text: str | None) -> str:
    """The date part of such a time, for pages ("2026-05-03"); '' for none."""
    return text[:10] if text else ""

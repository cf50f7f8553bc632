"""Feature keys: the snake_case names a smoke suite reports its features by, their default titles, and the phrases
that named features before keys were snake_case (records and tables written then still read, converted to keys)."""

from __future__ import annotations

import re

MAX_KEY = 80
FEATURE_KEY = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
KEY_RULE = "a snake_case key: lower-case words of letters and digits joined by _, starting with a letter, at most 80"
# What a feature's name could be before keys: words, digits, spaces and ( ) . / + _ -, e.g. "any Python (py3-none
# wheel)". Never Markdown or HTML markup, never a newline.
LEGACY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.()+/-]{0,79}")
MAX_TITLE = 200
_NOT_WORD = re.compile(r"[^a-z0-9]+")


def is_feature_key(name: object) -> bool:
    return isinstance(name, str) and len(name) <= MAX_KEY and FEATURE_KEY.fullmatch(name) is not None


def legacy_key(name: str) -> str | None:
    """The key of a name written before keys were snake_case ("any Python (py3-none wheel)" ->
    "any_python_py3_none_wheel"), the key itself for a key, None for a name of neither kind."""
    if is_feature_key(name):
        return name
    if not LEGACY_NAME.fullmatch(name):
        return None
    key = _NOT_WORD.sub("_", name.lower()).strip("_")
    return key if is_feature_key(key) else None


def default_title(key: str) -> str:
    """What the pages show for a key no title is declared for: its words ("host_allocator" -> "Host allocator")."""
    words = key.replace("_", " ")
    return words[:1].upper() + words[1:]


def title_problem(title: object) -> str:
    """Why `title` cannot be a feature's title ('' when it can): one line of plain text."""
    if not isinstance(title, str) or not title.strip():
        return "is not a text"
    if len(title) > MAX_TITLE:
        return f"is {len(title)} characters long (at most {MAX_TITLE})"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in title):
        return "holds a newline or a control character"
    return ""

"""Reads back the start tags of the pages we generate (index pages, the front page), for the checks before a site
goes live. Our pages quote every attribute value with double quotes and escape what is inside (html.escape), so one
regular expression reads them exactly; HTMLParser did the same at about a hundredth of the speed, which a site of
10 000 cells (tens of thousands of anchors) could not afford."""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"<(?P<tag>[a-zA-Z][a-zA-Z0-9]*)(?P<attrs>(?:\s+[^\s=<>\"'/]+(?:=\"[^\"<>]*\")?)*)\s*/?>")
_ATTR = re.compile(r"([^\s=<>\"'/]+)(?:=\"([^\"<>]*)\")?")


def start_tags(text: str, names: frozenset[str]) -> list[tuple[str, dict[str, str]]]:
    """(tag, attributes) of every start tag whose name is in `names`, in order; values unescaped, a bare attribute
    ("" value) as "". Tag and attribute names are lower-cased."""
    out = []
    for match in _TAG.finditer(text):
        tag = match["tag"].lower()
        if tag not in names:
            continue
        attrs = {name.lower(): html.unescape(value or "") for name, value in _ATTR.findall(match["attrs"])}
        out.append((tag, attrs))
    return out


def anchors(text: str) -> list[dict[str, str]]:
    """The attributes of every <a> of a page."""
    return [attrs for _tag, attrs in start_tags(text, frozenset({"a"}))]

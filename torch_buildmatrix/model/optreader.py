"""Reads matrix.yaml's values through the declared options table, collecting every problem with its file and line.

The loader (`model/loader.py`) walks the document with `child`, `items` and `entries` (optwalk.py), which only
accept declared options and remember which ones were read (a test compares that with the table), and turns values into
typed ones with `parse`, one parser per Kind. Every problem is kept, tagged with its key and line, and raised at once
by the loader as a MatrixError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from torch_buildmatrix.model.options import (
    DEBOOTSTRAP_BASE,
    DISTRIBUTION_NAME,
    ENV_NAME,
    FILE_GLOB,
    IMAGE_REFERENCE,
    MAX_SECONDS,
    PIP_CONFIG,
    PLAIN_NAME,
    VARIANT_NAME,
    Kind,
)
from torch_buildmatrix.model.optwalk import Node, OptionWalker, close_hint, describe
from torch_buildmatrix.model.pythons import Python


def torch_selector(text: str) -> SpecifierSet:
    """'2.4' means the 2.4 series; anything starting with an operator is a PEP 440 specifier."""
    text = text.strip()
    if text and text[0] in "<>=!~":
        return SpecifierSet(text)
    Version(text)  # raises InvalidVersion for nonsense
    return SpecifierSet(f"=={text}.*") if text.count(".") < 2 else SpecifierSet(f"=={text}")


class OptionReader(OptionWalker):
    """The walker with a typed reader per option Kind (`parse`): each collects its problems, returns None after one."""

    def parse(self, node: Node) -> Any:
        """The node's value, typed by its option's kind; the option's default when absent; None after a problem."""
        if not node.present:
            return node.option.default if node.option.has_default else None
        parser = PARSERS[node.option.kind]
        return parser(self, node)

    def version(self, node: Node) -> Version | None:
        value = node.value
        if not isinstance(value, str):
            self.not_text(node)
            return None
        try:
            return Version(value)
        except InvalidVersion:
            self.problem(node.key, f"'{value}' is not a valid version (PEP 440, e.g. \"2.4.1\")")
            return None

    def not_text(self, node: Node) -> None:
        """A version or selector YAML typed as something else: a number loses digits (2.10 reads as 2.1)."""
        value = node.value
        if isinstance(value, int | float) and not isinstance(value, bool):
            written = self.lines.text(node.key) or repr(value)
            read_as = f" (YAML reads it as {value!r})" if written != repr(value) else ""
            self.problem(node.key, f'{written} is a number{read_as}; quote versions, e.g. "{written}"')
        else:
            self.problem(node.key, f'expected a quoted version like "2.4", got {describe(value)}')

    def versions(self, node: Node) -> tuple[Version, ...]:
        """A list of versions, each once."""
        out: list[Version] = []
        items = self.sequence(node)
        for index, value in enumerate(items):
            key = f"{node.key}[{index}]"
            version = self.version(Node(node.option, key, value))
            if version is None:
                continue
            if version in out:
                first = out.index(version)
                self.problem(key, f"'{value}' repeats {node.key}[{first}] ('{items[first]}'); list each version once")
                continue
            out.append(version)
        if not out and isinstance(node.value, list) and not node.value:
            self.problem(node.key, "needs at least one version")
        return tuple(out)

    def python(self, node: Node) -> Python | None:
        """A quoted Python minor: "3.11", or "3.13t" for the free-threaded build."""
        if not isinstance(node.value, str):
            self.not_text(node)
            return None
        try:
            return Python.parse(node.value)
        except ValueError:
            self.problem(
                node.key,
                f'\'{node.value}\' is not a Python minor (allowed: major.minor, e.g. "3.11", or "3.13t" for the '
                "free-threaded build)",
            )
            return None

    def python_minors(self, node: Node) -> tuple[Python, ...]:
        """A list of Python minors ("3.11", "3.13t"), each once."""
        out: list[Python] = []
        items = self.sequence(node)
        for index, value in enumerate(items):
            key = f"{node.key}[{index}]"
            python = self.python(Node(node.option, key, value))
            if python is None:
                continue
            if python in out:
                first = out.index(python)
                self.problem(key, f"'{value}' repeats {node.key}[{first}] ('{items[first]}'); list each Python once")
                continue
            out.append(python)
        if not out and isinstance(node.value, list) and not node.value:
            self.problem(node.key, "needs at least one version")
        return tuple(out)

    def choice(self, node: Node, allowed: tuple[str, ...] | None = None) -> str | None:
        allowed = allowed if allowed is not None else node.option.allowed
        if node.value not in allowed:
            self.problem(
                node.key,
                f"'{node.value}' is not allowed (allowed: {', '.join(allowed)}){close_hint(str(node.value), allowed)}",
            )
            return None
        return str(node.value)

    def integer(self, node: Node) -> int | None:
        value = node.value
        allowed = node.option.allowed
        if isinstance(value, bool) or not isinstance(value, int) or (allowed and str(value) not in allowed):
            what = f" (allowed: {', '.join(allowed)})" if allowed else ""
            self.problem(node.key, f"{value!r:.40} is not allowed{what}")
            return None
        return value

    def count(self, node: Node) -> int | None:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.problem(node.key, f"{value!r:.40} is not allowed (allowed: a whole number, 1 or more)")
            return None
        return value

    def text(self, node: Node) -> str | None:
        if not isinstance(node.value, str) or not node.value:
            self.problem(node.key, f"expected a non-empty string, got {describe(node.value)}")
            return None
        if "\x00" in node.value:  # no path, name or command may hold one (os calls refuse it)
            self.problem(node.key, f"{node.value!r:.60} holds a NUL character (allowed: printable text)")
            return None
        return node.value

    def name(self, node: Node) -> str | None:
        text = self.text(node)
        if text is not None and not PLAIN_NAME.fullmatch(text):
            self.problem(node.key, f"'{text}' is not a plain name (allowed: letters, digits, . _ -)")
            return None
        return text

    def variant(self, node: Node) -> str | None:
        text = self.text(node)
        if text is not None and not VARIANT_NAME.fullmatch(text):
            self.problem(
                node.key,
                f"'{text}' is not a variant name (allowed: lowercase letters, digits and dots, starting with a "
                "letter, e.g. cpu, cuda, cu121, rocm6.2, xpu)",
            )
            return None
        return text

    def absolute_paths(self, node: Node) -> tuple[str, ...]:
        out = []
        for index, value in enumerate(self.sequence(node)):
            item = Node(node.option, f"{node.key}[{index}]", value)
            text = self.text(item)
            if text is not None and not Path(text).is_absolute():
                self.problem(item.key, f"'{text}' is not an absolute path (allowed: /a/directory)")
            elif text is not None:
                out.append(text)
        return tuple(out)

    def globs(self, node: Node) -> tuple[str, ...]:
        out = []
        for index, value in enumerate(self.sequence(node)):
            item = Node(node.option, f"{node.key}[{index}]", value)
            text = self.text(item)
            if text is not None and not FILE_GLOB.fullmatch(text):
                self.problem(
                    item.key, f"'{text}' is not a file name pattern (allowed: letters, digits, . _ - + * ? [ ])"
                )
            elif text is not None:
                out.append(text)
        return tuple(out)

    def distribution(self, node: Node) -> str | None:
        """A distribution name (PEP 508); it names wheel files, so it is never a path."""
        text = self.text(node)
        if text is not None and not DISTRIBUTION_NAME.fullmatch(text):
            self.problem(
                node.key, f"'{text}' is not a distribution name (allowed: letters, digits, . _ -, e.g. my-ops)"
            )
            return None
        return text

    def directory(self, node: Node) -> Path | None:
        """A directory given relative to the matrix file; it must exist and stay inside the project."""
        text = self.text(node)
        if text is None:
            return None
        root = self.root
        path = root / text
        resolved = path.resolve()
        if resolved == root.resolve() and not node.option.root_allowed:
            self.problem(node.key, f"'{text}' is the project itself (allowed: a directory inside {root})")
            return None
        if Path(text).is_absolute() or not resolved.is_relative_to(root.resolve()):
            self.problem(node.key, f"'{text}' is outside the project (allowed: a directory relative to {root})")
            return None
        if not path.is_dir():
            self.problem(node.key, f"directory '{text}' does not exist next to the matrix file")
            return None
        return path

    def names(self, node: Node, what: str = "plain name (letters, digits, . _ -)") -> tuple[str, ...]:
        out = []
        for index, name in enumerate(self.sequence(node)):
            if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
                self.problem(f"{node.key}[{index}]", f"expected a {what}, got {describe(name)}")
                continue
            out.append(name)
        return tuple(out)

    def torch_selector(self, node: Node) -> SpecifierSet | None:
        if not isinstance(node.value, str):
            self.not_text(node)
            return None
        try:
            return torch_selector(node.value)
        except (InvalidSpecifier, InvalidVersion):
            self.problem(
                node.key, f'\'{node.value}\' is neither a version like "2.4" nor a specifier like ">=2.4,<2.6"'
            )
            return None

    def image_base(self, node: Node) -> str | None:
        base = self.text(node)
        if base and not (DEBOOTSTRAP_BASE.fullmatch(base) or IMAGE_REFERENCE.fullmatch(base)):
            self.problem(
                node.key,
                f"'{base}' is neither debootstrap:<suite> (a Debian suite name like bookworm) nor an image "
                "reference like quay.io/pypa/manylinux_2_28_x86_64:latest; bases are names, never paths",
            )
            return None
        return base

    def seconds(self, node: Node) -> float | None:
        given = node.value
        if isinstance(given, bool) or not isinstance(given, int | float) or not 0 < given <= MAX_SECONDS:
            self.problem(node.key, f"{given!r:.40} is not a positive number of seconds (at most {MAX_SECONDS}, a week)")
            return None
        return float(given)

    def absolute_directory(self, node: Node) -> str | None:
        location = node.value
        if not isinstance(location, str):
            self.problem(node.key, f"expected an absolute directory path or file:// URL, got {describe(location)}")
            return None
        directory = Path(location.removeprefix("file://"))
        if not directory.is_absolute():
            self.problem(
                node.key,
                f"'{location}' is not absolute (allowed: an absolute directory path or file:// URL; runners "
                "resolve a relative one from different directories)",
            )
            return None
        if not directory.is_dir():
            self.problem(node.key, f"'{location}' is not a directory (allowed: a directory of wheels)")
            return None
        return str(directory)

    def url(self, node: Node) -> str | None:
        url = node.value
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            self.problem(node.key, f"{describe(url)} is not an index URL (allowed: https://..., a PEP 503 index)")
            return None
        return url.rstrip("/")

    def local_find_links(self, node: Node) -> str | None:
        local = node.value
        if local not in {PIP_CONFIG, ""} and not (isinstance(local, str) and Path(local).is_absolute()):
            self.problem(
                node.key,
                f"{describe(local)} is not allowed (allowed: an absolute directory of wheels, or {PIP_CONFIG} for "
                "pip's configured find-links)",
            )
            return None
        return str(local)

    def boolean(self, node: Node) -> bool | None:
        if not isinstance(node.value, bool):
            self.problem(node.key, f"{describe(node.value)} is not allowed (allowed: true, false)")
            return None
        return node.value

    def texts(self, node: Node) -> tuple[str, ...]:
        out = []
        for index, value in enumerate(self.sequence(node)):
            if not isinstance(value, str) or not value:
                self.problem(f"{node.key}[{index}]", f"expected a non-empty string, got {describe(value)}")
                continue
            out.append(value)
        return tuple(out)

    def relative_path(self, node: Node) -> str | None:
        """A path inside a tree (the source copy, a wheel): relative, plain, never through `..`."""
        text = self.text(node)
        if text is None:
            return None
        parts = text.split("/")
        if text.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in text or "\\" in text:
            self.problem(
                node.key, f"'{text}' is not a relative path inside the tree (allowed: e.g. pkg/_build_info.py)"
            )
            return None
        return text

    def path_or_off(self, node: Node) -> str | bool | None:
        """A relative path, or `false` (switched off)."""
        if node.value is False:
            return False
        if not isinstance(node.value, str):
            self.problem(
                node.key, f"{describe(node.value)} is not allowed (allowed: a relative path, e.g. README.md, or false)"
            )
            return None
        return self.relative_path(node)

    def project_file(self, node: Node) -> Path | None:
        """A file given relative to the matrix file; it must exist and stay inside the project."""
        text = self.text(node)
        if text is None:
            return None
        path = self.root / text
        if "\0" in text or Path(text).is_absolute() or not path.resolve().is_relative_to(self.root.resolve()):
            self.problem(node.key, f"'{text}' is outside the project (allowed: a file relative to {self.root})")
            return None
        if not path.is_file():
            self.problem(node.key, f"file '{text}' does not exist next to the matrix file")
            return None
        return path

    def env_name(self, node: Node) -> str | None:
        text = self.text(node)
        if text is not None and not ENV_NAME.fullmatch(text):
            self.problem(
                node.key, f"'{text}' is not a variable name (allowed: letters, digits and _, not first a digit)"
            )
            return None
        return text

    def container(self, node: Node) -> Any:
        """Lists and mappings are walked with items(), entries() and child(), not parsed whole."""
        raise TypeError(f"{node.option.path} is a {node.option.kind}: walk it with child/items/entries")


PARSERS: dict[Kind, Callable[[OptionReader, Node], Any]] = {
    Kind.MAPPING: OptionReader.container,
    Kind.LIST: OptionReader.container,
    Kind.NAMED: OptionReader.container,
    Kind.TEXT: OptionReader.text,
    Kind.BOOLEAN: OptionReader.boolean,
    Kind.TEXTS: OptionReader.texts,
    Kind.RELATIVE_PATH: OptionReader.relative_path,
    Kind.PATH_OR_OFF: OptionReader.path_or_off,
    Kind.PROJECT_FILE: OptionReader.project_file,
    Kind.ENV_NAME: OptionReader.env_name,
    Kind.INTEGER: OptionReader.integer,
    Kind.COUNT: OptionReader.count,
    Kind.CHOICE: OptionReader.choice,
    Kind.VERSION: OptionReader.version,
    Kind.VERSIONS: OptionReader.versions,
    Kind.PYTHON: OptionReader.python,
    Kind.PYTHON_MINORS: OptionReader.python_minors,
    Kind.DISTRIBUTION: OptionReader.distribution,
    Kind.DIRECTORY: OptionReader.directory,
    Kind.NAMES: OptionReader.names,
    Kind.TORCH_SELECTOR: OptionReader.torch_selector,
    Kind.IMAGE_BASE: OptionReader.image_base,
    Kind.SECONDS: OptionReader.seconds,
    Kind.ABSOLUTE_DIRECTORY: OptionReader.absolute_directory,
    Kind.URL: OptionReader.url,
    Kind.LOCAL_FIND_LINKS: OptionReader.local_find_links,
    Kind.NAME: OptionReader.name,
    Kind.VARIANT: OptionReader.variant,
    Kind.TEMPLATE: OptionReader.text,
    Kind.ABSOLUTE_PATHS: OptionReader.absolute_paths,
    Kind.GLOBS: OptionReader.globs,
}

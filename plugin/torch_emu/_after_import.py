"""Runs a function on a module once it has been imported, without importing it (torch._dynamo costs seconds)."""

from __future__ import annotations

import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

Hook = Callable[[ModuleType], Any]


class _Loader:
    """Runs the real loader, then the hook; everything else (get_source, ...) is the real loader's.

    A hook that fails warns instead of failing the import: torch.compile without emu beats no torch.compile.
    """

    def __init__(self, loader: Any, hook: Callable[[ModuleType], Any]) -> None:
        self._loader = loader
        self._hook = hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        try:
            self._hook(module)
        except Exception as exc:
            warnings.warn(f"torch_emu could not register with {module.__name__}: {exc!r}", stacklevel=2)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _AfterImport:
    """Finds one module through the other finders and wraps its loader so the hook runs once it has loaded."""

    def __init__(self, name: str, hook: Callable[[ModuleType], Any]) -> None:
        self.name = name
        self.hook = hook

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once: the hook need not stay in every later import
        for finder in sys.meta_path:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Loader(spec.loader, self.hook)
                return spec
        return None


def after_import(name: str, hook: Hook) -> None:
    """Calls hook(module) now if `name` is imported already, else right after its first import."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        hook(loaded)
        return
    if not any(isinstance(f, _AfterImport) and f.name == name and f.hook is hook for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, hook))

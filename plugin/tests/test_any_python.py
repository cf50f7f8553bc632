"""One wheel for every Python: the compiled part uses libtorch and the driver only, no CPython API.

libtorch_emu.so is loaded with torch.ops.load_library and reached through torch.ops.torch_emu, so the wheel is tagged
py3-none-<platform> and installs on every CPython 3 the torch release supports, free-threaded builds included.
"""

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_emu

pytestmark = pytest.mark.feature("any_python_py3_none_wheel")

LIBRARY = Path(torch_emu.__file__).resolve().parent / "libtorch_emu.so"


def binutils(*command: str) -> str:
    assert shutil.which(command[0]), f"{command[0]} (binutils) is needed to read {LIBRARY.name}"
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def test_the_library_leaves_no_python_symbol_undefined():
    undefined = [line.split()[-1] for line in binutils("nm", "-D", "--undefined-only", str(LIBRARY)).splitlines()]
    assert undefined, "nm listed no undefined symbol at all: it did not read the library"
    assert any(name.startswith("_ZN3c10") for name in undefined)  # it does use libc10
    assert [name for name in undefined if name.startswith(("Py", "_Py"))] == []


def test_the_library_needs_neither_libpython_nor_torch_python():
    needed = [line for line in binutils("readelf", "-d", str(LIBRARY)).splitlines() if "(NEEDED)" in line]
    assert any("libc10.so" in line for line in needed), needed
    assert [line for line in needed if "libpython" in line or "libtorch_python" in line] == []


def test_the_library_names_no_python_installation():
    """Any Python of the release builds the same bytes, so one build serves them all: no RUNPATH into the building
    Python's prefix (a pyenv Python's LDSHARED adds -Wl,-rpath to its lib/), and no path through its
    lib/pythonX.Y/site-packages (__FILE__ in torch's inline headers names the header's path)."""
    dynamic = binutils("readelf", "-d", str(LIBRARY)).splitlines()
    runpaths = [line.split("[", 1)[1].rstrip("]") for line in dynamic if "(RUNPATH)" in line or "(RPATH)" in line]
    entries = [entry for runpath in runpaths for entry in runpath.split(":")]
    assert entries and all(entry.startswith("$ORIGIN/") for entry in entries), runpaths  # the driver, beside it
    text = binutils("strings", "-a", str(LIBRARY)).splitlines()
    assert any("torch_emu" in line for line in text), "strings found no 'torch_emu' (the op namespace): it read nothing"
    assert sorted(line for line in set(text) if re.search(r"site-packages|python3\.\d+|cpython-3\d+", line)) == []


def test_the_wheel_is_tagged_for_any_python():
    wheel = importlib.metadata.distribution("torch-emu").read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    assert tags and all(tag.startswith("py3-none-") for tag in tags), tags


def test_python_reaches_the_runtime_through_torch_ops_only():
    assert torch.ops.torch_emu.device_count() == torch.emu.device_count()
    assert str(LIBRARY) in {str(Path(p).resolve()) for p in torch.ops.loaded_libraries}
    extension_modules = [
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "torch_emu" and str(getattr(module, "__file__", "") or "").endswith(".so")
    ]
    assert extension_modules == []

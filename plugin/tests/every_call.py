"""Calls every public function of torch.accelerator and torch.emu once, after an emu allocation.

Run as a script by test_every_call.py, in a process of its own: a call that crashes the process (as
torch.accelerator.empty_host_cache() did with no host allocator registered) ends that process, not the suite.
Each call prints `CALL <module>.<name>` before and `DONE <module>.<name> <outcome>` after, so a crash is
pinned on the call that caused it. Raising is allowed (a release or driver may lack a feature); dying is not.
A function needing arguments this table does not give fails as `NEEDS-ARGS`, so a new function is not skipped.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

# torch >=2.5 loads the backend by its entry point; older releases need the import to know device "emu".
import torch_emu  # noqa: F401


def _arguments() -> dict[str, Callable[[], tuple[Any, ...]]]:
    """Arguments for the functions that need some, by name; made when called, from the live state."""
    return {
        "set_device_index": lambda: (0,),
        "set_device_idx": lambda: (0,),
        "device_index": lambda: (0,),
        "set_device": lambda: (0,),
        "device": lambda: (0,),
        "set_stream": lambda: (torch.emu.current_stream(),),
        "stream": lambda: (torch.emu.Stream(),),
        "StreamContext": lambda: (torch.emu.Stream(),),
        "manual_seed": lambda: (0,),
        "manual_seed_all": lambda: (0,),
        "set_rng_state": lambda: (torch.emu.get_rng_state(),),
        "set_rng_state_all": lambda: (torch.emu.get_rng_state_all(),),
        "graph": lambda: (torch.emu.EmuGraph(),),
        "make_graphed_callables": lambda: (torch.nn.Linear(2, 2).to("emu"), (torch.randn(1, 2, device="emu"),)),
    }


def public_calls() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every public callable defined by torch.accelerator (and its submodules) and torch.emu's __all__."""
    seen: set[int] = set()
    modules: list[ModuleType] = []
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        modules.append(accelerator)
        modules += [value for value in vars(accelerator).values() if inspect.ismodule(value)]
    for module in modules:
        if not module.__name__.startswith("torch.accelerator"):
            continue
        for name in sorted(vars(module)):
            value = getattr(module, name)
            if name.startswith("_") or not callable(value) or id(value) in seen:
                continue
            if not getattr(value, "__module__", "").startswith("torch.accelerator"):
                continue  # imported helpers (typing.Any, functools.cache)
            seen.add(id(value))
            yield f"{module.__name__}.{name}", value
    for name in torch.emu.__all__:
        value = getattr(torch.emu, name)
        if callable(value) and id(value) not in seen:
            seen.add(id(value))
            yield f"torch.emu.{name}", value


def _needs_arguments(function: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    return any(
        p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p in signature.parameters.values()
    )


def call(qualified: str, function: Callable[..., Any], arguments: dict[str, Callable[[], tuple[Any, ...]]]) -> str:
    short = qualified.rsplit(".", 1)[1]
    if short not in arguments and _needs_arguments(function):
        return "NEEDS-ARGS"
    try:
        # Making the arguments may need the feature too (an EmuGraph on a driver without capture): raising is fine.
        args = arguments[short]() if short in arguments else ()
        result = function(*args)
        # Context managers (device_index, device, stream, Graph) are entered and left too.
        if hasattr(result, "__enter__") and hasattr(result, "__exit__"):
            with result:
                torch.ones(4, device="emu").add_(1)
    except Exception as exc:  # a missing feature may raise; only dying is a failure
        return f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return "ok"


def main() -> int:
    # After an emu allocation, pinned memory and a side stream exist: the state the crash needed.
    x = torch.ones(1024, device="emu")
    with contextlib.suppress(Exception):  # a driver without host allocation: the host calls must still not crash
        x.cpu().pin_memory()
    arguments = _arguments()
    failed = 0
    for qualified, function in public_calls():
        print(f"CALL {qualified}", flush=True)
        outcome = call(qualified, function, arguments)
        failed += outcome == "NEEDS-ARGS"
        print(f"DONE {qualified} {outcome}", flush=True)
        torch.emu.set_device(0)
        torch.emu.set_stream(torch.emu.default_stream())
    torch.emu.synchronize()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

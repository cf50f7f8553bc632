"""`python -m torch_emu.doctor [--site URL]`: what is installed, what torch_emu was built for, a verdict and the fix.

With --site (or TORCH_EMU_SITE) it reads the site's compatibility.json, so a command it prints names only a torch
release that has a wheel for the running Python.

Runs even when `import torch_emu` would fail (no torch, wrong torch, missing or damaged driver): that is when it is
needed, so every environment gets a verdict and nothing here raises, whether it runs as `python -m torch_emu.doctor`,
through runpy, or imported (`from torch_emu.doctor import report, main`). Every command it prints installs from the
per-torch-release index, which holds only wheels that were built and tested; it never names a plugin wheel that
might not exist for this Python. Exit status 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys

from torch_emu._guard import _first_line, driver_command, index_command, installed_now, problems, release_line, site_of
from torch_emu._published import published_pythons


def _build_facts() -> dict:
    from torch_emu import _build_info

    return {k: v for k, v in vars(_build_info).items() if k.isupper()}


def _load_error() -> BaseException | None:
    import torch_emu

    return getattr(torch_emu, "LOAD_ERROR", None)


def _collectives_line() -> str:
    """The torch.distributed backend for emu, or why there is none."""
    from torch_emu import distributed

    ok, why = distributed.available()
    if not ok:
        return f"  collectives not available: {why}"
    return (
        f"  collectives '{distributed.BACKEND}' (torch.distributed backend of emu: init_process_group(device_id="
        "torch.device('emu', local_rank)) picks it; one host, shared memory)"
    )


def _device_traces_line() -> str:
    import torch_emu

    ok, why = torch_emu.device_traces()
    if not ok:
        return f"  profiler    device traces not available: {why}"
    return "  profiler    device traces (torch.profiler with ProfilerActivity.PrivateUse1 shows emu kernels)"


def _first_computation() -> tuple[list[str], list[str]]:
    """Device lines and problems of a first computation on emu (only called when the extension loaded)."""
    import torch

    count = torch.emu.device_count()
    names = {torch.emu.get_device_name(i) for i in range(count)}
    memory = torch.emu.get_device_properties(0).total_memory >> 20 if count else 0
    lines = [
        f"  devices     {count} x {', '.join(sorted(names))}, {memory} MiB each",
        _collectives_line(),
        _device_traces_line(),
    ]
    try:
        ok = torch.ones(4, device="emu").add(1).sum().item() == 8.0
    except Exception as exc:  # the runtime itself is broken: say so
        return lines, [f"a first computation on emu failed: {_first_line(exc)}"]
    return lines, [] if ok else ["a first computation on emu gave a wrong result"]


def report(site: str | None = None) -> tuple[str, bool]:
    build = _build_facts()
    where = site_of(build) if site is None else site.rstrip("/")
    now = installed_now()
    if now.torch_version is None:
        torch_line = f"not importable ({now.torch_error})"
    else:
        abi = "" if now.torch_cxx11_abi is None else f" (C++11 ABI {int(now.torch_cxx11_abi)})"
        torch_line = now.torch_version + abi
    if now.driver_api is not None:
        driver_line = "API {}.{}".format(*now.driver_api)
    else:
        driver_line = f"unreadable ({now.driver_error})" if now.driver_error else "not installed"
    lines = [
        "torch_emu doctor",
        f"  python      {sys.version.split()[0]} ({sys.executable})",
        f"  torch       {torch_line}",
        f"  emu-driver  {driver_line}",
        f"  torch_emu   {build.get('PLUGIN_VERSION')}: built for torch {build.get('TORCH_VERSION')} "
        f"({build.get('TORCH_VARIANT')}, C++11 ABI {int(bool(build.get('CXX11_ABI')))}), "
        f"driver API {build.get('DRIVER_API')}, any CPython 3 (no CPython API in its compiled part)",
    ]
    published = None
    if site is not None:
        try:
            published = published_pythons(where)
        except (OSError, ValueError) as exc:
            lines.append(f"  site        {where}: could not read its compatibility.json ({_first_line(exc)})")
    line = release_line(now.torch_version) if now.torch_version else None
    if line is not None and (published is None or now.python in published.get(f"{line[0]}.{line[1]}", ())):
        lines.append(f"  for torch {line[0]}.{line[1]}: {index_command(line, where)}")
    found = problems(build, now, where, published)
    error = _load_error()
    if not found and error is not None:
        found.append(
            f"the torch_emu extension failed to load ({_first_line(error)}): reinstall the driver it was built with "
            f"({driver_command(build, where)} --force-reinstall), then torch_emu"
        )
    if not found:
        devices, failed = _first_computation()
        lines += devices
        found += failed
    if found:
        lines.append("verdict: PROBLEM")
        lines.extend(f"  - {problem}" for problem in found)
    else:
        lines.append("verdict: OK (torch, driver and torch_emu match; emu computes)")
    return "\n".join(lines), not found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_emu.doctor", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--site",
        default=os.environ.get("TORCH_EMU_SITE"),
        help="URL of the wheel site, filled into the commands (default: $TORCH_EMU_SITE, else <site>)",
    )
    args = parser.parse_args(argv)
    try:
        text, ok = report(args.site)
    except Exception as exc:  # last resort: a verdict, never a traceback
        text, ok = f"torch_emu doctor\nverdict: PROBLEM\n  - the doctor could not finish: {_first_line(exc)}", False
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""`python -m torch_emu.doctor`: what is installed, what this torch_emu was built for, and a verdict with the fix.

Runs even when `import torch_emu` would fail (wrong torch, missing driver): that is when it is needed.
Exit status 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import sys

import torch_emu
from torch_emu import _build_info
from torch_emu._guard import installed_now, problems


def report() -> tuple:
    build = {k: v for k, v in vars(_build_info).items() if k.isupper()}
    now = installed_now()
    lines = [
        "torch_emu doctor",
        f"  python      {sys.version.split()[0]} ({sys.executable})",
        f"  torch       {now.torch_version}"
        + ("" if now.torch_cxx11_abi is None else f" (C++11 ABI {int(now.torch_cxx11_abi)})"),
        "  emu-driver  " + ("not installed" if now.driver_api is None else "API {}.{}".format(*now.driver_api)),
        f"  torch_emu   {build['PLUGIN_VERSION']}: built for torch {build['TORCH_VERSION']} ({build['TORCH_VARIANT']}, "
        f"C++11 ABI {int(build['CXX11_ABI'])}), driver API {build['DRIVER_API']}, Python {build['PYTHON']}",
    ]
    found = problems(build, now)
    if torch_emu.LOAD_ERROR is None and not found:
        import torch

        count = torch.emu.device_count()
        names = {torch.emu.get_device_name(i) for i in range(count)}
        memory = torch.emu.get_device_properties(0).total_memory >> 20 if count else 0
        lines.append(f"  devices     {count} x {', '.join(sorted(names))}, {memory} MiB each")
        try:
            ok = torch.ones(4, device="emu").add(1).sum().item() == 8.0
        except RuntimeError as exc:  # the runtime itself is broken: say so
            found.append(f"a first computation on emu failed: {exc}")
        else:
            if not ok:
                found.append("a first computation on emu gave a wrong result")
    if found:
        lines.append("verdict: PROBLEM")
        lines.extend(f"  - {problem}" for problem in found)
    else:
        lines.append("verdict: OK (torch, driver and torch_emu match; emu computes)")
    return "\n".join(lines), not found


def main() -> int:
    text, ok = report()
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

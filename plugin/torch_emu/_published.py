"""Which torch_emu wheels a wheel site publishes, read from its compatibility.json (for the doctor's commands)."""

from __future__ import annotations

import json
import urllib.request


def published_pythons(site: str, timeout: float = 10.0) -> dict[str, set[str]]:
    """torch release line ("2.4") -> the Pythons ("3.11") a tested, installable wheel exists for.

    Raises OSError (network, HTTP) or ValueError (not a compatibility table); the doctor reports either.
    """
    with urllib.request.urlopen(f"{site.rstrip('/')}/compatibility.json", timeout=timeout) as response:
        table = json.loads(response.read().decode("utf-8"))
    try:
        minors = {release["key"]: release["minor"] for release in table["releases"]}
        out: dict[str, set[str]] = {}
        for cell in table["cells"]:
            if cell.get("status") == "passed" and cell.get("wheel") and cell.get("driver_wheel"):
                out.setdefault(minors[cell["release"]], set()).add(str(cell["python"]))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a compatibility table ({exc!r})") from None
    return out

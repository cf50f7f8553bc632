"""Which torch_emu wheels a wheel site publishes, read from its compatibility.json (for the doctor's commands)."""

from __future__ import annotations

import json
import threading
import urllib.request

MAX_BYTES = 16 * 1024 * 1024  # a compatibility.json of 10 000 cells is a few MB; anything larger is not one


def read_url(url: str, deadline: float, max_bytes: int = MAX_BYTES) -> bytes:
    """The body at `url`, read whole within `deadline` seconds in total and no larger than `max_bytes`.

    A socket timeout bounds each read only, so a server trickling a byte at a time would keep a plain urlopen
    reading forever: the read runs in a daemon thread and is abandoned at the deadline. Raises OSError (network,
    HTTP, the deadline) or ValueError (too large).
    """
    outcome: dict[str, object] = {}

    def read() -> None:
        try:
            with urllib.request.urlopen(url, timeout=deadline) as response:
                body = response.read(max_bytes + 1)
            if len(body) > max_bytes:
                raise ValueError(f"{url} answered more than {max_bytes} bytes")
            outcome["body"] = body
        except Exception as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=read, name=f"read {url}", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        raise TimeoutError(f"{url} did not answer in full within {deadline:g} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["body"]  # type: ignore[return-value]


def published_pythons(site: str, timeout: float = 10.0) -> dict[str, set[str]]:
    """torch release line ("2.4") -> the Pythons ("3.11") a tested, installable wheel exists for.

    Raises OSError (network, HTTP, no answer within `timeout` seconds in all) or ValueError (not a compatibility
    table); the doctor reports either.
    """
    table = json.loads(read_url(f"{site.rstrip('/')}/compatibility.json", timeout).decode("utf-8"))
    try:
        minors = {release["key"]: release["minor"] for release in table["releases"]}
        out: dict[str, set[str]] = {}
        for cell in table["cells"]:
            if cell.get("status") == "passed" and cell.get("wheel") and cell.get("driver_wheel"):
                out.setdefault(minors[cell["release"]], set()).add(str(cell["python"]))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a compatibility table ({exc!r})") from None
    return out

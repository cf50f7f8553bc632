"""Every network read of the tool: one GET with a total deadline and a size cap, whatever the server does."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_DEADLINE = 120.0  # seconds for the whole request: connect, headers and body
CHUNK = 1 << 16


class TooLarge(ValueError):
    """The answer was larger than the cap the caller set."""


@dataclass(frozen=True)
class Answer:
    url: str  # after redirects
    status: int
    content_type: str  # the media type, lower-case, without parameters ("" when the server sent none)
    body: bytes


def get(
    url: str, *, deadline: float = DEFAULT_DEADLINE, max_bytes: int, headers: Mapping[str, str] | None = None
) -> Answer:
    """GET `url`, read whole within `deadline` seconds in total and no larger than `max_bytes`.

    A socket timeout bounds each read only, so a server that trickles a byte before every timeout would keep a
    plain urlopen reading forever. The request runs in a daemon thread, which is abandoned at the deadline (its own
    socket timeout ends it soon after). Raises TimeoutError at the deadline, TooLarge past the cap, and what urlopen
    raises otherwise (urllib.error.HTTPError for an HTTP error status, with its .code; OSError).
    """
    outcome: dict[str, Answer | BaseException] = {}
    stop = threading.Event()

    def read() -> None:
        try:
            request = urllib.request.Request(url, headers=dict(headers or {}))
            with urllib.request.urlopen(request, timeout=min(deadline, 60.0)) as response:
                chunks, size = [], 0
                while not stop.is_set():
                    chunk = response.read(CHUNK)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > max_bytes:
                        raise TooLarge(f"{url} answered more than {max_bytes} bytes")
                    chunks.append(chunk)
                media = response.headers.get_content_type() if response.headers.get("Content-Type") else ""
                outcome["answer"] = Answer(response.geturl(), response.status, media.lower(), b"".join(chunks))
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=read, name=f"GET {url}", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        stop.set()
        raise TimeoutError(f"{url} did not answer in full within {deadline:g} s")
    error = outcome.get("error")
    if isinstance(error, BaseException):
        raise error
    answer = outcome["answer"]
    assert isinstance(answer, Answer)
    return answer

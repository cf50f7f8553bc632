"""Every network read of the tool: one GET with a total deadline and a size cap, whatever the server does."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_DEADLINE = 120.0  # seconds for the whole request: connect, headers and body
NETWORK_DEADLINE = 600.0  # seconds for every registry read of one command in all (--network-deadline)
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


class Budget:
    """The seconds one command may spend reading the network, in all: each GET gets what is left (at most its own
    deadline), so a command reading several pages from a slow server still ends by its total deadline."""

    def __init__(self, total: float = NETWORK_DEADLINE) -> None:
        self.total = total
        self.spent = 0.0

    def get(
        self,
        url: str,
        *,
        deadline: float = DEFAULT_DEADLINE,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """get(), within the time left; raises TimeoutError naming the total deadline once it is used up."""
        left = self.total - self.spent
        cut = f"{url} was not read in full within the {self.total:g} s all network reads of this command may take"
        if left <= 0:
            raise TimeoutError(cut)
        start = time.monotonic()
        try:
            return get(url, deadline=min(deadline, left), max_bytes=max_bytes, headers=headers)
        except TimeoutError:
            if left < deadline:
                raise TimeoutError(cut) from None
            raise
        finally:
            self.spent += time.monotonic() - start

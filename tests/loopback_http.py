"""HTTP servers on 127.0.0.1 for the tests that need a real one: a directory's files (a stand-in index, a published
site), or whatever a handler of the test's own answers (canned answers, failures, a slow trickle)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import socketserver
import threading
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def running(handler: Callable[..., socketserver.BaseRequestHandler]) -> Iterator[str]:
    """A threaded server on 127.0.0.1 (a free port) answering with `handler` while the context lasts; yields its root,
    http://127.0.0.1:PORT."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the files without writing a line per request to stderr."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def served(directory: Path, handler: type[http.server.SimpleHTTPRequestHandler] = QuietHandler) -> Iterator[str]:
    """`directory` over HTTP on 127.0.0.1 while the context lasts; yields http://127.0.0.1:PORT. Files are read per
    request, so what is written there later is served too. handler: how requests are answered and logged (a subclass
    that records them, say)."""
    with running(functools.partial(handler, directory=str(directory))) as url:
        yield url

"""A PEP 691 index on 127.0.0.1 serving the recorded registry answers of tests/fixtures/registry/."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loopback_http import running

ANSWERS = Path(__file__).parent / "fixtures" / "registry"
PEP691 = "application/vnd.pypi.simple.v1+json"


class Answers:
    """A PEP 691 index on 127.0.0.1 that answers /simple/torch/ with whichever recorded file the test picks."""

    def __init__(self) -> None:
        self.file = ANSWERS / "torch-recorded.json"
        self.requests = 0
        answers = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answers.requests += 1
                if self.path != "/simple/torch/" or PEP691 not in self.headers.get("Accept", ""):
                    self.send_error(404)
                    return
                body = answers.file.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", PEP691)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def use(self, name: str) -> None:
        self.file = ANSWERS / name

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def trickling_server(body: bytes, interval: float, content_type: str = PEP691) -> Iterator[str]:
    """A server on 127.0.0.1 that answers every GET with 200 and `body`, one byte every `interval` seconds: each
    read gets data in time, so only a total deadline ends the request. Yields its root URL."""
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for byte in body:
                if stop.wait(interval):
                    return
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:
                    return

        def log_message(self, *args: object) -> None:
            pass

    with running(Handler) as url:
        try:
            yield f"{url}/"
        finally:
            stop.set()  # ends the answers still trickling


@contextmanager
def serving(body: bytes, content_type: str, status: int = 200) -> Iterator[list[str]]:
    """A server on 127.0.0.1 that answers every GET with `status`, `content_type` and `body`. Yields the list of
    paths it was asked for, after its root URL: [url, path, path, ...]."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with running(Handler) as url:
        seen.append(f"{url}/")
        yield seen

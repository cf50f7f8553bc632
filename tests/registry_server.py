"""A PEP 691 index on 127.0.0.1 serving the recorded registry answers of tests/fixtures/registry/."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

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

"""A real HTTP server speaking the OpenAI chat-completions shape, for summarizer tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeLLM:
    """Answers `/v1/chat/completions` with `reply`, or with HTTP `fail_status` while that is set."""

    url: str = ""
    reply: str = "Summary."
    fail_status: int | None = None
    delay_s: float = 0.0
    """delay_s is how long each answer takes (a slow model: the caller hears nothing meanwhile)."""
    requests: list[dict] = field(default_factory=list)


@contextmanager
def fake_llm() -> Iterator[FakeLLM]:
    llm = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            llm.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            time.sleep(llm.delay_s)
            if llm.fail_status is not None:
                payload, status = {"error": {"message": "overloaded"}}, llm.fail_status
            else:
                payload = {"choices": [{"index": 0, "message": {"role": "assistant", "content": llm.reply}}]}
                status = 200
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    llm.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield llm
    finally:
        server.shutdown()
        server.server_close()

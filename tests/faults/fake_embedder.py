"""A real HTTP server speaking the OpenAI embeddings shape, whose outages and refusals a test controls."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMENSION = 64


def vector(text: str) -> list[float]:
    """A deterministic vector for `text` (words hashed into DIMENSION buckets), as the hash embedder makes."""
    values = [0.0] * DIMENSION
    for word in text.lower().split():
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        values[int.from_bytes(digest[:4], "little") % DIMENSION] += 1.0 if digest[4] & 1 else -1.0
    if not any(values):
        values[0] = 1.0
    return values


@dataclass
class FakeEmbeddings:
    """Answers `/v1/embeddings`; while `down`, drops every connection unanswered (an endpoint that
    went away); an input holding `poison` is refused with HTTP 400, as an endpoint refuses a bad
    input. Counts what it saw."""

    url: str = ""
    down: bool = False
    poison: str | None = None
    served: int = 0
    dropped: int = 0
    refused: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def fake_embeddings() -> Iterator[FakeEmbeddings]:
    fake = FakeEmbeddings()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = body["input"]
            with fake.lock:
                if fake.down:
                    fake.dropped += 1
                    self.close_connection = True
                    return  # no answer at all: the client sees the connection end
                if fake.poison is not None and any(fake.poison in t for t in texts):
                    fake.refused += 1
                    status, payload = 400, {"error": {"message": "input refused"}}
                else:
                    fake.served += 1
                    fake.batch_sizes.append(len(texts))
                    status = 200
                    payload = {
                        "data": [{"index": i, "embedding": vector(t)} for i, t in enumerate(texts)],
                        "model": body["model"],
                    }
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()

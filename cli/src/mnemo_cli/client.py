"""The CLI's HTTP client for the gateway: one error path, readable messages."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import httpx

from mnemo_cli.errors import ClientError

# How long a call safe to repeat keeps trying through 503s and dropped answers: a PostgreSQL
# restart's crash recovery, or a service's restart under `mnemo up`, fits well inside it.
RETRY_BUDGET_S = 30.0


def _pause(delay: float) -> float:
    """Sleeps about `delay` (jittered, so clients retrying together spread out); the next delay."""
    time.sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter, not a secret
    return min(delay * 2, 4.0)


class GatewayClient:
    def __init__(self, base_url: str, timeout_s: float = 30.0, token: str = "") -> None:
        self.base_url = base_url
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s, headers=headers)

    def stream_lines(self, method: str, path: str, **kwargs: Any) -> Iterator[str]:
        """A streamed (NDJSON) response, line by line; errors as for request()."""
        try:
            with self._http.stream(method, f"/api/v1{path}", timeout=None, **kwargs) as response:
                if response.status_code >= 400:
                    response.read()
                    self._raise(response)
                yield from (line for line in response.iter_lines() if line.strip())
        except httpx.ConnectError:
            raise ClientError(
                f"cannot reach Mnemo at {self.base_url}; start it with `uv run mnemo up` (or set MNEMO_URL)"
            ) from None
        except httpx.HTTPError as exc:
            raise ClientError(f"request to {self.base_url} failed: {exc}") from None

    def request(self, method: str, path: str, *, retry: bool | None = None, **kwargs: Any) -> Any:
        """One call to the gateway. A call safe to repeat (GET, or `retry=True`: a write carrying an
        idempotency key) is retried while Mnemo answers 503 (a database or service restarting) or
        the connection drops before the answer, with backoff, for up to RETRY_BUDGET_S; a refused
        connection (Mnemo not running) fails at once."""
        retry = method == "GET" if retry is None else retry
        deadline = time.monotonic() + RETRY_BUDGET_S
        delay = 0.2
        while True:
            try:
                response = self._http.request(method, f"/api/v1{path}", **kwargs)
            except httpx.ConnectError:
                raise ClientError(
                    f"cannot reach Mnemo at {self.base_url}; start it with `uv run mnemo up` (or set MNEMO_URL)"
                ) from None
            except httpx.HTTPError as exc:
                if retry and time.monotonic() + delay < deadline:
                    delay = _pause(delay)
                    continue
                raise ClientError(f"request to {self.base_url} failed: {exc}") from None
            if response.status_code == 503 and retry and time.monotonic() + delay < deadline:
                delay = _pause(delay)
                continue
            break
        if response.status_code >= 400:
            self._raise(response)
        try:
            return response.json()
        except ValueError:
            return None

    @staticmethod
    def _raise(response: httpx.Response) -> None:
        try:
            body = response.json()
        except ValueError:
            body = None
        error = (body or {}).get("error", {}) if isinstance(body, dict) else {}
        message = error.get("message") or response.text[:500] or response.reason_phrase
        if response.status_code == 401:
            message += " (set MNEMO_TOKEN to a token from `mnemo token create`)"
        raise ClientError(f"{_heading(error, response.status_code)}: {message}")


def _heading(error: dict[str, Any], status_code: int) -> str:
    """The status code, then the reason when the body has one that says more: `NOT_FOUND (TOMBSTONED)`.

    Older gateways send no reason; a reason that only repeats the code (INVALID_ARGUMENT) is left out.
    """
    code = str(error.get("code", status_code))
    reason = error.get("reason")
    if not reason or reason in (code, "UNSPECIFIED"):
        return code
    return f"{code} ({reason})"

"""Who is calling and which request this is, carried in gRPC metadata and a contextvar."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

PRINCIPAL_KEY = "x-mnemo-principal"
REQUEST_ID_KEY = "x-request-id"
LOCAL_PRINCIPAL = "local"


@dataclass(frozen=True)
class CallContext:
    """The principal acting and the request id, as the current RPC or HTTP request sees them."""

    principal: str = LOCAL_PRINCIPAL
    request_id: str = ""

    def metadata(self) -> list[tuple[str, str]]:
        return [(PRINCIPAL_KEY, self.principal), (REQUEST_ID_KEY, self.request_id)]


_current: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("mnemo_call_context", default=None)


def new_request_id() -> str:
    return uuid.uuid4().hex


def current_call() -> CallContext:
    """The current call's context; a fresh local one outside any request."""
    ctx = _current.get()
    return ctx if ctx is not None else CallContext(request_id=new_request_id())


def set_call(ctx: CallContext) -> contextvars.Token[CallContext | None]:
    return _current.set(ctx)


def reset_call(token: contextvars.Token[CallContext | None]) -> None:
    _current.reset(token)


def call_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> CallContext:
    """Reads the principal and request id a gateway (or another service) sent."""
    values = {key: value for key, value in (metadata or ()) if isinstance(value, str)}
    return CallContext(
        principal=values.get(PRINCIPAL_KEY) or LOCAL_PRINCIPAL,
        request_id=values.get(REQUEST_ID_KEY) or new_request_id(),
    )

"""Who is calling and which request this is, carried in gRPC metadata and a contextvar.

The gateway authenticates a bearer token and forwards only the resolved principal — name, role,
workspaces — never the token. With authentication on, that principal travels signed (HMAC-SHA256
with the secret the services share), and every service checks the signature again, so a direct
gRPC caller cannot claim to be someone it is not.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.common.v1 import options_pb2
from mnemo_platform.enums import enum_labels
from mnemo_platform.errors import PermissionDenied, Unauthenticated

PRINCIPAL_KEY = "x-mnemo-principal"
SIGNATURE_KEY = "x-mnemo-signature"
REQUEST_ID_KEY = "x-request-id"
LOCAL_PRINCIPAL = "local"
ALL_WORKSPACES = "*"
# Lowest first: each role may do everything the roles before it may.
ROLES = tuple(enum_labels(options_pb2.Role))
# A signed principal is good for this long: long enough for a streamed harvest run to start,
# short enough that captured metadata is soon worthless.
SIGNATURE_TTL_S = 300


@dataclass(frozen=True)
class CallContext:
    """The principal acting (its role and the workspaces it may touch) and the request id."""

    principal: str = LOCAL_PRINCIPAL
    request_id: str = ""
    role: str = "admin"
    workspaces: tuple[str, ...] = (ALL_WORKSPACES,)
    token_id: str = ""

    @property
    def all_workspaces(self) -> bool:
        return ALL_WORKSPACES in self.workspaces

    def at_least(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)

    def require(self, role: str, action: str) -> None:
        """Raises PERMISSION_DENIED unless the caller's role is `role` or above."""
        if not self.at_least(role):
            raise PermissionDenied(
                f"{action} needs the {role} role; this token is {self.role} ({self.principal})",
                reasons_pb.ERROR_REASON_ROLE_TOO_LOW,
            )

    def metadata(self) -> list[tuple[str, str]]:
        payload = json.dumps(
            {
                "p": self.principal,
                "r": self.role,
                "w": list(self.workspaces),
                "t": self.token_id,
                "exp": int(time.time()) + SIGNATURE_TTL_S,
            },
            separators=(",", ":"),
        )
        items = [(PRINCIPAL_KEY, payload), (REQUEST_ID_KEY, self.request_id)]
        if _auth.secret:
            items.append((SIGNATURE_KEY, _sign(payload)))
        return items


@dataclass
class _AuthState:
    secret: str = ""
    required: bool = False


_auth = _AuthState()


def configure_auth(secret: str, required: bool) -> None:
    """Sets this process's shared secret (signs outgoing principals) and whether incoming ones must be signed."""
    if required and not secret:
        raise ValueError("authentication needs the internal secret (MNEMO_INTERNAL_SECRET)")
    _auth.secret = secret
    _auth.required = required


def auth_required() -> bool:
    return _auth.required


def auth_state() -> tuple[str, bool]:
    """The current (secret, required), so an embedder of services (tests, `mnemo up`) can restore it."""
    return _auth.secret, _auth.required


def _sign(payload: str) -> str:
    return hmac.new(_auth.secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


_current: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("mnemo_call_context", default=None)


def new_request_id() -> str:
    return uuid.uuid4().hex


def current_call() -> CallContext:
    """The current call's context; outside any request, the process itself (a service acting as admin)."""
    ctx = _current.get()
    return ctx if ctx is not None else CallContext(request_id=new_request_id())


def set_call(ctx: CallContext) -> contextvars.Token[CallContext | None]:
    return _current.set(ctx)


def reset_call(token: contextvars.Token[CallContext | None]) -> None:
    _current.reset(token)


def call_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> CallContext:
    """The principal and request id a gateway (or another service) sent.

    Raises Unauthenticated when authentication is required and the principal is missing, forged
    or expired. Without authentication (local mode) an unsigned principal is taken as sent, and
    a call without one acts as the local user.
    """
    values = {key: value for key, value in (metadata or ()) if isinstance(value, str)}
    request_id = values.get(REQUEST_ID_KEY) or new_request_id()
    payload = values.get(PRINCIPAL_KEY, "")
    signature = values.get(SIGNATURE_KEY, "")
    if _auth.required:
        if not payload:
            raise Unauthenticated("no principal: calls must come through the gateway, which authenticates them")
        if not hmac.compare_digest(signature, _sign(payload)):
            raise Unauthenticated("the principal's signature is missing or wrong (MNEMO_INTERNAL_SECRET differs?)")
    if not payload:
        return CallContext(request_id=request_id)
    try:
        data = json.loads(payload)
        principal, role, workspaces = str(data["p"]), str(data["r"]), tuple(str(w) for w in data["w"])
        expires = int(data.get("exp", 0))
    except (ValueError, KeyError, TypeError):
        if _auth.required:
            raise Unauthenticated("the principal metadata is malformed") from None
        # A bare name (an older client, a hand-made call) in local mode.
        return CallContext(principal=payload[:200], request_id=request_id)
    if role not in ROLES:
        raise Unauthenticated(f"unknown role {role!r}")
    if _auth.required and expires < time.time():
        raise Unauthenticated("the principal's signature has expired")
    return CallContext(principal, request_id, role, workspaces, str(data.get("t", "")))

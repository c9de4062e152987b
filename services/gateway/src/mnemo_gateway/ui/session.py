"""The web UI's session: a signed cookie carrying the bearer token, its per-session CSRF token, and the origin check.

The cookie is the only UI state, so the gateway stays stateless (any replica serves any request when they share
MNEMO_UI_SESSION_KEY). It is signed, not encrypted: it holds the bearer token, so it is exactly as secret as the token
and is sent only as an HttpOnly, SameSite=Strict cookie (Secure over https), never in a URL or to scripts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

COOKIE = "mnemo_ui"
COOKIE_PATH = "/ui"
CSRF_FIELD = "csrf"
_VERSION = "v1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Session:
    """One browser's session: its random id (what the CSRF token is bound to), the bearer token it signed in with
    ("" before sign-in and in local mode), and when it ends (unix seconds)."""

    sid: str
    token: str
    expires: int


class Sessions:
    """Makes and reads session cookies and CSRF tokens under one HMAC-SHA256 key."""

    def __init__(self, key: str, max_age_s: int) -> None:
        # No key configured: one per process, so sessions end when the gateway restarts (documented in docs/ui.md).
        self._key = hashlib.sha256(key.encode()).digest() if key else secrets.token_bytes(32)
        self.max_age_s = max_age_s

    def _mac(self, purpose: str, payload: str) -> str:
        return _b64(hmac.new(self._key, f"{purpose}|{payload}".encode(), hashlib.sha256).digest())

    def new(self, token: str = "") -> Session:
        """A fresh session (a new id at every sign-in, so a session id planted before it is worth nothing)."""
        return Session(secrets.token_hex(16), token, int(time.time()) + self.max_age_s)

    def encode(self, session: Session) -> str:
        payload = _b64(json.dumps({"sid": session.sid, "tok": session.token, "exp": session.expires}).encode())
        return f"{_VERSION}.{payload}.{self._mac('cookie', payload)}"

    def decode(self, value: str) -> Session | None:
        """The session a cookie value carries; None when it is malformed, forged or expired."""
        version, _, rest = value.partition(".")
        payload, _, mac = rest.partition(".")
        if version != _VERSION or not payload:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac("cookie", payload).encode()):
            return None
        try:
            data = json.loads(_unb64(payload))
            session = Session(str(data["sid"]), str(data["tok"]), int(data["exp"]))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > time.time() and session.sid else None

    def read(self, cookies: Mapping[str, str]) -> Session | None:
        value = cookies.get(COOKIE, "")
        return self.decode(value) if value else None

    def csrf(self, session: Session) -> str:
        """The CSRF token of a session: derived from its id, so it needs no storage and dies with the session."""
        return self._mac("csrf", session.sid)

    def csrf_ok(self, session: Session | None, sent: str) -> bool:
        return session is not None and bool(sent) and hmac.compare_digest(sent.encode(), self.csrf(session).encode())


def cookie_header(headers: Mapping[str, str]) -> dict[str, str]:
    """The request's cookies by name (the raw Cookie header, for the ASGI middleware that has no Request)."""
    cookies: dict[str, str] = {}
    for part in headers.get("cookie", "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            cookies.setdefault(name, value)
    return cookies


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a POST comes from a page of this very origin: its Origin header (or, lacking one, its Referer) names
    the Host the request was sent to (which HostCheck has already held to the allowed names). A request with neither
    is refused: every browser sends Origin on a form POST, so only something that is not a browser page omits both.
    The scheme is not compared: behind a TLS-terminating proxy the page is https and the request reaching us http."""
    host = headers.get("host", "")
    claimed = headers.get("origin") or headers.get("referer") or ""
    if not host or not claimed or claimed == "null":
        return False
    parts = urlsplit(claimed)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()

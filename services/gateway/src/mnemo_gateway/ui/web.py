"""The web UI's shared machinery: templates, the session a page belongs to, its error pages, and the gate the HTTP
middleware asks about /ui paths.

Templates are Jinja2 rather than Python strings: it escapes every value by default (memory text is untrusted) and
lets each page extend one layout, which string templates would re-implement by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from datetime import datetime
from typing import Any

import grpc
import structlog
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from mnemo_gateway.errors import CallError
from mnemo_gateway.operations import Operations
from mnemo_gateway.ui.session import COOKIE, COOKIE_PATH, CSRF_FIELD, Session, Sessions, cookie_header
from mnemo_platform import current_call

log = structlog.get_logger("mnemo.gateway")

PREFIX = "/ui"
# Reachable without a session: the sign-in page and the stylesheet and script it uses.
OPEN = ("/ui/login", "/ui/static/")
# Every page: no caching (they show private memory, and the tokens page a secret once), no framing, no scripts
# or styles but our own, no referrer sent elsewhere.
SECURITY_HEADERS = {
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
}
TITLES = {
    400: "Bad request",
    401: "Sign-in needed",
    403: "Not allowed",
    404: "Not found",
    409: "Conflict",
    413: "Too large",
    429: "Slow down",
    501: "Not available yet",
    503: "A Mnemo service is unavailable",
}


def when(value: str | None) -> str:
    """An RFC 3339 timestamp as a person reads it, in UTC to the second; empty stays empty."""
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


class WebUI:
    """Renders pages for one gateway: its operations, its session keys, and whether tokens are required."""

    def __init__(self, operations: Operations, sessions: Sessions, auth_enabled: bool) -> None:
        self.operations = operations
        self.sessions = sessions
        self.auth_enabled = auth_enabled
        self.env = Environment(
            loader=PackageLoader("mnemo_gateway.ui", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = when

    # -- what the HTTP middleware asks ----------------------------------------------------------------------

    @staticmethod
    def covers(path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    @staticmethod
    def is_open(path: str) -> bool:
        return any(path == p or (p.endswith("/") and path.startswith(p)) for p in OPEN)

    def token(self, headers: Mapping[str, str]) -> str:
        """The bearer token of the request's session cookie ("" when there is no valid one)."""
        session = self.sessions.read(cookie_header(headers))
        return session.token if session is not None else ""

    def refused(self, error: CallError, scope: MutableMapping[str, Any]) -> Response:
        """What a /ui request whose session gives no principal gets: the sign-in page (its cookie cleared) when
        the session is missing, expired or its token revoked; an error page when authentication itself failed."""
        if error.http_status == 401:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            had_session = COOKIE in cookie_header(headers)
            target = f"{PREFIX}/login?expired=1" if had_session else f"{PREFIX}/login"
            response: Response = RedirectResponse(target, status_code=303)
            response.delete_cookie(COOKIE, path=COOKIE_PATH)
            return response
        return self.error_page(Request(scope), error.http_status, error.message)

    # -- rendering -------------------------------------------------------------------------------------------

    def session(self, request: Request) -> tuple[Session, bool]:
        """The request's session, or a new one (True) to set: a page's forms need a CSRF token even before sign-in
        and in local mode."""
        session = self.sessions.read(request.cookies)
        return (session, False) if session is not None else (self.sessions.new(), True)

    def set_session(self, request: Request, response: Response, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            self.sessions.encode(session),
            max_age=self.sessions.max_age_s,
            path=COOKIE_PATH,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    def render(
        self, request: Request, template: str, status: int = 200, session: Session | None = None, **context: Any
    ) -> HTMLResponse:
        """A page: the layout's context (who is signed in, their role, the CSRF token) plus the page's own."""
        fresh = False
        if session is None:
            session, fresh = self.session(request)
        caller = current_call()
        body = self.env.get_template(template).render(
            request_path=request.url.path,
            auth_enabled=self.auth_enabled,
            signed_in=bool(session.token) or not self.auth_enabled,
            principal=caller.principal,
            role=caller.role,
            # A harvester token writes sessions and reads nothing: no page is its to open.
            is_reader=caller.at_least("agent"),
            is_reviewer=caller.at_least("reviewer"),
            is_admin=caller.at_least("admin"),
            csrf_field=CSRF_FIELD,
            csrf=self.sessions.csrf(session),
            **context,
        )
        response = HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)
        if fresh:
            self.set_session(request, response, session)
        return response

    async def page(self, request: Request, template: str, workspace: str, status: int = 200, **context: Any) -> Any:
        """A signed-in page: the layout with the workspace switcher (the workspaces this principal may see)."""
        workspaces = (await self.operations.list_workspaces())["workspaces"]
        named = {ws[field] for ws in workspaces for field in ("id", "name", "root_path")}
        if workspace not in named and workspace != "*":
            # Not registered yet (the default workspace before its first write): still the one the page is about.
            workspaces = [{"id": workspace, "name": workspace, "root_path": ""}, *workspaces]
        return self.render(request, template, status, workspace=workspace, workspaces=workspaces, **context)

    def error_page(self, request: Request, status: int, message: str, title: str = "") -> HTMLResponse:
        """A clear error page: the status, what went wrong in words, and the way back; never a traceback."""
        return self.render(
            request,
            "error.html",
            status,
            title=title or TITLES.get(status, "Error" if status < 500 else "Something went wrong"),
            http_status=status,
            message=message,
        )

    def call_error_page(self, request: Request, error: CallError) -> HTMLResponse:
        if error.code == grpc.StatusCode.PERMISSION_DENIED:
            log.info("ui_refused", path=request.url.path, message=error.message)
        return self.error_page(request, error.http_status, error.message)

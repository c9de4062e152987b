"""The web UI's pages under /ui: each handler reads its form, makes the same operation calls REST and MCP make
(gRPC to the services, as the signed-in principal), and renders a template."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import grpc
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError

from mnemo.common.v1 import common_pb2
from mnemo_gateway.errors import CallError
from mnemo_gateway.operations import Operations
from mnemo_gateway.schemas import KINDS, MODES, ROLES, ProposalDecisionInput, SearchInput, TokenInput
from mnemo_gateway.ui.session import COOKIE, COOKIE_PATH, CSRF_FIELD, same_origin
from mnemo_gateway.ui.web import PREFIX, WebUI
from mnemo_platform import current_call, enum_labels, new_request_id

STATIC = Path(__file__).parent / "static"
AUDIT_PAGE = 50
REVIEW_PAGE = 50
SOURCES_PAGE = 50
# The time filters the search form offers, as SearchInput names them.
TIME_FIELDS = ("created_after", "created_before", "updated_after", "updated_before", "as_of", "valid_at")
Form = dict[str, list[str]]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# What a reviewer may do to a proposal, and the word for it done.
DONE = {"accept": "accepted", "reject": "rejected", "reverse": "reversed"}
PROPOSAL_STATES = ("open", "applied", "rejected", "reversed", "all")
PROPOSAL_KINDS = tuple(enum_labels(common_pb2.ProposalKind))


def moment(value: str | None, field: str) -> datetime | None:
    """A date and time from a form: ISO 8601, or what a datetime-local input sends (no zone: read as UTC)."""
    if not value or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CallError.invalid(
            f"{field}: {value[:60]!r} is not a date and time (YYYY-MM-DDTHH:MM, UTC, or ISO 8601 with a zone)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def words(value: str) -> list[str]:
    """Tags or workspaces typed into one field, separated by commas, spaces or lines."""
    return [w for w in value.replace(",", " ").split() if w]


def invalid(exc: ValidationError) -> CallError:
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'form'}: {e['msg']}" for e in exc.errors())
    return CallError.invalid(problems)


def first(form: Form, name: str) -> str:
    return (form.get(name) or [""])[0]


async def posted(ui: WebUI, request: Request) -> Form:
    """A POSTed form, refused (403, nothing done) unless it comes from a page of this origin and carries this
    session's CSRF token."""
    if not same_origin(request.headers):
        raise CallError(
            grpc.StatusCode.PERMISSION_DENIED,
            "this form was not sent from a Mnemo page (its Origin or Referer names another site, or neither is sent)",
            0,
        )
    body = (await request.body()).decode("utf-8", errors="replace")
    form = parse_qs(body, keep_blank_values=True, max_num_fields=2000)
    session = ui.sessions.read(request.cookies)
    if not ui.sessions.csrf_ok(session, first(form, CSRF_FIELD)):
        raise CallError(
            grpc.StatusCode.PERMISSION_DENIED,
            "this form's CSRF token is missing or is not this session's (reload the page and send it again)",
            0,
        )
    return form


def back(path: str, **params: str) -> RedirectResponse:
    """After a POST, the page to show (303: the browser GETs it, so a reload does not send the form again)."""
    query = urlencode({k: v for k, v in params.items() if v})
    return RedirectResponse(f"{PREFIX}{path}" + (f"?{query}" if query else ""), status_code=303)


def build_ui_router(ui: WebUI) -> APIRouter:
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    ops = ui.operations

    @router.get("")
    async def home() -> Response:
        return back("/search")

    @router.get("/")
    async def home_slash() -> Response:
        return back("/search")

    # -- sign-in -----------------------------------------------------------------------------------------

    @router.get("/login")
    async def login_page(request: Request) -> Response:
        session = ui.sessions.read(request.cookies)
        if ui.auth_enabled and session is not None and session.token:
            # Signed in already (this open path is not authenticated, so it must not render as anyone).
            return back("/search")
        expired = request.query_params.get("expired") == "1"
        message = "Your session ended or its token was revoked: sign in again." if expired else ""
        return ui.render(request, "login.html", message=message)

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = await posted(ui, request)
        if not ui.auth_enabled:
            return back("/search")
        token = first(form, "token").strip()
        try:
            if not token:
                raise CallError(grpc.StatusCode.UNAUTHENTICATED, "enter a token", 0)
            await ops.authenticate(token, new_request_id())
        except CallError as exc:
            if exc.http_status != 401:
                raise
            message = "That token is not valid (unknown, mistyped or revoked)." if token else "Enter a token."
            return ui.render(request, "login.html", 401, message=message)
        response = back("/search")
        # A new session id at sign-in: a session (and CSRF token) from before it is worth nothing after.
        ui.set_session(request, response, ui.sessions.new(token))
        return response

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        await posted(ui, request)
        response = back("/login")
        response.delete_cookie(COOKIE, path=COOKIE_PATH)
        return response

    # -- search ------------------------------------------------------------------------------------------

    @router.get("/search")
    async def search(request: Request) -> Response:
        q = request.query_params
        workspace = ops.workspace(q.get("workspace"))
        query = q.get("q", "")
        fields: dict[str, Any] = {
            "query": query,
            "mode": q.get("mode") or "hybrid",
            "kinds": q.getlist("kind"),
            "tags": words(q.get("tags", "")),
            "explain": q.get("explain") == "on",
            "include_history": q.get("include_history") == "on",
            **{name: moment(q.get(name), name) for name in TIME_FIELDS},
            "workspace": workspace,
        }
        found = None
        if query.strip():
            try:
                args = SearchInput(**fields)
            except ValidationError as exc:
                raise invalid(exc) from None
            found = await ops.search(args, None)
        form = {**fields, **{name: q.get(name, "") for name in TIME_FIELDS}, "tags": q.get("tags", "")}
        return await ui.page(request, "search.html", workspace, form=form, found=found, kinds=KINDS, modes=MODES)

    # -- one memory --------------------------------------------------------------------------------------

    @router.get("/memories/{memory_id}")
    async def memory(request: Request, memory_id: str) -> Response:
        q = request.query_params
        workspace = ops.workspace(q.get("workspace"))
        as_of_text = q.get("as_of", "")
        as_of = moment(as_of_text, "as_of")
        current = await ops.get(memory_id, workspace, None, include_history=True)
        history = await ops.history(memory_id, workspace, None)
        audit = await ops.audit_log(workspace, memory_id, AUDIT_PAGE, q.get("audit_page", ""))
        past: dict[str, Any] | None = None
        past_missing = ""
        if as_of is not None:
            try:
                past = await ops.get(memory_id, workspace, None, include_history=True, as_of=as_of)
            except CallError as exc:
                if exc.code != grpc.StatusCode.NOT_FOUND:
                    raise
                past_missing = exc.message
        proposals = await proposals_about(ops, workspace, memory_id)
        timeline = sorted(
            [{"at": v["recorded_from"], "what": "version", "item": v} for v in history["versions"]]
            + [{"at": s["recorded_from"], "what": "status", "item": s} for s in history["states"]],
            key=lambda entry: (moment(entry["at"], "recorded_from") or EPOCH, entry["what"] == "status"),
        )
        return await ui.page(
            request,
            "memory.html",
            workspace,
            memory=current,
            history=history,
            timeline=timeline,
            audit=audit,
            as_of=as_of_text,
            as_of_moment=as_of.isoformat() if as_of else "",
            past=past,
            past_missing=past_missing,
            proposals=proposals,
        )

    # -- harvest -----------------------------------------------------------------------------------------

    @router.get("/harvest")
    async def harvest(request: Request) -> Response:
        q = request.query_params
        workspace = ops.workspace(q.get("workspace"))
        try:
            status = await ops.harvest_status()
            sources = await ops.harvest_sources(q.get("agent", ""), q.get("state", ""), SOURCES_PAGE, q.get("page", ""))
        except CallError as exc:
            if exc.code != grpc.StatusCode.UNAVAILABLE:
                raise
            return await ui.page(
                request, "harvest.html", workspace, unavailable=exc.message, harvest=None, sources=None
            )
        return await ui.page(request, "harvest.html", workspace, unavailable="", harvest=status, sources=sources)

    # -- tokens (admin: the services refuse anyone else) -------------------------------------------------

    async def tokens_page(request: Request, created: dict[str, Any] | None = None, status: int = 200) -> Response:
        workspace = ops.workspace(request.query_params.get("workspace"))
        listed = await ops.list_tokens()
        return await ui.page(
            request,
            "tokens.html",
            workspace,
            status,
            tokens=listed["tokens"],
            created=created,
            roles=ROLES,
            revoked=request.query_params.get("revoked", ""),
        )

    @router.get("/tokens")
    async def tokens(request: Request) -> Response:
        return await tokens_page(request)

    @router.post("/tokens")
    async def create_token(request: Request) -> Response:
        form = await posted(ui, request)
        try:
            args = TokenInput(
                principal=first(form, "principal").strip(),
                role=first(form, "role"),
                workspaces=words(first(form, "workspaces")),
                label=first(form, "label"),
            )
        except ValidationError as exc:
            raise invalid(exc) from None
        created = await ops.create_token(args)
        # The secret is in this response's body only (no-store), never in a URL or a cookie: shown once.
        return await tokens_page(request, created, 201)

    @router.post("/tokens/{token_id}/revoke")
    async def revoke_token(request: Request, token_id: str) -> Response:
        await posted(ui, request)
        await ops.revoke_token(token_id)
        return back("/tokens", revoked=token_id)

    # -- the review queue (reviewer: the services refuse an agent, and the page says so) -------------------

    async def review_page(
        request: Request,
        workspace: str,
        state: str,
        kind: str,
        page: str,
        outcomes: list[dict[str, Any]],
        done: str,
    ) -> Response:
        """The queue as the list and the bulk decisions both show it (the outcomes of a bulk decision above it)."""
        listed = await ops.list_proposals(workspace, "" if state == "all" else state, kind, "", REVIEW_PAGE, page)
        return await ui.page(
            request,
            "review.html",
            workspace,
            switch_action="/ui/review",
            proposals=listed["proposals"],
            next_page=listed.get("next_page_token", ""),
            state=state,
            kind=kind,
            states=PROPOSAL_STATES,
            proposal_kinds=PROPOSAL_KINDS,
            outcomes=outcomes,
            done=done,
        )

    @router.get("/review")
    async def review(request: Request) -> Response:
        q = request.query_params
        workspace = ops.workspace(q.get("workspace"))
        state = q.get("state", "open")
        kind = q.get("kind", "")
        return await review_page(request, workspace, state, kind, q.get("page", ""), [], q.get("done", ""))

    @router.get("/review/{proposal_id}")
    async def proposal(request: Request, proposal_id: str) -> Response:
        q = request.query_params
        workspace = ops.workspace(q.get("workspace"))
        shown = await ops.get_proposal(proposal_id, workspace)
        return await ui.page(
            request,
            "proposal.html",
            workspace,
            switch_action="/ui/review",
            proposal=shown["proposal"],
            memories=shown.get("memories", []),
            done=q.get("done", ""),
        )

    @router.post("/review/{proposal_id}/{decision}")
    async def decide(request: Request, proposal_id: str, decision: str) -> Response:
        form = await posted(ui, request)
        workspace = ops.workspace(first(form, "workspace"))
        if proposal_id == "bulk":
            return await decide_many(request, form, workspace, decision)
        decide_one = decider(ops, checked_decision(decision))
        await decide_one(proposal_id, ProposalDecisionInput(reason=reason_of(form, decision), workspace=workspace))
        return back(f"/review/{proposal_id}", workspace=workspace, done=DONE[decision])

    async def decide_many(request: Request, form: Form, workspace: str, decision: str) -> Response:
        """Each selected proposal decided on its own (one call each, as from its own page); the page lists what
        happened to every one, a refusal beside the others' success."""
        checked_decision(decision)
        ids = [i for i in form.get("id", []) if i.strip()]
        if not ids:
            raise CallError.invalid("select at least one proposal")
        if decision == "reverse":
            raise CallError.invalid("reverse proposals one at a time, each with its own reason")
        decision_input = ProposalDecisionInput(reason=reason_of(form, decision), workspace=workspace)
        decide_one = decider(ops, decision)
        outcomes = []
        for proposal_id in ids:
            try:
                await decide_one(proposal_id, decision_input)
                outcomes.append({"id": proposal_id, "ok": True, "message": DONE[decision]})
            except CallError as exc:
                outcomes.append({"id": proposal_id, "ok": False, "message": exc.message})
        return await review_page(request, workspace, "open", "", "", outcomes, "")

    return router


async def proposals_about(ops: Operations, workspace: str, memory_id: str) -> list[dict[str, Any]] | None:
    """The proposals touching a memory, for a reviewer's view of it; None for a role that has no queue (asking
    would only be refused)."""
    if not current_call().at_least("reviewer"):
        return None
    try:
        return list((await ops.list_proposals(workspace, "", "", memory_id, REVIEW_PAGE, ""))["proposals"])
    except CallError as exc:
        if exc.code not in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT):
            raise
        return None


def checked_decision(decision: str) -> str:
    if decision not in DONE:
        raise CallError(grpc.StatusCode.NOT_FOUND, f"no such decision {decision[:40]!r}: accept, reject or reverse", 0)
    return decision


def reason_of(form: Form, decision: str) -> str:
    """The reviewer's reason: required to reject or reverse (the audit log and the proposer are told why)."""
    reason = first(form, "reason").strip()
    if decision in ("reject", "reverse") and not reason:
        raise CallError.invalid(f"a reason is required to {decision} a proposal")
    return reason


def decider(ops: Operations, decision: str) -> Callable[[str, ProposalDecisionInput], Awaitable[dict[str, Any]]]:
    """The review operation that makes a decision (the services check the reviewer's role and the proposal)."""
    return {"accept": ops.accept_proposal, "reject": ops.reject_proposal, "reverse": ops.reverse_proposal}[decision]


def static_files() -> StaticFiles:
    """The UI's own stylesheet and script, shipped in the package (nothing from a CDN: the UI works offline)."""
    return StaticFiles(directory=STATIC)

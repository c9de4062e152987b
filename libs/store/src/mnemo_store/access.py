"""The workspace wall: for the calling principal and a workspace reference, what may be read and written.

Every read and every write names its workspaces through this module, and nowhere else is a
workspace rule written down:

- a token reaches its own workspaces, and an all-workspace (admin) token reaches every one;
- every token reads `global`, the user-wide scope; writing it takes a reviewer;
- a read inside a workspace also sees `global`;
- a harvester token writes only harvested sessions and the candidates drawn from them (`check_writer`);
- a workspace that does not exist is refused in the same words as another's, so a token bound to
  workspaces cannot probe for registered names or project paths (an admin is told it is not registered).

`resolve_for_read` / `resolve_for_write` turn a reference into a workspace the caller may use,
`reach_in` and `caller_reach` say which workspaces a read sees, and `workspace_clause` is the one
place that reach becomes SQL (the predicate builder and every other read use it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import asyncpg

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import CallContext, NotFound, PermissionDenied, current_call
from mnemo_store.params import Params
from mnemo_store.workspaces import GLOBAL_WORKSPACE, WorkspaceCache, WorkspaceRow, find_workspace

Conn: TypeAlias = asyncpg.Connection | asyncpg.Pool


KnownIds: TypeAlias = dict[str, WorkspaceRow]
"""Workspaces by id, as resolve_for_write keeps them."""
MAX_KNOWN_IDS = 10_000


@dataclass(frozen=True)
class Reach:
    """The workspaces a read sees: their ids, or every workspace (`ids` is None, admin only)."""

    ids: tuple[str, ...] | None

    @property
    def everywhere(self) -> bool:
        return self.ids is None


EVERYWHERE = Reach(None)


def reach_in(ws: WorkspaceRow) -> Reach:
    """What a read inside `ws` sees: the workspace and `global`, which every workspace reads."""
    return Reach((GLOBAL_WORKSPACE,) if ws.id == GLOBAL_WORKSPACE else (ws.id, GLOBAL_WORKSPACE))


def caller_reach(call: CallContext | None = None) -> Reach:
    """Everything the caller may read when it names no workspace: its own workspaces and `global`."""
    call = call or current_call()
    if call.all_workspaces:
        return EVERYWHERE
    return Reach(tuple(dict.fromkeys([*call.workspaces, GLOBAL_WORKSPACE])))


def require_everywhere(action: str) -> Reach:
    """The reach of a read across every workspace, which only an all-workspace (admin) token may make."""
    call = current_call()
    if not call.all_workspaces:
        raise PermissionDenied(
            f"{action} needs an admin token; this token ({call.principal}) reaches its own",
            reasons_pb.ERROR_REASON_ROLE_TOO_LOW,
        )
    return EVERYWHERE


def workspace_clause(reach: Reach, params: Params, column: str) -> str:
    """The SQL condition keeping `column` (a workspace id) inside `reach`; binds its values into `params`."""
    if reach.ids is None:
        return "TRUE"
    if not reach.ids:
        raise ValueError("a reach needs at least one workspace (None means all)")
    return f"{column} = ANY({params.bind(list(reach.ids))}::text[])"


def may_read(workspace_id: str, call: CallContext | None = None) -> bool:
    call = call or current_call()
    return workspace_id == GLOBAL_WORKSPACE or call.all_workspaces or workspace_id in call.workspaces


def check_access(workspace_id: str, *, write: bool, named: str = "") -> None:
    """Raises PERMISSION_DENIED unless the caller may read (or write) `workspace_id` (`named`, as the caller put it)."""
    call = current_call()
    if workspace_id == GLOBAL_WORKSPACE:
        if write and not call.at_least("reviewer"):
            raise PermissionDenied(
                f"the global scope is read-only for {call.role} tokens; a reviewer promotes memories into it",
                reasons_pb.ERROR_REASON_ROLE_TOO_LOW,
            )
        return
    if not may_read(workspace_id, call):
        raise outside_workspaces(named or workspace_id)


# What a harvester token may write: its sessions, and the DECISION:/LESSON: candidates drawn from them.
HARVESTED_PROVENANCES = ("harvested_summary", "harvested_transcript")
EXTRACTED_KINDS = ("decision", "lesson")


def check_writer(kind: str, provenance: str, status: str, derived: bool, import_batch: bool) -> None:
    """Raises PERMISSION_DENIED when a harvester token's write is anything but a harvested session (kind
    `session`, a harvested provenance, with its derivation) or a candidate drawn from one (kind decision or
    lesson, provenance `extracted`, status `candidate`); every other role writes what its workspaces allow."""
    call = current_call()
    if call.role != "harvester":
        return
    session = kind == "session" and provenance in HARVESTED_PROVENANCES and derived and status == "active"
    candidate = kind in EXTRACTED_KINDS and provenance == "extracted" and status == "candidate" and not derived
    if (session or candidate) and not import_batch:
        return
    raise PermissionDenied(
        f"a harvester token ({call.principal}) writes only harvested sessions (kind session, provenance "
        f"{' or '.join(HARVESTED_PROVENANCES)}, with a derivation) and the candidates drawn from them (kind "
        f"{' or '.join(EXTRACTED_KINDS)}, provenance extracted, status candidate); this write is kind {kind}, "
        f"provenance {provenance}, status {status}",
        reasons_pb.ERROR_REASON_ROLE_TOO_LOW,
    )


def outside_workspaces(named: str) -> PermissionDenied:
    """The refusal for a workspace outside the token, in the caller's own words."""
    call = current_call()
    own = ", ".join(sorted(call.workspaces))
    return PermissionDenied(
        f"this token ({call.principal}) may not touch workspace {named!r}; it reaches {own} and reads global "
        # The same words whether or not the workspace exists (no probing), so also for a project directory
        # nobody registered yet, which only an admin's first use registers.
        "(a new workspace, such as a project directory on first use, is registered only with an admin token)"
    )


def not_registered(ref: str) -> NotFound:
    return NotFound(
        f"workspace {ref!r} is not registered; register it with `mnemo workspace add PATH` "
        "(or `mnemo workspace add --name NAME`), or POST /api/v1/workspaces",
        reasons_pb.ERROR_REASON_WORKSPACE_NOT_FOUND,
    )


async def _resolve(
    conn: Conn, ref: str, *, write: bool, cache: WorkspaceCache | None = None, ids: KnownIds | None = None
) -> WorkspaceRow:
    ref = (ref or "").strip()
    row = ids.get(ref) if ids is not None else None
    if row is None:
        row = await (find_workspace(conn, ref) if cache is None else cache.find(conn, ref))
        if ids is not None and row is not None and row.id == ref and len(ids) < MAX_KNOWN_IDS:
            ids[ref] = row
    if row is None:
        if not current_call().all_workspaces:
            raise outside_workspaces(ref)
        raise not_registered(ref)
    check_access(row.id, write=write, named=ref)
    return row


async def resolve_for_read(conn: Conn, ref: str, cache: WorkspaceCache | None = None) -> WorkspaceRow:
    """The workspace `ref` names (an id, a name or a path under its root), if the caller may read it.

    With `cache`, what `ref` names may come from it; whether the caller may read it is decided
    on every call."""
    return await _resolve(conn, ref, write=False, cache=cache)


async def resolve_for_write(conn: Conn, ref: str, ids: KnownIds | None = None) -> WorkspaceRow:
    """The workspace `ref` names, if the caller may write it.

    With `ids`, a reference that is a workspace's id is looked up once: an id names the same row
    for good (workspaces are never renamed or deleted), and an id wins over a name, so no later
    registration can change what it names. A name or a path is looked up every time: a path
    under a root registered later names the new workspace from then on. Whether the caller may
    write it is decided on every call."""
    return await _resolve(conn, ref, write=True, ids=ids)


async def resolve_registered(conn: Conn, ref: str) -> WorkspaceRow:
    """The workspace `ref` names, whoever asks: for admin actions that name workspaces without entering
    them (binding a token to workspaces), and for the service's own work on a row it already holds."""
    row = await find_workspace(conn, (ref or "").strip())
    if row is None:
        raise not_registered(ref.strip())
    return row

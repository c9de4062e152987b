"""Bearer tokens: created once (the secret shown then and never again), checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import ALL_WORKSPACES, ROLES, InvalidArgument, NotFound

TOKEN_PREFIX = "mnemo_"  # noqa: S105 (a prefix, not a secret)
_TOKEN_RE = re.compile(r"^mnemo_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$")
_PRINCIPAL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,99}$")
# last_used_at is bookkeeping, not an audit trail: one write a minute per token is enough.
LAST_USED_GRANULARITY_S = 60


@dataclass(frozen=True)
class TokenRow:
    id: str
    principal: str
    role: str
    workspaces: tuple[str, ...]
    label: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


_COLUMNS = "id, principal, role, workspaces, label, created_at, last_used_at, revoked_at"


def _row(record: asyncpg.Record | dict) -> TokenRow:
    return TokenRow(**{**dict(record), "workspaces": tuple(record["workspaces"])})


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def create_token(
    conn: asyncpg.Connection, principal: str, role: str, workspaces: list[str], label: str = ""
) -> tuple[TokenRow, str]:
    """Creates a token for `principal` (created if new); returns it and the token string, shown once."""
    if not _PRINCIPAL_RE.match(principal or ""):
        raise InvalidArgument("principal must be 1-100 letters, digits or ._@:- (a user or agent name)")
    if role not in ROLES:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}")
    if not workspaces:
        raise InvalidArgument("a token needs at least one workspace (or * for an admin)")
    if ALL_WORKSPACES in workspaces and role != "admin":
        raise InvalidArgument("only an admin token may reach every workspace (*); name the agent's workspaces")
    if len(label) > 200 or "\x00" in label:
        raise InvalidArgument("label must be at most 200 characters, without NUL bytes")
    await conn.execute("INSERT INTO principals (name) VALUES ($1) ON CONFLICT DO NOTHING", principal)
    token_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))
    secret = secrets.token_urlsafe(32)
    record = await conn.fetchrow(
        f"""
        INSERT INTO tokens (id, principal, secret_hash, role, workspaces, label)
        VALUES ($1, $2, $3, $4, $5, $6) RETURNING {_COLUMNS}
        """,
        token_id,
        principal,
        _hash(secret),
        role,
        workspaces,
        label,
    )
    return _row(record), f"{TOKEN_PREFIX}{token_id}_{secret}"


async def authenticate(conn: asyncpg.Connection | asyncpg.Pool, token: str) -> TokenRow | None:
    """The live token `token` names, or None (malformed, unknown, wrong secret or revoked)."""
    match = _TOKEN_RE.match(token or "")
    if match is None:
        return None
    token_id, secret = match.groups()
    record = await conn.fetchrow(f"SELECT {_COLUMNS}, secret_hash FROM tokens WHERE id = $1", token_id)
    # Compared even when the row is missing, so the timing says nothing about which ids exist.
    expected = record["secret_hash"] if record is not None else _hash("")
    if not hmac.compare_digest(_hash(secret), expected) or record is None or record["revoked_at"] is not None:
        return None
    await conn.execute(
        f"""
        UPDATE tokens SET last_used_at = now()
        WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '{LAST_USED_GRANULARITY_S} seconds')
        """,
        token_id,
    )
    data = dict(record)
    del data["secret_hash"]
    return _row(data)


async def list_tokens(conn: asyncpg.Connection | asyncpg.Pool) -> list[TokenRow]:
    return [_row(r) for r in await conn.fetch(f"SELECT {_COLUMNS} FROM tokens ORDER BY created_at, id")]


async def revoke_token(conn: asyncpg.Connection, token_id: str) -> TokenRow:
    record = await conn.fetchrow(
        f"UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING {_COLUMNS}", token_id
    )
    if record is None:
        raise NotFound(f"no token {token_id!r}; `mnemo token list` shows them", reasons_pb.ERROR_REASON_TOKEN_NOT_FOUND)
    return _row(record)


async def admin_token_exists(conn: asyncpg.Connection | asyncpg.Pool) -> bool:
    return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM tokens WHERE role = 'admin' AND revoked_at IS NULL)"))


async def bootstrap_admin_token(dsn: str) -> str:
    """The first admin token, when authentication is on and no live admin token exists; else "".

    `mnemo up` prints it once: without it nobody could create the other tokens.
    """
    from mnemo_store.audit import AuditEvent, append_audit_event
    from mnemo_store.database import open_pool

    pool = await open_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            # Two starts at once must not both mint one.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('mnemo-bootstrap-admin'))")
            if await admin_token_exists(conn):
                return ""
            row, secret = await create_token(conn, "admin", "admin", [ALL_WORKSPACES], "created by mnemo up")
            await append_audit_event(
                conn,
                AuditEvent(
                    "global",
                    "token_create",
                    details={"token": row.id, "principal": row.principal, "role": row.role, "workspaces": ["*"]},
                ),
            )
            return secret
    finally:
        await pool.close()

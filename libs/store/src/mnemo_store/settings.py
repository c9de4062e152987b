"""Where PostgreSQL is and how many connections each service keeps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import platformdirs

from mnemo_platform.settings import (
    SettingsError,
    parse_non_negative_float,
    parse_positive_float,
    parse_positive_int,
    setting,
)


def default_data_dir() -> str:
    return platformdirs.user_data_dir("mnemo", appauthor=False)


@dataclass(frozen=True)
class DatabaseSettings:
    """Where PostgreSQL is and how many connections each service keeps."""

    url: str = setting(
        "MNEMO_DATABASE_URL",
        "",
        "PostgreSQL (>= 15, with pgvector) to use. Empty: start the embedded PostgreSQL in `MNEMO_DATA_DIR`.",
        shown_default="(empty: embedded)",
    )
    data_dir: str = setting(
        "MNEMO_DATA_DIR",
        "",
        "Directory for the embedded PostgreSQL and other local state.",
        shown_default="platform user data dir, e.g. `~/.local/share/mnemo`",
    )
    audit_key_file: str = setting(
        "MNEMO_AUDIT_KEY_FILE",
        "",
        "File holding the key the audit chains' heads are signed with, outside the database (ingest makes it "
        "when missing; give search the same file). `off`: chains are not anchored.",
        shown_default="`audit-anchor.key` in the platform user data dir",
    )
    start_timeout_s: float = setting(
        "MNEMO_PG_START_TIMEOUT_S",
        600.0,
        "Longest `mnemo up` waits for its embedded PostgreSQL to start or restart, crash recovery included.",
        parse_positive_float,
    )
    pool_min: int = setting("MNEMO_DB_POOL_MIN", 1, "Connections each service opens at start.", parse_positive_int)
    pool_max: int = setting(
        "MNEMO_DB_POOL_MAX",
        10,
        "Most connections a service's pool holds (search has two pools: its lexical statements have their own).",
        parse_positive_int,
    )
    wait_s: float = setting(
        "MNEMO_DB_WAIT_S",
        30.0,
        "Seconds a starting service waits for PostgreSQL, and search and harvest for ingest to have migrated it.",
        parse_positive_float,
    )

    statement_timeout_s: float = setting(
        "MNEMO_DB_STATEMENT_TIMEOUT_S",
        60.0,
        "Longest a service's statement may run before PostgreSQL cancels it (0: no limit); migrations are exempt.",
        parse_non_negative_float,
    )
    idle_in_transaction_timeout_s: float = setting(
        "MNEMO_DB_IDLE_IN_TRANSACTION_TIMEOUT_S",
        300.0,
        "Longest a service's connection may sit idle inside a transaction before PostgreSQL ends it, "
        "releasing its locks (0: no limit).",
        parse_non_negative_float,
    )

    def session_limits(self) -> dict[str, str]:
        """The timeouts every service connection starts with: a runaway statement or a transaction
        left open by a stalled caller cannot hold locks and a connection for ever."""
        return {
            "statement_timeout": str(round(self.statement_timeout_s * 1000)),
            "idle_in_transaction_session_timeout": str(round(self.idle_in_transaction_timeout_s * 1000)),
        }

    @property
    def audit_key_path(self) -> Path | None:
        """The anchor key's file: by default beside (never inside) the embedded database, in the
        platform's user data dir whatever MNEMO_DATA_DIR says; None when anchoring is off."""
        if self.audit_key_file == "off":
            return None
        return Path(self.audit_key_file or Path(default_data_dir()) / "audit-anchor.key").expanduser()

    @property
    def resolved_data_dir(self) -> Path:
        return Path(self.data_dir or default_data_dir()).expanduser()

    def url_for(self, service: str) -> str:
        """The external database a service run alone uses: only `mnemo up` starts an embedded one."""
        if not self.url:
            raise SettingsError(
                f"MNEMO_DATABASE_URL is required for `mnemo serve {service}`; `mnemo up` starts an embedded PostgreSQL"
            )
        return self.url

    def validate(self) -> None:
        if self.pool_min > self.pool_max:
            raise SettingsError(
                f"invalid configuration: MNEMO_DB_POOL_MIN ({self.pool_min}) exceeds "
                f"MNEMO_DB_POOL_MAX ({self.pool_max})"
            )

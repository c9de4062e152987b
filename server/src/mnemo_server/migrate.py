"""`mnemo migrate`: bring MNEMO_DATABASE_URL's database to this version's schema, then exit (a Kubernetes Job)."""

from __future__ import annotations

import asyncio
import sys

from mnemo_embed import build_embedder
from mnemo_embed.settings import EmbeddingSettings
from mnemo_platform import MnemoError, load_all
from mnemo_platform.config import LogSettings
from mnemo_platform.logging import configure_logging
from mnemo_platform.settings import SettingsError
from mnemo_store import bootstrap_admin_token, migrate_database
from mnemo_store.settings import DatabaseSettings


def run_migrate(admin_token: bool = False) -> int:
    """Does what a starting ingest does to the database (migrations, audit anchor key, embedding
    space) and nothing more; 0 when the database is at this version's schema, 2 for bad settings,
    1 when PostgreSQL cannot be reached (after MNEMO_DB_WAIT_S) or refuses the migrations.

    With `admin_token`, then creates the first admin token if no live one exists and prints it, once:
    what `mnemo up` does on its first start with authentication on, for a cluster, where the services
    never mint one. The migration Job runs without it, so no secret is left in its logs."""
    try:
        logs, database, embedding = load_all((LogSettings, DatabaseSettings, EmbeddingSettings))
        configure_logging(logs.level, logs.format)
        if not database.url:
            raise SettingsError(
                "MNEMO_DATABASE_URL is required for `mnemo migrate`; `mnemo up` migrates its embedded PostgreSQL"
            )
        # The model's name and dimension only (the embedding space); the model itself is not loaded.
        embedder = build_embedder(embedding)
    except (SettingsError, MnemoError, OSError) as exc:
        print(f"mnemo migrate: {exc}", file=sys.stderr)
        return 2
    try:
        applied = asyncio.run(migrate_database(database.url, database, embedder.model, embedder.dimension))
    except (MnemoError, OSError) as exc:
        print(f"mnemo migrate: {exc}", file=sys.stderr)
        return 1
    if applied:
        print(f"mnemo migrate: applied {len(applied)} migration(s): {', '.join(applied)}", flush=True)
    else:
        print("mnemo migrate: the database was already at this version's schema", flush=True)
    if admin_token:
        try:
            secret = asyncio.run(bootstrap_admin_token(database.url))
        except (MnemoError, OSError) as exc:
            print(f"mnemo migrate: cannot create the admin token: {exc}", file=sys.stderr)
            return 1
        if secret:
            print(f"An admin token was created. It is shown only now:\n  MNEMO_TOKEN={secret}", flush=True)
        else:
            print("mnemo migrate: a live admin token exists already; none was created", flush=True)
    return 0

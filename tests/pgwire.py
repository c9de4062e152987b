"""A PostgreSQL wire tap for tests: a Unix-socket relay that records every round trip its clients make."""

from __future__ import annotations

import asyncio
import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

# A client waits for the server after these: Sync ends an extended-protocol exchange, Flush
# ends asyncpg's prepare (Parse, Describe, Flush), Query is a whole simple-protocol statement.
_WAITS = {b"S", b"H", b"Q"}
_STARTUP_CODE = 196608  # protocol 3.0; the other untyped requests (SSL, GSS, cancel) use other codes


@dataclass
class RoundTrip:
    """One exchange a client waits for: its message types in order, and the SQL text it carries."""

    connection: int
    types: str
    sql: list[str] = field(default_factory=list)

    @property
    def executes(self) -> bool:
        """Whether it runs a statement (a simple Query, or an Execute), as opposed to only preparing one."""
        return "Q" in self.types or "E" in self.types


def _sql_of(mtype: bytes, body: bytes, prepared: dict[bytes, str]) -> str | None:
    """The SQL a message carries or runs; remembers what each Parse names for the Binds that follow."""
    if mtype == b"Q":
        return body.split(b"\x00", 1)[0].decode()
    if mtype == b"P":  # Parse: statement name, then the query text
        name, text, _ = body.split(b"\x00", 2)
        prepared[name] = text.decode()
        return prepared[name]
    if mtype == b"B":  # Bind: portal name, then the prepared statement it runs
        return prepared.get(body.split(b"\x00", 2)[1], "?")
    return None


class WireTap:
    """Relays a PostgreSQL Unix socket and records the round trips of every connection through it.

    It reads only what clients send (the server's answers pass untouched), so what it counts is
    what a client makes PostgreSQL do, whatever client library or pool sits above.
    """

    def __init__(self, dsn: str) -> None:
        self.target_dsn = dsn
        query = parse_qs(urlsplit(dsn).query)
        self._target_dir = query["host"][0]
        self._port = query.get("port", ["5432"])[0]
        self._dir = tempfile.mkdtemp(prefix="mnemo-tap-")
        self._server: asyncio.Server | None = None
        self._connections = 0
        self.round_trips: list[RoundTrip] = []

    @property
    def dsn(self) -> str:
        """The DSN that reaches the same database through the tap."""
        parts = urlsplit(self.target_dsn)
        query = parse_qs(parts.query)
        query["host"] = [self._dir]
        query["port"] = [self._port]
        encoded = "&".join(f"{k}={v[0]}" for k, v in query.items())
        return parts._replace(query=encoded).geturl()

    async def start(self) -> None:
        path = Path(self._dir) / f".s.PGSQL.{self._port}"
        self._server = await asyncio.start_unix_server(self._accept, path=str(path))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        shutil.rmtree(self._dir, ignore_errors=True)

    def take(self) -> list[RoundTrip]:
        """The round trips recorded since the last take, which starts a new count."""
        taken, self.round_trips = self.round_trips, []
        return taken

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self._connections += 1
        number = self._connections
        target = str(Path(self._target_dir) / f".s.PGSQL.{self._port}")
        server_r, server_w = await asyncio.open_unix_connection(target)
        back = asyncio.ensure_future(self._pipe(server_r, client_w))
        try:
            await self._client_to_server(number, client_r, server_w)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            server_w.close()
            await back
            client_w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _client_to_server(self, number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Untyped requests come first (a length, then a code), until the startup message itself.
        while True:
            head = await reader.readexactly(8)
            length, code = struct.unpack("!ii", head)
            writer.write(head + await reader.readexactly(length - 8))
            await writer.drain()
            if code == _STARTUP_CODE:
                break
        pending = RoundTrip(number, "")
        prepared: dict[bytes, str] = {}
        while True:
            mtype = await reader.readexactly(1)
            (length,) = struct.unpack("!i", await reader.readexactly(4))
            body = await reader.readexactly(length - 4)
            if mtype not in (b"p", b"X"):  # authentication and Terminate are not statements
                pending.types += mtype.decode()
                sql = _sql_of(mtype, body, prepared)
                if sql is not None:
                    pending.sql.append(sql)
                if mtype in _WAITS:
                    self.round_trips.append(pending)
                    pending = RoundTrip(number, "")
            writer.write(mtype + struct.pack("!i", length) + body)
            await writer.drain()

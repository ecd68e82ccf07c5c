"""The `run_sql` worker: a child process that runs agent queries under hard OS limits.

Why a process (issue 25): DuckDB's `memory_limit` covers its buffer manager only, and its
interrupt is checked between vectors, so one `generate_series(1, 300000000)` list or one
`repeat('x', 900000000)` value is allocated outside the limit and past the deadline (the
lane's own process grew to 16.8 GB). What DuckDB cannot get around is the kernel: the
worker caps its own address space with RLIMIT_AS before it opens the database, so an
allocation past the cap fails (DuckDB raises an Out of Memory error, the worker reports it
and exits to be replaced with a clean heap), and the parent (`sql_tool.AgentSql`) kills a
worker that has not answered shortly after the deadline. Nothing an agent sends can then
take more than the cap or outlive the deadline by more than the grace.

The worker is started as a script with `python -I` (no environment-driven imports, no
script folder on the path) and a scrubbed environment (no API keys to read), and imports
only the standard library and duckdb: it starts in about 0.35 s with about 100 MB of
address space. The parent imports this module for the value conversions it shares.

Protocol over a socket pair (multiprocessing's framed `Connection`, JSON bodies only, never
pickle): argv is ``<fd> <settings JSON>``; the worker answers ``{"ready": {...}}`` (the
world's provenance, its tables and the catalog's table-only functions) or ``{"error":
...}``; then for each ``{"sql": ..., "guarded": bool}`` one reply, ``{"result": {...}}`` or
``{"error": kind, "reason": ...}`` with kind one of refused, execution, timeout, memory,
too_large; a reply carrying ``"exit": true`` is the worker's last. EOF ends the worker.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import resource
import sys
import threading
import time
import uuid
from decimal import Decimal
from multiprocessing.connection import Connection
from typing import Any

import duckdb

MAX_MESSAGE_CHARS = 800

# Functions DuckDB lists as table functions, table macros or pragmas only, and the
# postgres-compatibility macros: refused in any position, beyond the guard's own list.
CATALOG_DENIED_FUNCTIONS = """
SELECT DISTINCT function_name FROM duckdb_functions()
WHERE function_type IN ('table', 'table_macro', 'pragma') OR schema_name = 'pg_catalog'
EXCEPT
SELECT function_name FROM duckdb_functions()
WHERE schema_name = 'main' AND function_type IN ('scalar', 'aggregate', 'macro')
"""

_WORLD_TABLES = (
    "SELECT table_name FROM duckdb_tables() "
    "WHERE database_name = current_database() AND schema_name = 'main' ORDER BY table_name"
)
_WORLD_SOURCE = (
    "SELECT plugin, generator_version, seed, scale, fingerprint FROM agent_build.world_source"
)

# A worker whose address space stays above this share of its cap after a query is
# replaced: DuckDB and the C allocator keep freed arenas mapped, and the next query
# would fail on memory it never asked for.
RECYCLE_SHARE = 0.6

# DuckDB spells an ENUM type with every value; a 2,400-value list helps no agent. The
# pattern is unambiguous (values need a comma between them), so it stays linear on text an
# agent controls, such as its own query echoed in an error.
_ENUM_TYPE = re.compile(r"ENUM\('(?:[^']|'')*'(?:,\s*'(?:[^']|'')*')*\)")


def json_safe(value: Any) -> Any:
    """A DuckDB value as JSON: exact numbers and dates as text, containers recursively."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal | dt.timedelta | uuid.UUID):
        return str(value)
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    return str(value)


def type_name(column_type: Any) -> str:
    """A result column's type as the agent should read it: ENUM columns are text."""
    if column_type.id == "enum":
        return "VARCHAR"
    name = str(column_type)
    return _ENUM_TYPE.sub("VARCHAR", name) if "ENUM(" in name else name


def agent_message(error: duckdb.Error) -> str:
    """DuckDB's message for the agent: ENUM types shown as VARCHAR, bounded length."""
    text = str(error).strip()
    if "ENUM(" in text:
        text = _ENUM_TYPE.sub("VARCHAR", text)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    return text


# Column types whose Python values are already JSON (ENUM values come back as str).
_PLAIN_TYPES = frozenset(
    {
        "varchar",
        "enum",
        "boolean",
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "hugeint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "uhugeint",
    }
)


def json_rows(fetched: list[tuple[Any, ...]], type_ids: list[str]) -> list[list[Any]]:
    """Rows as JSON-safe lists, converting only the columns whose type needs it."""
    convert = [i for i, type_id in enumerate(type_ids) if type_id not in _PLAIN_TYPES]
    rows = []
    for row in fetched:
        values = list(row)
        for i in convert:
            values[i] = json_safe(values[i])
        rows.append(values)
    return rows


class _Deadline:
    """Interrupts one cursor when its time is up, unless the call already finished."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, at: float) -> None:
        self.at = at
        self._cursor = cursor
        self._lock = threading.Lock()
        self._finished = False
        self.fired = False

    def fire(self) -> None:
        with self._lock:
            if not self._finished:
                self.fired = True
                self._cursor.interrupt()

    def finish(self) -> None:
        with self._lock:
            self._finished = True


class _Watchdog:
    """One thread that fires deadlines. A `threading.Timer` per query would start an OS
    thread each call (0.2-0.3 ms, a tenth of a small query), and waking this thread on
    every call costs as much; so when idle it sleeps one timeout at a time, and a query
    only wakes it when its deadline comes before the planned wake-up."""

    def __init__(self, idle_s: float) -> None:
        self._idle_s = idle_s
        self._wake = threading.Condition()
        self._armed: set[_Deadline] = set()
        self._wake_at = 0.0
        self._thread = threading.Thread(target=self._loop, name="run_sql-watchdog", daemon=True)
        self._thread.start()

    def arm(self, deadline: _Deadline) -> None:
        with self._wake:
            self._armed.add(deadline)
            if deadline.at < self._wake_at:
                self._wake.notify()

    def disarm(self, deadline: _Deadline) -> None:
        deadline.finish()
        with self._wake:
            self._armed.discard(deadline)

    def _loop(self) -> None:
        with self._wake:
            while True:
                now = time.monotonic()
                for deadline in [armed for armed in self._armed if armed.at <= now]:
                    self._armed.discard(deadline)
                    deadline.fire()
                self._wake_at = min((armed.at for armed in self._armed), default=now + self._idle_s)
                self._wake.wait(max(self._wake_at - now, 0.0))


class QueryFailedError(Exception):
    """A query's failure as the worker reports it: a kind and a reason for the agent."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def one_select(cursor: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    """DuckDB's own reading of the text must be exactly one SELECT; that one statement
    object is what runs, so nothing after it can ride along."""
    try:
        statements = cursor.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryFailedError("execution", agent_message(error)) from error
    if len(statements) != 1:
        raise QueryFailedError(
            "refused",
            f"only one statement is allowed: DuckDB reads the query as {len(statements)}",
        )
    statement = statements[0]
    if statement.type != duckdb.StatementType.SELECT:
        raise QueryFailedError(
            "refused",
            "only one SELECT over the world tables is allowed: DuckDB reads the query as "
            f"{statement.type.name}",
        )
    return statement


def address_space_bytes() -> int:
    """This process's mapped address space now (what RLIMIT_AS counts)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[0])
    return pages * resource.getpagesize()


class _Worker:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.row_limit = int(settings["row_limit"])
        self.timeout_s = float(settings["timeout_s"])
        self.max_result_bytes = int(settings["max_result_bytes"])
        self.recycle_at = int(settings["address_space_bytes"] * RECYCLE_SHARE)
        self.con = duckdb.connect(settings["path"], read_only=True, config=settings["config"])
        self.watchdog = _Watchdog(idle_s=self.timeout_s)

    def describe(self) -> dict[str, Any]:
        """What the parent needs to guard queries; reading every table once also warms
        the catalog and the thread pool, so a fresh worker's first query is not slow."""
        try:
            source = self.con.execute(_WORLD_SOURCE).fetchall()
        except duckdb.CatalogException:
            raise QueryFailedError(
                "not_agent_db",
                "not an agent world database (no agent_build.world_source); build it with "
                "build_agent_world_db",
            ) from None
        if len(source) != 1:
            raise QueryFailedError(
                "not_agent_db", f"agent_build.world_source has {len(source)} rows, expected 1"
            )
        plugin, generator_version, seed, scale, fingerprint = source[0]
        tables = [name for (name,) in self.con.execute(_WORLD_TABLES).fetchall()]
        for name in tables:
            quoted = '"' + name.replace('"', '""') + '"'
            self.con.execute(f"SELECT count(*) FROM {quoted}").fetchall()
        return {
            "world": {
                "plugin": plugin,
                "generator_version": generator_version,
                "seed": seed,
                "scale": scale,
                "fingerprint": fingerprint,
            },
            "tables": tables,
            "denied": [name for (name,) in self.con.execute(CATALOG_DENIED_FUNCTIONS).fetchall()],
        }

    def run(self, sql: str, guarded: bool) -> dict[str, Any]:
        cursor = self.con.cursor()
        try:
            statement = one_select(cursor, sql) if guarded else sql
            deadline = _Deadline(cursor, time.monotonic() + self.timeout_s)
            self.watchdog.arm(deadline)
            try:
                cursor.execute(statement)
                fetched = cursor.fetchmany(self.row_limit + 1)
                description = cursor.description or []
            except duckdb.InterruptException as error:
                if deadline.fired:
                    raise QueryFailedError("timeout", "") from error
                raise QueryFailedError("execution", agent_message(error)) from error
            except duckdb.OutOfMemoryException as error:
                raise QueryFailedError("memory", agent_message(error)) from error
            except duckdb.Error as error:
                raise QueryFailedError("execution", agent_message(error)) from error
            finally:
                self.watchdog.disarm(deadline)
        finally:
            cursor.close()
        return {
            "columns": [column[0] for column in description],
            "column_types": [type_name(column[1]) for column in description],
            "rows": json_rows(fetched[: self.row_limit], [column[1].id for column in description]),
            "truncated": len(fetched) > self.row_limit,
        }

    def answer(self, request: dict[str, Any]) -> tuple[bytes, bool]:
        """The encoded reply to one query, and whether the worker must exit after it."""
        try:
            result = self.run(str(request["sql"]), bool(request["guarded"]))
            body = json.dumps({"result": result}, ensure_ascii=False, separators=(",", ":"))
            encoded = body.encode()
            del body, result
            if len(encoded) > self.max_result_bytes:
                raise QueryFailedError("too_large", str(len(encoded)))
        except QueryFailedError as failure:
            encoded = json.dumps({"error": failure.kind, "reason": failure.reason}).encode()
            if failure.kind == "memory":
                return _last(encoded), True
        except MemoryError:
            return _last(json.dumps({"error": "memory", "reason": ""}).encode()), True
        if address_space_bytes() > self.recycle_at:
            return _last(encoded), True
        return encoded, False


def _last(encoded: bytes) -> bytes:
    """A reply marked as the worker's last (it exits to be replaced with a clean heap)."""
    return encoded[:-1] + b',"exit":true}'


def serve(fd: int, settings: dict[str, Any]) -> None:
    """The worker's life: cap the address space, open the database, answer until EOF."""
    cap = int(settings["address_space_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    conn = Connection(fd)
    try:
        worker = _Worker(settings)
        conn.send_bytes(json.dumps({"ready": worker.describe()}).encode())
    except (QueryFailedError, duckdb.Error) as error:
        kind = error.kind if isinstance(error, QueryFailedError) else "open"
        reason = error.reason if isinstance(error, QueryFailedError) else agent_message(error)
        conn.send_bytes(json.dumps({"error": kind, "reason": reason}).encode())
        return
    while True:
        try:
            request = json.loads(conn.recv_bytes())
        except EOFError:
            return
        encoded, last = worker.answer(request)
        conn.send_bytes(encoded)
        if last:
            return


if __name__ == "__main__":
    serve(int(sys.argv[1]), json.loads(sys.argv[2]))

"""The product lane's `run_sql` tool: one guarded SELECT over a world-only DuckDB file.

Three walls, each enough to keep the answer key out on its own:
1. the guard (`sql_guard.SqlGuard`): sqlglot parse, one SELECT over world tables only,
   no row generators and no value builders past a size (`sql_size`);
2. DuckDB's own parser must agree it is exactly one SELECT, and only that one statement
   object is executed;
3. the database (`agent_db.build_agent_world_db`): a separate file holding only the
   `world` tables, opened read-only with external access off (no file scans, ATTACH,
   extension loading) and configuration locked, so even a query the guard wrongly
   passed cannot reach `truth`, `meta` or `runs`: they are not there.

And one bound on resources that does not trust DuckDB (issue 25): every query runs in a
worker process (`sql_worker`) whose address space the kernel caps at MEMORY_LIMIT_BYTES
and which is killed when it has not answered KILL_GRACE_S after the deadline. DuckDB's
`memory_limit` and interrupt alone did not hold: a 300-million-element list grew the
lane's process to 16.8 GB, and a 900 MB `repeat` ran 5-14 s past a 5 s limit. A worker is
reused across calls (a call costs a round trip on a socket pair, not a process start) and
replaced after it is killed, runs out of memory or keeps too much memory mapped.

Public surface (what the product lane builds on):

    build_agent_world_db(warehouse: Path, out: Path) -> Path        # agent_db
        copy the warehouse's world tables into <out>/world-<fp16>/world.duckdb, once per
        world fingerprint; returns the file. The usual `out` is paths.agent_world_dir().
    agent_world_db_path(out: Path, fingerprint: str) -> Path        # agent_db
    open_agent_world_db(path: Path) -> DuckDBPyConnection          # agent_db
        the only way to open the file in a process that also runs the tool: DuckDB
        refuses a second connection with another configuration (AGENT_DB_CONFIG).
    AgentWorldInfo                                                   # agent_db
        plugin, generator_version, seed, scale, fingerprint of the copied world.

    AgentSql(path: Path, *, row_limit: int = ROW_LIMIT, timeout_s: float = DEFAULT_TIMEOUT_S,
             memory_limit_bytes: int = MEMORY_LIMIT_BYTES)
        .run(query: str) -> SqlResult       guarded; raises SqlToolError subclasses
        .world: AgentWorldInfo              which world the file holds
        .world_tables: tuple[str, ...]      table names a query may read
        .guard: SqlGuard                    .check(query) -> CheckedQuery(sql, tables),
                                            refusing without running (e.g. for traces)
        .close() / context manager
    SqlResult (frozen): columns, column_types, rows (JSON-safe: dates and times as ISO
        text, Decimals and intervals as text, bytes as hex), row_count, truncated,
        row_limit, elapsed_ms, tables (world tables read).

    Errors (eval_pipeline.lanes.errors), each with `.reason` to hand back to the agent:
        SqlRefusedError   the guard (or DuckDB's parser) refused; nothing ran
        SqlExecutionError DuckDB rejected the query or failed running it (bad column...)
        SqlTimeoutError   interrupted (or its worker killed) at the time limit; the tool
                          stays usable
        SqlLimitError     stopped at the worker's memory cap, or a result over
                          MAX_RESULT_BYTES; the tool stays usable
    All derive from SqlToolError(LaneError); a lane turns them into tool error results.

Elapsed time counts the whole call (guard, worker round trip, DuckDB, conversion). The time
limit covers execution and fetching (a replacement worker's start is not charged to a
query); a timed-out query leaves the tool usable. Values: ENUM columns of
the world read back as text and are typed VARCHAR; DuckDB error text is passed on with
ENUM types shortened to VARCHAR and at most MAX_MESSAGE_CHARS characters; cells are not
truncated, the whole result is bounded (MAX_RESULT_BYTES).

Thread safety: `run` may be called from several threads at once; up to MAX_WORKERS calls
run at once, each in its own worker, and the others wait for one. Close the tool only
after the calls have returned; closing ends the workers.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from pydantic import JsonValue

from eval_pipeline.lanes import sql_worker
from eval_pipeline.lanes.agent_db import AGENT_DB_CONFIG, AgentWorldInfo
from eval_pipeline.lanes.errors import (
    AgentWorldDbError,
    SqlExecutionError,
    SqlLimitError,
    SqlRefusedError,
    SqlTimeoutError,
    SqlToolError,
)
from eval_pipeline.lanes.sql_guard import CheckedQuery, SqlGuard
from eval_pipeline.records import FrozenRecord

ROW_LIMIT = 200  # the tool schema's promise (world/label/tools.py)
DEFAULT_TIMEOUT_S = 5.0
MAX_MESSAGE_CHARS = sql_worker.MAX_MESSAGE_CHARS
MEMORY_LIMIT_BYTES = 1536 * 2**20
"""The hard cap on one worker's address space (RLIMIT_AS): DuckDB's own 1 GB buffer pool,
the interpreter and DuckDB's code (about 250 MB mapped) and room for allocations DuckDB
does not count."""
MAX_RESULT_BYTES = 4_000_000
"""A result whose JSON is larger is refused in the worker (200 rows of the default world's
longest clause bodies are about 150 kB), so no query fills the lane's process with rows."""
KILL_GRACE_S = 0.5
"""How long past the deadline a worker may take to answer before it is killed: DuckDB
notices an interrupt between vectors, which takes milliseconds, unless one function call
is building a huge value, which no interrupt stops."""
MAX_WORKERS = 2
"""Workers running at once (calls from more threads wait for one): a lane calls the tool
from one thread; each worker may take MEMORY_LIMIT_BYTES."""
START_TIMEOUT_S = 60.0
"""How long a worker may take to start and open the database (0.35 s unloaded)."""

_WORKER_SCRIPT = Path(sql_worker.__file__)


class SqlResult(FrozenRecord):
    """What `run_sql` returns: at most `row_limit` rows, JSON-safe, and whether more existed."""

    columns: tuple[str, ...]
    column_types: tuple[str, ...]
    rows: tuple[tuple[JsonValue, ...], ...]
    row_count: int
    truncated: bool
    row_limit: int
    elapsed_ms: float
    tables: tuple[str, ...]


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def _worker_env() -> dict[str, str]:
    """What a worker sees of the environment: no keys or settings of the parent, and
    fewer malloc arenas (each maps 64 MB of address space the cap would count)."""
    return {"PATH": os.defpath, "LC_ALL": "C.UTF-8", "MALLOC_ARENA_MAX": "2"}


class _WorkerEndedError(Exception):
    """The worker closed its end without a reply (it crashed or was killed)."""


class _Worker:
    """One worker process (see `sql_worker`) and its end of the socket pair."""

    def __init__(self, settings: dict[str, Any]) -> None:
        ours, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    str(_WORKER_SCRIPT),
                    str(theirs.fileno()),
                    json.dumps(settings),
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=_worker_env(),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.closed = False
        self.ready: dict[str, Any] | None = None

    def receive(self, timeout: float | None, max_bytes: int) -> dict[str, Any] | None:
        """The worker's next message, or None when none came within `timeout` seconds."""
        try:
            if not self.conn.poll(timeout):
                return None
            return json.loads(self.conn.recv_bytes(max_bytes))  # type: ignore[no-any-return]
        except (EOFError, OSError) as error:
            raise _WorkerEndedError(str(error)) from error

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.conn.send_bytes(json.dumps(message).encode())
        except OSError as error:
            raise _WorkerEndedError(str(error)) from error

    def ended_how(self) -> str:
        """How the process ended, once it has: an exit code or a signal's name."""
        code = self.process.wait()
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    def kill(self) -> None:
        """SIGKILL, and reap it on a thread: tearing down a gigabyte of pages takes a
        moment the caller should not wait for."""
        if not self.closed:
            self.closed = True
            self.conn.close()
            self.process.kill()
            threading.Thread(target=self.process.wait, name="run_sql-reaper", daemon=True).start()

    def stop(self) -> None:
        """Let the worker end on EOF; kill it if it does not within a second."""
        if not self.closed:
            self.closed = True
            self.conn.close()
            try:
                self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class AgentSql:
    """The `run_sql` tool over one agent world database (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        row_limit: int = ROW_LIMIT,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_limit_bytes: int = MEMORY_LIMIT_BYTES,
    ) -> None:
        if row_limit < 1:
            raise ValueError(f"row_limit must be at least 1, got {row_limit}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if not path.is_file():
            raise AgentWorldDbError(
                f"agent world database {path} does not exist; build it with build_agent_world_db"
            )
        self.path = path
        self.row_limit = row_limit
        self.timeout_s = timeout_s
        self.memory_limit_bytes = memory_limit_bytes
        self._settings: dict[str, Any] = {
            "path": str(path),
            "config": dict(AGENT_DB_CONFIG),
            "row_limit": row_limit,
            "timeout_s": timeout_s,
            "max_result_bytes": MAX_RESULT_BYTES,
            "address_space_bytes": memory_limit_bytes,
        }
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_WORKERS)
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._closed = False
        worker, ready = self._start()
        self.world = AgentWorldInfo.model_validate(ready["world"])
        tables = ready["tables"]
        if not tables:
            worker.stop()
            raise AgentWorldDbError(f"agent world database {path} holds no world tables")
        self._idle.append(worker)
        self.guard = SqlGuard(tables, denied_functions=ready["denied"])

    @property
    def world_tables(self) -> tuple[str, ...]:
        return self.guard.world_tables

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """The worker processes alive now (for tests and diagnostics)."""
        with self._lock:
            return tuple(w.process.pid for w in [*self._idle, *self._busy])

    def run(self, query: str) -> SqlResult:
        """Guard, then run `query` in a worker; at most `row_limit` rows, stopped at
        `timeout_s`, within the worker's memory cap."""
        started = time.perf_counter()
        checked = self.guard.check(query)
        return self._execute(checked, started, guarded=True)

    def _execute_unguarded(self, query: str) -> SqlResult:
        """The raw path, with neither the guard nor DuckDB's statement check (the worker's
        limits still hold): only for tests proving the database itself keeps the answer
        key out and the worker bounds what the guard would refuse. Never give an agent
        this path."""
        return self._execute(CheckedQuery(sql=query, tables=()), time.perf_counter(), guarded=False)

    def _ready(self, worker: _Worker) -> dict[str, Any]:
        """Wait for a started worker's report on the database (once), or fail clearly."""
        if worker.ready is not None:
            return worker.ready
        try:
            message = worker.receive(START_TIMEOUT_S, MAX_RESULT_BYTES)
        except _WorkerEndedError:
            message = {"error": "open", "reason": f"the worker ended ({worker.ended_how()})"}
        except BaseException:
            worker.kill()
            raise
        if message is None:
            worker.kill()
            raise AgentWorldDbError(
                f"the run_sql worker for {self.path} did not start within {START_TIMEOUT_S:g} s"
            )
        if "ready" not in message:
            worker.kill()
            reason = message.get("reason", "")
            if message.get("error") == "not_agent_db":
                raise AgentWorldDbError(reason)
            raise AgentWorldDbError(f"cannot open agent world database {self.path}: {reason}")
        worker.ready = message["ready"]
        return worker.ready

    def _start(self) -> tuple[_Worker, dict[str, Any]]:
        """A new worker, started and ready, with what it reported about the database."""
        worker = _Worker(self._settings)
        return worker, self._ready(worker)

    def _take(self) -> _Worker:
        """An idle worker (waiting for it to be ready if it was just started) or a new one."""
        with self._lock:
            if self._closed:
                raise AgentWorldDbError(f"run_sql on {self.path} was called after close()")
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker, _ = self._start()
        else:
            try:
                self._ready(worker)
            except BaseException:
                self._give_back(worker, keep=False)
                raise
        with self._lock:
            self._busy.add(worker)
        return worker

    def _give_back(self, worker: _Worker, *, keep: bool) -> None:
        """Return a worker to the pool, or end it; a lost worker's replacement starts now
        (in the background: it is waited for by the next call, not this one)."""
        with self._lock:
            self._busy.discard(worker)
            closed = self._closed
            if keep and not closed:
                self._idle.append(worker)
                return
            replace = not closed and not self._idle and not self._busy
        if keep:
            worker.stop()
            return
        worker.kill()
        if replace:
            fresh = _Worker(self._settings)
            with self._lock:
                if not self._closed:
                    self._idle.append(fresh)
                    return
            fresh.stop()

    def _execute(self, checked: CheckedQuery, started: float, *, guarded: bool) -> SqlResult:
        with self._slots:
            worker = self._take()
            keep = False
            try:
                reply = self._ask(worker, {"sql": checked.sql, "guarded": guarded})
                keep = not reply.get("exit", False)
            finally:
                self._give_back(worker, keep=keep)
        if "error" in reply:
            raise self._failure(str(reply["error"]), str(reply.get("reason", "")))
        result = reply["result"]
        # Built from values the worker made JSON-safe; validating 200 rows of JsonValue
        # again would cost about as much as the query (a test re-validates a dump).
        return SqlResult.model_construct(
            columns=tuple(result["columns"]),
            column_types=tuple(result["column_types"]),
            rows=tuple(tuple(row) for row in result["rows"]),
            row_count=len(result["rows"]),
            truncated=result["truncated"],
            row_limit=self.row_limit,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            tables=checked.tables,
        )

    def _ask(self, worker: _Worker, request: dict[str, Any]) -> dict[str, Any]:
        """One query's reply; a worker that ends or misses the deadline is killed here."""
        try:
            worker.send(request)
            reply = worker.receive(self.timeout_s + KILL_GRACE_S, MAX_RESULT_BYTES + 4096)
        except _WorkerEndedError:
            worker.kill()
            raise SqlLimitError(
                f"query stopped: the worker running it ended ({worker.ended_how()}); it most "
                f"likely needed more than the tool's {_mb(self.memory_limit_bytes)} of memory. "
                "Narrow it (filter, aggregate or LIMIT) and try again"
            ) from None
        if reply is None:
            worker.kill()
            raise self._failure("timeout", "")
        return reply

    def _failure(self, kind: str, reason: str) -> SqlToolError:
        if kind == "timeout":
            return SqlTimeoutError(
                f"the query ran longer than {self.timeout_s:g} s and was stopped; "
                "narrow it (filter, aggregate or LIMIT) and try again"
            )
        if kind == "memory":
            return SqlLimitError(
                f"query stopped: it needed more than the tool's {_mb(self.memory_limit_bytes)} "
                "of memory; narrow it (filter, aggregate or LIMIT, no huge generated values) "
                "and try again"
            )
        if kind == "too_large":
            return SqlLimitError(
                f"the result is {int(reason) / 1e6:,.1f} MB of JSON; at most "
                f"{MAX_RESULT_BYTES / 1e6:g} MB can be returned: select fewer or shorter "
                "columns (substr() of long text) or fewer rows"
            )
        if kind == "refused":
            return SqlRefusedError(reason)
        return SqlExecutionError(reason)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

"""Whatever an agent sends, `run_sql` stays within its memory cap and its deadline and
answers with a readable error (issue 25, finding 2).

Two walls, tested apart: the guard refuses the finding's generators and builders before
anything runs (`run`), and the worker process bounds what the guard lets through or is
bypassed for (`_execute_unguarded`, which skips only the guard). The finding's attacks run
in a child Python under RLIMIT_AS 3 GB, a safety net so that code without the worker
fails there instead of taking the machine (before the fix `generate_series(1, 300000000)`
grew the lane's process to 16.8 GB).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipeline.lanes.errors import (
    SqlLimitError,
    SqlRefusedError,
    SqlTimeoutError,
    SqlToolError,
)
from eval_pipeline.lanes.sql_tool import KILL_GRACE_S, MEMORY_LIMIT_BYTES, ROW_LIMIT, AgentSql

SAFETY_NET_BYTES = 3 * 2**30
LANE_PROCESS_MAX_RSS = 400 * 2**20
"""The lane's own process never holds a query's data: it stays near its start (~120 MB)."""
SLACK_S = 2.0
"""Wall time allowed past deadline + grace on this shared, loaded 2-core machine."""

GENERATE_SERIES = "SELECT unnest(generate_series(1, 300000000))"
REPEAT = "SELECT length(repeat('x', 900000000))"

_CHILD = """
import json, resource, sys, threading, time
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, ({net}, {net}))
from eval_pipeline.lanes.sql_tool import AgentSql
tool = AgentSql(Path(sys.argv[1]), timeout_s={timeout})
started = time.monotonic()
try:
    result = tool.{method}(sys.argv[2])
    outcome = {{"error": None, "rows": result.row_count}}
except Exception as error:
    outcome = {{"error": type(error).__name__, "reason": getattr(error, "reason", str(error))}}
outcome["wall_s"] = time.monotonic() - started
tool.close()
for thread in threading.enumerate():
    if thread.name == "run_sql-reaper":
        thread.join()
status = open("/proc/self/status").read()
outcome["lane_rss"] = int(status.split("VmHWM:")[1].split()[0]) * 1024
outcome["worker_rss"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps(outcome))
"""


def run_in_child(agent_db: Path, query: str, *, method: str, timeout_s: float) -> dict:
    """One call in a fresh Python under the 3 GB safety net; what it returned and used.

    The lane's peak is its own VmHWM: `ru_maxrss` would carry over the forking pytest
    worker's peak (Linux keeps it across exec)."""
    script = _CHILD.format(net=SAFETY_NET_BYTES, timeout=timeout_s, method=method)
    done = subprocess.run(
        [sys.executable, "-c", script, str(agent_db), query],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (GENERATE_SERIES, "generate_series() and range() are not allowed"),
        (REPEAT, "repeat() builds a value of the size it is given"),
    ],
    ids=["generate_series", "repeat"],
)
def test_the_findings_queries_are_refused_through_run_sql(
    agent_db: Path, query: str, reason: str
) -> None:
    outcome = run_in_child(agent_db, query, method="run", timeout_s=5.0)
    assert outcome["error"] == "SqlRefusedError", outcome
    assert outcome["reason"].startswith(reason)
    assert outcome["wall_s"] < 1.0
    assert outcome["lane_rss"] < LANE_PROCESS_MAX_RSS


@pytest.mark.parametrize(
    ("query", "timeout_s"),
    [(GENERATE_SERIES, 5.0), (REPEAT, 2.0)],
    ids=["generate_series", "repeat"],
)
def test_past_the_guard_the_worker_bounds_the_findings_queries(
    agent_db: Path, query: str, timeout_s: float
) -> None:
    """The guard bypassed: the query runs, in the worker, and ends at its memory cap or
    its deadline with the tool's own reason; neither process grows past its bound."""
    outcome = run_in_child(agent_db, query, method="_execute_unguarded", timeout_s=timeout_s)
    assert outcome["error"] in {"SqlLimitError", "SqlTimeoutError"}, outcome
    assert re.match(
        r"query stopped: it needed more than the tool's 1,536 MB of memory|"
        rf"the query ran longer than {timeout_s:g} s and was stopped",
        outcome["reason"],
    ), outcome
    assert outcome["wall_s"] <= timeout_s + KILL_GRACE_S + SLACK_S
    assert outcome["lane_rss"] < LANE_PROCESS_MAX_RSS
    assert outcome["worker_rss"] <= MEMORY_LIMIT_BYTES


def test_a_value_no_interrupt_stops_is_killed_at_the_deadline(agent_db: Path) -> None:
    """600 MB fits under the cap, and DuckDB does not look at its interrupt while one
    `repeat` call builds it (about 2 s here): the parent kills the worker and starts
    another. At 300 MB a fast machine built the value and honoured the interrupt within
    the kill grace, and the worker lived."""
    with AgentSql(agent_db, timeout_s=0.3) as tool:
        before = tool.worker_pids
        started = time.monotonic()
        with pytest.raises(SqlTimeoutError, match=r"longer than 0.3 s and was stopped"):
            tool._execute_unguarded("SELECT length(repeat('x', 600000000))")
        assert time.monotonic() - started <= 0.3 + KILL_GRACE_S + SLACK_S
        assert tool.run("SELECT count(*) FROM artists").rows == ((150,),)
        assert tool.worker_pids != before


def test_the_worker_runs_under_the_kernels_cap_without_the_parents_environment(
    agent_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALP_TEST_SECRET_KEY", "sk-planted")
    with AgentSql(agent_db, memory_limit_bytes=1024 * 2**20) as tool:
        (pid,) = tool.worker_pids
        limits = Path(f"/proc/{pid}/limits").read_text()
        environment = Path(f"/proc/{pid}/environ").read_bytes()
        assert re.search(rf"Max address space\s+{1024 * 2**20}\s+{1024 * 2**20}\s+bytes", limits)
        assert b"sk-planted" not in environment and b"EVALP" not in environment
        with pytest.raises(SqlLimitError, match="more than the tool's 1,024 MB of memory"):
            tool._execute_unguarded("SELECT length(repeat('x', 900000000))")
        assert tool.run("SELECT count(*) FROM tracks").row_count == 1


def test_a_result_too_large_to_hand_back_is_refused_in_the_worker(agent_sql: AgentSql) -> None:
    with pytest.raises(SqlLimitError, match=r"at most 4 MB can be returned"):
        agent_sql.run("SELECT repeat(name, 2000) AS padded, * FROM artists, tracks")
    assert agent_sql.run("SELECT count(*) FROM artists").rows == ((150,),)


def test_a_worker_that_dies_is_a_readable_error_and_is_replaced(agent_db: Path) -> None:
    with AgentSql(agent_db, timeout_s=5.0) as tool:
        (pid,) = tool.worker_pids
        killer = subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -9 {pid}"])
        with pytest.raises(
            SqlLimitError, match=r"the worker running it ended \(killed by SIGKILL\)"
        ):
            tool.run(
                "WITH RECURSIVE t AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM t) "
                "SELECT count(*) FROM t"
            )
        killer.wait()
        assert tool.run("SELECT count(*) FROM artists").rows == ((150,),)


# -- property: hostile queries end within the bounds ------------------------------------

SIZES = st.sampled_from([10**6, 10**7, 10**8, 3 * 10**8, 9 * 10**8])
TEXT = st.sampled_from(["'x'", "name", "'abcdefghij'"])


@st.composite
def hostile_queries(draw: st.DrawFn) -> str:
    """Queries an agent might send that generate rows, build huge values, or multiply."""
    size = draw(SIZES)
    depth = draw(st.integers(min_value=2, max_value=40))
    text = draw(TEXT)
    kind = draw(st.sampled_from(sorted(_SHAPES)))
    return _SHAPES[kind].format(size=size, depth=depth, text=text)


_SHAPES = {
    "nested generators": "SELECT count(*) FROM (SELECT unnest(generate_series(1, {size})) AS a, "
    "unnest(range({depth})) AS b)",
    "generator list": "SELECT list_sum(list_transform(range({size}), x -> x + 1))",
    "huge repeat": "SELECT length(repeat({text}, {size})) FROM artists LIMIT 1",
    "huge pad": "SELECT length(lpad({text}, {size}, 'y')) FROM artists LIMIT 1",
    "cross join of generators": "SELECT count(*) FROM (SELECT unnest(range({size})) AS a) "
    "CROSS JOIN (SELECT unnest(range({depth})) AS b)",
    "cross join": "SELECT count(*), sum(a.units * b.units) FROM statement_lines a, "
    "statement_lines b WHERE a.line_id % {depth} = 0",
    "recursive doubling": "WITH RECURSIVE t(n, s) AS (SELECT 1, CAST({text} AS VARCHAR) FROM "
    "(SELECT * FROM artists LIMIT 1) UNION ALL SELECT n + 1, s || s FROM t WHERE n < {depth}) "
    "SELECT max(length(s)) FROM t",
    "endless recursion": "WITH RECURSIVE t AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM t) "
    "SELECT count(*) FROM t",
    "aggregate concatenation": "SELECT length(string_agg(a.name || b.title, ',')) FROM artists a, "
    "tracks b, (SELECT 1 FROM statement_lines LIMIT {depth}) c",
    "huge list": "SELECT len(list_resize([1], {size}))",
}

READABLE = re.compile(
    r"generate_series\(\) and range\(\) are not allowed|"
    r"\w+\(\) builds a value of the size it is given|"
    r"query stopped: it needed more than the tool's [\d,]+ MB of memory|"
    r"query stopped: the worker running it ended|"
    r"the query ran longer than [\d.]+ s and was stopped|"
    r"the result is [\d.,]+ MB of JSON"
)


@pytest.fixture(scope="module")
def quick_tool(agent_db: Path) -> Iterator[AgentSql]:
    with AgentSql(agent_db, timeout_s=1.0) as tool:
        yield tool


def _ends_within_bounds(tool: AgentSql, call: str, query: str) -> None:
    started = time.monotonic()
    try:
        result = getattr(tool, call)(query)
    except SqlToolError as error:
        assert READABLE.match(error.reason), error.reason
    else:
        assert result.row_count <= ROW_LIMIT
    assert time.monotonic() - started <= tool.timeout_s + KILL_GRACE_S + SLACK_S
    for pid in tool.worker_pids:
        status = Path(f"/proc/{pid}/status").read_text()
        peak = re.search(r"VmPeak:\s+(\d+) kB", status)
        assert peak is not None and int(peak.group(1)) * 1024 <= tool.memory_limit_bytes
    assert tool.run("SELECT count(*) FROM artists").rows == ((150,),)


@settings(
    derandomize=True,
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=hostile_queries())
def test_hostile_queries_are_refused_or_bounded_through_run_sql(
    quick_tool: AgentSql, query: str
) -> None:
    _ends_within_bounds(quick_tool, "run", query)


@settings(
    derandomize=True,
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=hostile_queries())
def test_hostile_queries_past_the_guard_stay_within_the_workers_bounds(
    quick_tool: AgentSql, query: str
) -> None:
    _ends_within_bounds(quick_tool, "_execute_unguarded", query)


def test_the_guard_refuses_every_generator_and_builder_shape(quick_tool: AgentSql) -> None:
    """The shapes with a generator or a huge literal size never reach a worker."""
    for kind in ("nested generators", "generator list", "huge repeat", "huge pad", "huge list"):
        query = _SHAPES[kind].format(size=10**8, depth=3, text="'x'")
        with pytest.raises(SqlRefusedError):
            quick_tool.guard.check(query)

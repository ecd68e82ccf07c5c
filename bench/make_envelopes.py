"""Generate N realistic stored call envelopes for the re-labelling benchmark.

Writes a DuckDB file (default `var/bench/envelopes-<n>-<seed>.duckdb`) holding the real
`runs.call_envelopes` table (created by `ensure_envelope_table`) and the matching
`runs.case_runs` rows (created by `ensure_lane_tables`), for many models x seeds over the
committed fixture set's cases, in both lanes:

- model lane: one call per case (its first tool call: the expected one, wrong arguments,
  arguments that are not JSON or not an object or break the tool's schema, a tool that was
  not offered; sometimes a text answer instead);
- product lane: 0-4 tool-call turns, then a final text reply: answer lines in many money
  formats (`$2,480.10`, `USD 2480.1`, `2480.10 USD`, a trailing zero, a wrong currency),
  percentages, counts, dates, ids, YES/NO, bold `**ANSWER:**`, corrections (the last line
  counts), abstentions alone or beside a placeholder (`ANSWER: N/A`, `$0`), a buried
  abstention followed by a real answer, JSON where a line answer is asked, stalls with no
  answer line;
- JSON-answer cases (structured output; the committed set has none, so the bench adds
  `JSON_CASES` of them, made from its money cases: `bench_cases`): the object on the
  ANSWER line, in a fenced block, as the whole reply, keys in another order, a wrong
  amount, a key missing or one too many, prose only;
- at any turn: cut-off replies (with partial text, nothing visible, or a partial tool
  call), empty bodies, drops (http 5xx, 429, timeouts, connection errors, interrupted)
  with retried attempts before some of them, harness errors and budget stops.

Reasoning text carries fresh numbers in most replies (as a sampled model's would), so
replies are rarely repeated verbatim. The stored labels are those an *older* reader gave
(as the lanes store them, ungraded, but reading plain `ANSWER:` lines only: no ABSTAIN
line, no bold, no JSON answer; a cut-off reply without text called empty), so a re-label
has real work to do. Deterministic in `--seed`; generation time is not part of the
benchmark.

    uv run python bench/make_envelopes.py [--n 1000000] [--seed 7] [--out PATH]
"""

from __future__ import annotations

import argparse
import calendar
import functools
import hashlib
import json
import random
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import polars as pl

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import fixture_set_dirs, load_fixtures
from eval_pipeline.lane_records import CASE_RUNS
from eval_pipeline.lanes.lane_tables import ensure_lane_tables
from eval_pipeline.paths import FIXTURES_DIR, var_dir
from eval_pipeline.providers.labels import tool_call_problem
from eval_pipeline.providers.types import Message, ToolCall, ToolSpec
from eval_pipeline.warehouse.envelopes import COLUMNS, TABLE, ensure_envelope_table
from eval_pipeline.world.label import LabelWorld

DEFAULT_N = 1_000_000
CHUNK = 50_000
JSON_CASES = 8
"""JSON-answer cases the bench adds to the committed fixture set's cases."""
PAYOUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "artist_id": {"type": "string"},
        "period": {"type": "string"},
        "net_payable": {"type": "string"},
    },
    "required": ["artist_id", "net_payable"],
    "additionalProperties": False,
}
MODELS: tuple[tuple[str, str], ...] = tuple(
    (f"bench-{family}-{size}", api)
    for family, api in (("atlas", "openai_compatible"), ("borealis", "anthropic"))
    for size in ("nano", "mini", "small", "medium", "large", "xl")
)
_MONTHS = tuple(calendar.month_name)[1:]


def default_fixture_dir() -> Path:
    """The committed fixture set."""
    dirs = fixture_set_dirs(FIXTURES_DIR)
    if not dirs:
        raise SystemExit(f"make_envelopes: no fixture set under {FIXTURES_DIR}")
    return dirs[0]


def bench_cases(cases: Sequence[Case]) -> tuple[Case, ...]:
    """The fixture set's cases and `JSON_CASES` JSON-answer cases made from its money cases
    that name an artist and a period (the payout as a JSON object)."""
    made = []
    for case in cases:
        first = case.expected_first_call
        if case.answer_kind != "money" or first is None or "period" not in first.arguments:
            continue
        expected = {
            "artist_id": str(first.arguments["artist_id"]),
            "period": str(first.arguments["period"]),
            "net_payable": case.expected,
        }
        question = case.prompt.splitlines()[0]
        made.append(
            Case.model_validate(
                {
                    **case.model_dump(),
                    "case_id": f"{case.case_id}-json",
                    "answer_kind": "json",
                    "expected": json.dumps(expected),
                    "answer_schema": PAYOUT_SCHEMA,
                    "prompt": f"{question}\nEnd with one line: ANSWER: <a JSON object: "
                    "artist_id, period, net_payable>",
                }
            )
        )
        if len(made) == JSON_CASES:
            break
    return (*cases, *made)


def bench_cases_for(fixture_root: Path) -> Callable[[str], Mapping[str, Case]]:
    """`cases_for` of the re-label: a fixture set's cases and the bench's JSON cases."""

    @functools.cache
    def cases_for(fixture_id: str) -> Mapping[str, Case]:
        fixture_set = load_fixtures(fixture_root / fixture_id)
        return MappingProxyType({c.case_id: c for c in bench_cases(fixture_set.cases)})

    return cases_for


def _hex(*parts: object) -> str:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=10).hexdigest()


# -- reply shapes ------------------------------------------------------------------------


def _money_formats(value: Decimal) -> list[str]:
    plain = f"{value:.2f}"
    grouped = f"{value:,.2f}"
    return [
        f"${plain}",
        plain,
        f"${grouped}",
        f"USD {plain}",
        f"{plain} USD",
        f"${value:.3f}",
        f"US${plain}",
        f"{value.normalize():f}",
    ]


def _right_values(case: Case, rng: random.Random) -> list[str]:
    """Ways of writing the expected answer that the current readers accept."""
    e = case.expected
    kind = case.answer_kind
    if kind == "money":
        return _money_formats(Decimal(e))
    if kind == "percent":
        return [f"{e}%", e, f"{Decimal(e):.3f}", f"{e} %"]
    if kind == "integer":
        n = int(Decimal(e))
        return [str(n), f"{n:,}", f"{n}.00", f"{n}."]
    if kind == "date":
        d = date.fromisoformat(e)
        return [e, f"{d.day} {_MONTHS[d.month - 1]} {d.year}", d.strftime("%B %d, %Y")]
    if kind == "id_list":
        ids = [i for i in e.split(",") if i and i != "NONE"]
        if not ids:
            return ["NONE", "none", "[]"]
        return [", ".join(ids), ",".join(ids), f"[{', '.join(ids)}]", " ".join(reversed(ids))]
    if kind == "yes_no":
        return [e, e.lower() + ".", e.capitalize()]
    if kind == "abstain":
        return []
    return [e, f'"{e}"', e.lower(), f"{e}."]


def _wrong_values(case: Case, rng: random.Random) -> list[str]:
    e = case.expected
    kind = case.answer_kind
    if kind == "money":
        v = Decimal(e)
        return [
            f"${v + Decimal('0.01'):.2f}",
            f"${v * 10:.2f}",
            f"EUR {v:.2f}",
            f"${(v * Decimal('1.1')).quantize(Decimal('0.01'))}",
        ]
    if kind in ("percent", "integer"):
        v = Decimal(e)
        return [f"{v + 1}", f"{v * 2}", "about ten"]
    if kind == "date":
        return ["2024-01-31", "sometime in 2025"]
    if kind == "id_list":
        return [f"{rng.randint(10000, 20000)}", "12, x"]
    if kind == "yes_no":
        return ["NO" if e == "YES" else "YES", "maybe"]
    if kind == "abstain":
        return ["$0.00", "1240.50", "30"]
    return ["UNKNOWN-1", "n/a please"]


def _reasoning(rng: random.Random) -> str:
    """A line or two of working with fresh numbers, as a sampled model writes it."""
    a, b, c = rng.randint(10, 99999), rng.randint(1, 999999), rng.randint(1, 9999)
    templates = (
        f"Line {a}: {c} USD minor units x 1000000 / 10^2 = {c * 10000} uUSD gross (R2); "
        f"x {b} ppm / 10^6 = {c * b // 100} uUSD (R6).",
        f"The statement for the period has {a} clean lines; {c} were flagged (F1, F4).",
        f"Recoupment account ACC-{c:04d} opened at {a}.{c % 100:02d} and recouped {b} cents.",
        f"I ran the query and got {c} rows; the first row says {a}.",
        f"Checked contract CON-{c:04d} (amended {2020 + c % 6}-0{1 + c % 9}-1{c % 10}); "
        f"the rate in force is {b / 10000:.2f}%.",
        f"Summing {c} statement lines for the period gives {a}.{b % 100:02d}.",
    )
    text = rng.choice(templates)
    if rng.random() < 0.35:
        text += "\n" + rng.choice(templates)
    return text


def json_text(case: Case, rng: random.Random) -> str:
    """A final reply of a JSON-answer case: the object where the reply put it (answer
    line, fenced block, the whole reply), right, wrong, breaking the schema, or absent."""
    expected = json.loads(case.expected)
    why = _reasoning(rng)
    roll = rng.random()
    if roll < 0.6:
        value = dict(reversed(expected.items())) if rng.random() < 0.3 else expected
    elif roll < 0.75:
        value = {**expected, "net_payable": f"{Decimal(expected['net_payable']) + 1:.2f}"}
    elif roll < 0.82:
        value = {"artist_id": expected["artist_id"]}  # net_payable missing
    elif roll < 0.87:
        value = {**expected, "currency": "USD"}  # not in the schema
    else:
        return f"{why}\nThe payout is {expected['net_payable']} for {expected['artist_id']}."
    shape = rng.random()
    if shape < 0.5:
        return f"{why}\nANSWER: {json.dumps(value)}"
    if shape < 0.8:
        return f"{why}\n```json\n{json.dumps(value, indent=2)}\n```"
    if shape < 0.9:
        return json.dumps(value, indent=rng.choice([None, 2]))
    return f"{why}\n```json\n{json.dumps(value)}\n```\nANSWER: see the block above"


def final_text(case: Case, rng: random.Random) -> str:
    """A final reply in one of many shapes (right, wrong, abstained, unreadable)."""
    if case.answer_kind == "json":
        return json_text(case, rng)
    right = _right_values(case, rng)
    wrong = _wrong_values(case, rng)
    why = _reasoning(rng)
    reason = rng.choice(
        ["no such artist in the records", "the contract has no audit clause", "ambiguous"]
    )
    roll = rng.random()
    if case.answer_kind == "abstain":
        right = []
        if roll < 0.55:
            return rng.choice(
                [
                    f"I cannot answer this from the records.\nABSTAIN: {reason}",
                    f"{why}\nABSTAIN: {reason}\nANSWER: N/A",
                    f"ABSTAIN: {reason}\nANSWER: $0",
                    f"ANSWER: 0\nABSTAIN: {reason}",
                    f"**ABSTAIN:** {reason}",
                ]
            )
    value = rng.choice(right) if right and roll < 0.72 else rng.choice(wrong)
    shape = rng.random()
    if shape < 0.45:
        return f"{why}\nANSWER: {value}"
    if shape < 0.55:
        return f"{why}\n\n**ANSWER:** {value}"
    if shape < 0.62:
        second = "On a second look one line is a copy."
        return f"{why}\nANSWER: {rng.choice(wrong)}\n{second}\nANSWER: {value}"
    if shape < 0.67:
        return f"ABSTAIN: I was unsure at first.\n{why}\nANSWER: {value}"
    if shape < 0.72:
        return f"{why}\nThe answer is therefore {value}.\nANSWER: {value}"
    if shape < 0.76:
        return json.dumps({"answer": value, "explanation": why})
    if shape < 0.79:
        return f"{why}\nANSWER: {json.dumps({'amount': value})}"
    if shape < 0.85:
        return f"{why}\nLet me check the statements once more before answering."
    if shape < 0.88:
        return f"{why}\n- answer: {value}"
    if shape < 0.93:
        return f"ANSWER: {value}"
    return f"{why}\n> ANSWER:   {value}  "


def _first_call(case: Case, rng: random.Random, variant: int) -> tuple[str, str]:
    """A tool call (name, raw arguments) of the kind a model sends for this case."""
    expected = case.expected_first_call
    roll = rng.random()
    if expected is None or roll < 0.12:
        period = f"2025-{1 + variant % 12:02d}"
        return "run_sql", json.dumps(
            {"query": f"SELECT * FROM statements WHERE period = '{period}' LIMIT {10 + variant}"}
        )
    arguments: dict[str, Any] = dict(expected.arguments)
    if expected.name == "run_sql":
        arguments["query"] = (
            f"SELECT count(*) FROM statement_lines WHERE statement_id = 'ST-{variant:05d}'"
        )
    if roll < 0.80:
        return expected.name, json.dumps(arguments)
    if roll < 0.86 and arguments:
        key = sorted(arguments)[0]
        wrong = dict(arguments)
        wrong[key] = f"{wrong[key]}-x" if isinstance(wrong[key], str) else int(wrong[key]) + 1
        return expected.name, json.dumps(wrong)
    if roll < 0.90:
        return expected.name, json.dumps(arguments)[:-3]  # not JSON
    if roll < 0.92:
        return expected.name, "[1, 2]"  # JSON, not an object
    if roll < 0.97:
        broken = dict(arguments)
        broken["unexpected"] = variant  # additionalProperties: false
        return expected.name, json.dumps(broken)
    return "delete_statement", json.dumps({"statement_id": f"ST-{variant}"})


def _tool_result(name: str, rng: random.Random) -> str:
    if name == "calculate_royalties":
        lines = [
            {"channel": ch, "gross": f"{rng.randint(0, 99999)}.{rng.randint(0, 99):02d}"}
            for ch in ("streaming", "download", "physical")
        ]
        return json.dumps(
            {"net_payable": f"{rng.randint(0, 9999)}.{rng.randint(0, 99):02d}", "lines": lines}
        )
    rows = [[rng.randint(1, 99999), f"ISRC{rng.randint(0, 10**8):08d}"] for _ in range(6)]
    return json.dumps({"columns": ["line_id", "isrc"], "rows": rows})


# -- wire bodies and stored JSON ---------------------------------------------------------


@dataclass
class Reply:
    """One attempt's outcome before it becomes a row."""

    status: str = "ok"
    http_status: int | None = 200
    failure_cause: str | None = None
    text: str | None = None
    calls: tuple[tuple[str, str], ...] = ()
    stop_kind: str | None = "end"
    body_problem: str | None = None
    body: str | None = None
    has_response: bool = True


def _finish_reason(api: str, stop_kind: str | None) -> str | None:
    table = {
        "openai_compatible": {"end": "stop", "tool_use": "tool_calls", "max_tokens": "length"},
        "anthropic": {"end": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"},
    }
    return None if stop_kind is None else table[api].get(stop_kind, stop_kind)


def _wire_body(api: str, model: str, reply: Reply, call_ids: Sequence[str], tokens: int) -> str:
    finish = _finish_reason(api, reply.stop_kind)
    if api == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [
            {"type": "tool_use", "id": i, "name": n, "input": _loose_json(a)}
            for i, (n, a) in zip(call_ids, reply.calls, strict=True)
        ]
        return json.dumps(
            {
                "id": f"msg_{call_ids[0] if call_ids else 'x'}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": finish,
                "usage": {"input_tokens": tokens * 9, "output_tokens": tokens},
            }
        )
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in zip(call_ids, reply.calls, strict=True)
        ]
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": tokens * 9, "completion_tokens": tokens},
        }
    )


def _loose_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _response_json(api: str, model: str, reply: Reply, call_ids: Sequence[str], tokens: int) -> str:
    """The stored ModelResponse JSON (its fields in declaration order)."""
    return json.dumps(
        {
            "text": reply.text,
            "tool_calls": [
                {"id": i, "name": n, "arguments": a}
                for i, (n, a) in zip(call_ids, reply.calls, strict=True)
            ],
            "stop_kind": reply.stop_kind,
            "finish_reason": _finish_reason(api, reply.stop_kind),
            "usage": {
                "input_tokens": tokens * 9,
                "output_tokens": tokens,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
            },
            "response_id": f"resp-{call_ids[0] if call_ids else 'text'}",
            "reported_model": model,
            "body_problem": reply.body_problem,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


# -- the labels an older classifier stored -----------------------------------------------

_OLD_ANSWER = re.compile(r"^ANSWER:\s*(.*?)\s*$", re.MULTILINE)
_DROP = ("connect", "timeout", "429", "5xx", "interrupted")


class OldLabels:
    """The labels an older reader stored, ungraded as the lanes store them: plain
    `ANSWER:` lines only (no ABSTAIN line, no bold, no JSON answer), a cut-off reply
    without text called empty."""

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools = tuple(tools)
        self._problems: dict[tuple[str, str], str | None] = {}

    def problem(self, name: str, arguments: str) -> str | None:
        key = (name, arguments)
        if key not in self._problems:
            call = ToolCall(id="x", name=name, arguments=arguments)
            self._problems[key] = tool_call_problem(call, self.tools)
        return self._problems[key]

    def label(self, reply: Reply) -> tuple[str | None, str, str | None, str | None]:
        """(label, reason, drop_cause, answer)."""
        if reply.status in ("harness_error", "budget_stopped"):
            return None, reply.status, None, None
        if reply.status == "infra_error":
            cause = reply.failure_cause if reply.failure_cause in _DROP else None
            return "drop", f"drop: {cause}", cause, None
        if not reply.has_response:
            return "empty", "empty: no response", None, None
        if reply.stop_kind == "max_tokens":
            if not reply.text and not reply.calls:
                return "empty", "empty: empty_reply", None, None
            return "truncated", "truncated: stop reason 'length'", None, None
        if reply.body_problem is not None:
            return "empty", f"empty: {reply.body_problem}", None, None
        for name, arguments in reply.calls:
            problem = self.problem(name, arguments)
            if problem:
                return "schema", f"schema: {problem}", None, None
        found = _OLD_ANSWER.findall(reply.text or "")
        answer = found[-1] if found and found[-1] else None
        if not reply.calls and answer is None:
            return "schema", "schema: no answer line in the text", None, None
        return None, "well-formed, not graded", None, answer


# -- generation --------------------------------------------------------------------------


@dataclass
class Writer:
    """Buffers rows and writes them to DuckDB in chunks."""

    con: duckdb.DuckDBPyConnection
    rows: dict[str, list[Any]] = field(default_factory=lambda: {n: [] for n, _ in COLUMNS})
    case_rows: list[dict[str, Any]] = field(default_factory=list)
    written: int = 0

    def add(self, row: dict[str, Any]) -> None:
        for name, values in self.rows.items():
            values.append(row.get(name))
        if len(self.rows["envelope_id"]) >= CHUNK:
            self.flush()

    def pending(self) -> int:
        return len(self.rows["envelope_id"])

    def flush(self) -> None:
        if self.rows["envelope_id"]:
            frame = pl.DataFrame(self.rows, schema=_frame_schema())
            self.con.register("bench_rows", frame.to_arrow())
            casts = ", ".join(
                f"CAST({n} AS {k.split(' PRIMARY')[0].split(' NOT NULL')[0]})" for n, k in COLUMNS
            )
            self.con.execute(f"INSERT INTO {TABLE} SELECT {casts} FROM bench_rows")
            self.con.unregister("bench_rows")
            self.written += frame.height
            self.rows = {n: [] for n, _ in COLUMNS}
        if self.case_rows:
            frame = pl.DataFrame(self.case_rows, infer_schema_length=None)
            self.con.register("bench_cases", frame.to_arrow())
            names = ", ".join(frame.columns)
            self.con.execute(f"INSERT INTO {CASE_RUNS} ({names}) SELECT {names} FROM bench_cases")
            self.con.unregister("bench_cases")
            self.case_rows = []


def _frame_schema() -> dict[str, type[pl.DataType]]:
    kinds = {"INTEGER": pl.Int64, "BIGINT": pl.Int64, "BOOLEAN": pl.Boolean, "DOUBLE": pl.Float64}
    schema: dict[str, type[pl.DataType]] = {}
    for name, kind in COLUMNS:
        base = kind.split()[0]
        schema[name] = (
            pl.Datetime
            if base == "TIMESTAMP"
            else pl.Date
            if base == "DATE"
            else kinds.get(base, pl.String)
        )
    return schema


class Generator:
    def __init__(self, fixture_dir: Path, seed: int) -> None:
        fixture_set = load_fixtures(fixture_dir)
        self.fixture_id = fixture_set.fixture_id
        self.cases = list(bench_cases(fixture_set.cases))
        self.tools = tuple(ToolSpec.model_validate(t) for t in fixture_set.tools)
        self.tools_json = json.dumps([t.model_dump(mode="json") for t in self.tools])
        self.old = OldLabels(self.tools)
        self.rng = random.Random(seed)
        self.seed = seed
        self.opening = {
            c.case_id: (
                Message(role="system", content=LabelWorld.system_prompt).model_dump_json(),
                Message(role="user", content=c.prompt).model_dump_json(),
            )
            for c in self.cases
        }
        self.start = datetime(2026, 1, 5, 9, 0, 0)

    def partitions(self) -> Iterator[tuple[str, str, int]]:
        index = 0
        while True:
            for model, api in MODELS:
                yield model, api, self.seed * 1000 + index
            index += 1

    def request_json(self, case: Case, history: Sequence[str], seed: int) -> str:
        messages = ",".join((*self.opening[case.case_id], *history))
        return (
            f'{{"messages":[{messages}],"tools":{self.tools_json},"tool_choice":null,'
            f'"max_tokens":1024,"temperature":null,"top_p":null,"stop":[],"seed":{seed},'
            f'"replicate":{seed},"extra":{{}}}}'
        )

    def structural(self, turn_text: str | None, calls: tuple[tuple[str, str], ...]) -> Reply | None:
        """Sometimes the attempt fails or comes back unusable instead of `turn_text`/`calls`."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.025:
            cause, http = rng.choice(
                [
                    ("5xx", 500),
                    ("5xx", 502),
                    ("5xx", 503),
                    ("429", 429),
                    ("timeout", None),
                    ("connect", None),
                    ("interrupted", None),
                ]
            )
            body = None if http is None else json.dumps({"error": {"message": "overloaded"}})
            return Reply(
                status="infra_error",
                http_status=http,
                failure_cause=cause,
                stop_kind=None,
                has_response=False,
                body=body,
            )
        if roll < 0.028:
            return Reply(
                status="harness_error",
                http_status=400,
                failure_cause="harness_4xx",
                stop_kind=None,
                has_response=False,
                body=json.dumps({"error": {"message": "bad request"}}),
            )
        if roll < 0.030:
            return Reply(
                status="budget_stopped",
                http_status=None,
                failure_cause="budget",
                stop_kind=None,
                has_response=False,
            )
        if roll < 0.050:
            cut = rng.random()
            if cut < 0.4 and turn_text:
                return Reply(
                    text=turn_text[: rng.randint(1, len(turn_text))], stop_kind="max_tokens"
                )
            if cut < 0.7 and calls:
                name, arguments = calls[0]
                return Reply(
                    calls=((name, arguments[: len(arguments) // 2]),), stop_kind="max_tokens"
                )
            return Reply(text="", stop_kind="max_tokens", body_problem="empty_reply")
        if roll < 0.065:
            problem = rng.choice(["empty_body", "malformed_json", "no_choices", "empty_reply"])
            bodies = {"empty_body": "", "malformed_json": '{"choices": [', "no_choices": "{}"}
            return Reply(
                text=None, stop_kind="end", body_problem=problem, body=bodies.get(problem, "{}")
            )
        return None

    def attempt_rows(
        self,
        *,
        lane: str,
        run_id: str,
        model: str,
        api: str,
        seed: int,
        case: Case,
        turn: int,
        reply: Reply,
        request_json: str,
        clock: datetime,
    ) -> list[dict[str, Any]]:
        call_id = _hex(model, lane, case.case_id, turn, seed)
        rows = []
        attempts = [reply]
        if reply.status == "infra_error" or self.rng.random() < 0.01:
            retried = Reply(
                status="retried",
                http_status=503,
                failure_cause="5xx",
                stop_kind=None,
                has_response=False,
                body=json.dumps({"error": {"message": "overloaded"}}),
            )
            attempts = [retried, *attempts]
        for number, attempt in enumerate(attempts, start=1):
            final = number == len(attempts)
            tokens = self.rng.randint(8, 400)
            ids = tuple(f"call_{_hex(call_id, number, i)}" for i in range(len(attempt.calls)))
            if final:
                label, reason, drop_cause, answer = self.old.label(attempt)
            else:
                label, reason, drop_cause, answer = None, "retried after 5xx", None, None
            landed = attempt.status == "ok"
            cost = Decimal(tokens) * Decimal("0.000003") if landed else None
            started = clock + timedelta(milliseconds=number * 700)
            rows.append(
                {
                    "envelope_id": f"{run_id}/{call_id}/{number}",
                    "run_id": run_id,
                    "call_id": call_id,
                    "attempt": number,
                    "final": final,
                    "request_hash": _hex("req", call_id),
                    "lane": lane,
                    "case_id": case.case_id,
                    "turn": turn,
                    "seed": seed,
                    "replicate": seed,
                    "model": model,
                    "provider": "simulated",
                    "api": api,
                    "wire_model": model,
                    "started_at": started,
                    "call_day": started.date(),
                    "elapsed_ms": float(self.rng.randint(80, 4000)),
                    "status": attempt.status,
                    "http_status": attempt.http_status,
                    "failure_cause": attempt.failure_cause,
                    "failure_detail": None if landed else f"{attempt.failure_cause} (bench)",
                    "retry_after_ms": 1000 if attempt.failure_cause == "429" else None,
                    "backoff_ms": 250.0 if attempt.status == "retried" else None,
                    "finish_reason": _finish_reason(api, attempt.stop_kind) if landed else None,
                    "stop_kind": attempt.stop_kind if landed else None,
                    "input_tokens": tokens * 9 if landed else None,
                    "output_tokens": tokens if landed else None,
                    "price_model": model,
                    "price_tier": "standard",
                    "cost_usd": None if cost is None else str(cost),
                    "reserved_usd": "0.004096000000",
                    "label": label,
                    "label_reason": reason,
                    "drop_cause": drop_cause,
                    "answer": answer,
                    "cache_status": "off",
                    "request_json": request_json,
                    "response_body": (
                        _wire_body(api, model, attempt, ids, tokens)
                        if landed and attempt.body is None
                        else attempt.body
                    ),
                    "response_json": (
                        _response_json(api, model, attempt, ids, tokens)
                        if attempt.has_response
                        else None
                    ),
                }
            )
        return rows

    def case_run(
        self, lane: str, run_id: str, model: str, seed: int, case: Case, calls: list[str]
    ) -> dict[str, Any]:
        return {
            "run_id": run_id,
            "lane": lane,
            "model": model,
            "seed": seed,
            "case_id": case.case_id,
            "attempt": 1,
            "fixture_id": self.fixture_id,
            "settings_hash": _hex("settings", lane),
            "status": "completed",
            "end_reason": "final_answer" if lane == "product" else "first_action",
            "final_text": None,
            "turns": max(1, len(calls)),
            "tool_calls": max(0, len(calls) - 1),
            "guard_firings": "{}",
            "call_ids": json.dumps(calls),
            "cost_usd": Decimal("0.001"),
            "input_tokens": 900 * len(calls),
            "output_tokens": 90 * len(calls),
            "first_call": None,
            "elapsed_ms": 1000.0,
            "started_at": self.start.isoformat(),
        }

    def rows(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """(case run row, its envelope rows), partition after partition, case after case."""
        rng = self.rng
        clock = self.start
        for model, api, seed in self.partitions():
            variant_base = rng.randint(0, 2)  # a model's habits repeat across seeds
            for lane in ("model", "product"):
                run_id = f"bench-{lane}-{model}-s{seed}"
                for case in self.cases:
                    clock += timedelta(seconds=1)
                    case_rows: list[dict[str, Any]] = []
                    history: list[str] = []
                    turns = 1 if lane == "model" else rng.choice((1, 2, 2, 3, 3, 4, 5))
                    for turn in range(turns):
                        last = turn == turns - 1
                        text_first = lane == "model" and rng.random() < 0.12
                        text: str | None
                        calls: tuple[tuple[str, str], ...]
                        if (lane == "product" and last) or text_first:
                            text, calls = final_text(case, rng), ()
                        else:
                            variant = variant_base * 7 + (turn if lane == "product" else 0)
                            call = _first_call(case, rng, variant)
                            calls = (
                                (call,)
                                if rng.random() < 0.9
                                else (call, _first_call(case, rng, variant + 1))
                            )
                            text = None if rng.random() < 0.8 else "Let me look that up."
                        reply = self.structural(text, calls) or Reply(
                            text=text, calls=calls, stop_kind="tool_use" if calls else "end"
                        )
                        request = self.request_json(case, history, seed)
                        rows = self.attempt_rows(
                            lane=lane,
                            run_id=run_id,
                            model=model,
                            api=api,
                            seed=seed,
                            case=case,
                            turn=turn,
                            reply=reply,
                            request_json=request,
                            clock=clock,
                        )
                        case_rows += rows
                        if reply.status != "ok":
                            break
                        for i, (name, arguments) in enumerate(reply.calls):
                            call_id = f"call_{_hex(rows[-1]['call_id'], 1, i)}"
                            history.append(
                                json.dumps(
                                    {
                                        "role": "assistant",
                                        "content": reply.text or "",
                                        "tool_calls": [
                                            {"id": call_id, "name": name, "arguments": arguments}
                                        ],
                                        "tool_call_id": None,
                                        "is_error": False,
                                    },
                                    separators=(",", ":"),
                                )
                            )
                            history.append(
                                json.dumps(
                                    {
                                        "role": "tool",
                                        "content": _tool_result(name, rng),
                                        "tool_calls": [],
                                        "tool_call_id": call_id,
                                        "is_error": False,
                                    },
                                    separators=(",", ":"),
                                )
                            )
                    calls_made = list(dict.fromkeys(r["call_id"] for r in case_rows))
                    yield self.case_run(lane, run_id, model, seed, case, calls_made), case_rows


def generate(
    out: Path, n: int = DEFAULT_N, seed: int = 7, fixture_dir: Path | None = None
) -> dict[str, Any]:
    """Write exactly `n` envelopes (and their case runs) to a fresh DuckDB file at `out`."""
    if n < 1:
        raise ValueError("n must be at least 1")
    generator = Generator(fixture_dir or default_fixture_dir(), seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in (out, out.with_name(out.name + ".wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(out))
    try:
        ensure_envelope_table(con)
        ensure_lane_tables(con)
        writer = Writer(con)
        total = 0
        for case_run, rows in generator.rows():
            rows = rows[: n - total]
            for row in rows:
                writer.add(row)
            total += len(rows)
            writer.case_rows.append(case_run)
            if total >= n:
                break
        writer.flush()
        labels = dict(
            con.execute(
                f"SELECT coalesce(label, 'unlabelled'), count(*) FROM {TABLE} WHERE final "
                "GROUP BY ALL ORDER BY 1"
            ).fetchall()
        )
    finally:
        con.close()
    return {
        "path": str(out),
        "envelopes": total,
        "fixture_id": generator.fixture_id,
        "stored_labels": labels,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=DEFAULT_N)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--fixtures", type=Path, default=None, help="a fixture set folder")
    args = parser.parse_args(argv)
    if args.n < 1:
        print("make_envelopes: --n must be at least 1", file=sys.stderr)
        return 2
    out = args.out or var_dir() / "bench" / f"envelopes-{args.n}-{args.seed}.duckdb"
    started = time.perf_counter()
    summary = generate(out, args.n, args.seed, args.fixtures)
    print(json.dumps(summary, indent=1))
    print(f"generated in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

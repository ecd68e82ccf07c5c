"""A provider that answers with the caller's key, run through the real lanes and the judge.

A loopback server speaks both wire formats (the lean aiohttp transport for
`openai_compatible`, the `anthropic` SDK for Messages) and answers every call with every
key it has been sent so far (the caller's and the others'), in every common spelling: as
sent, `\\u`-escaped in the raw body (so the decoded reply holds the key as is) and in the
text, base64 (both alphabets; whole, and inside longer base64 at each of the three byte
alignments) and percent-encoded (both hex cases); in its reply text, its first line, its
ids and its tool calls' arguments. Two models run the model and the product lane, the
judge rules on their judged replies, everything is loaded into a warehouse of its own.
Then every file written (lane records, traces, identities, call journals) and every text
column of every table and view of the warehouse is searched for every key in every
spelling, raw and decoded (JSON, percent-encoding): found in 0 places.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.lane_records import Lane
from eval_pipeline.lanes.lane_tables import load_partition_records
from eval_pipeline.lanes.partition_runs import (
    LaneSettings,
    open_product_tools,
    partition_dir,
    run_partition,
)
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.providers.envelope import JOURNAL_NAME
from eval_pipeline.providers.redact import REDACTED
from eval_pipeline.scoring.grading import Partition, grade_partition, judge_asker
from eval_pipeline.scoring.judge import JUDGE_LANE, VERDICTS, load_judge
from eval_pipeline.sim.sessions import session_for
from eval_pipeline.warehouse import connect
from eval_pipeline.warehouse.envelopes import load_journal

KEYS = {
    "EVALP_TEST_ECHO_KEY_OPENAI": "sk-evalp-ECHO-openai-a1b2c3d4e5/f6+g7h8",
    "EVALP_TEST_ECHO_KEY_ANTHROPIC": "sk-ant-evalp-ECHO-9z8y7x6w5v4u_t3s2?r1=",
    "EVALP_TEST_ECHO_KEY_JUDGE": "sk-evalp-ECHO-judge-0f1e2d3c4b5a69788796",
}
CONFIGS = {
    "echo-openai": ("openai_compatible", "/v1", "EVALP_TEST_ECHO_KEY_OPENAI", "tool-responder"),
    "echo-anthropic": ("anthropic_messages", "", "EVALP_TEST_ECHO_KEY_ANTHROPIC", "tool-responder"),
    "echo-judge": ("openai_compatible", "/v1", "EVALP_TEST_ECHO_KEY_JUDGE", "judge"),
}
MODELS = ("echo-openai", "echo-anthropic")


def _escaped(text: str, upper: bool = False) -> str:
    """`text` with every character as a JSON \\u escape."""
    return "".join(f"\\u{ord(c):04X}" if upper else f"\\u{ord(c):04x}" for c in text)


def _b64(data: bytes, alphabet: bytes = b"+/") -> str:
    return base64.b64encode(data, altchars=alphabet).decode()


def echoed_lines(key: str) -> list[str]:
    """The key in every spelling the server writes it in."""
    data = key.encode()
    return [
        f"plain {key}",
        f"escaped {_escaped(key)}",
        f"b64 {_b64(data)}",
        f"b64url {_b64(data, b'-_').rstrip('=')}",
        *(f"basic {_b64(prefix + data)}" for prefix in (b"u:", b"us:", b"use:")),
        *(f"basicurl {_b64(prefix + data + b'!', b'-_')}" for prefix in (b"u:", b"us:", b"use:")),
        f"url {urllib.parse.quote(key, safe='')}",
        "url-all " + "".join(f"%{byte:02x}" for byte in data),
    ]


def searched_forms(key: str) -> list[str]:
    """What the search looks for: the key and its encodings, and the characters its
    base64 shares at each alignment inside longer base64 (a prefix of u:/us:/use:)."""
    data = key.encode()
    forms = [
        key,
        _escaped(key),
        _escaped(key, upper=True),
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote(key, safe="").lower(),
        "".join(f"%{byte:02x}" for byte in data),
    ]
    for alphabet in (b"+/", b"-_"):
        forms.append(_b64(data, alphabet).rstrip("="))
        for offset in range(3):
            shifted = _b64(b"\0" * offset + data, alphabet)
            forms.append(shifted[-(-8 * offset // 6) : 8 * (offset + len(data)) // 6])
    return list(dict.fromkeys(forms))


class EchoingProvider:
    """The loopback provider: answers with every key it was sent (see the module)."""

    def __init__(self) -> None:
        self.seen: dict[str, None] = {}
        self.calls = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> EchoingProvider:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/messages", self._messages)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def _text(self, key: str, judge: bool) -> str:
        self.seen[key] = None
        keys = [key, *(k for k in self.seen if k != key)]
        first = f"I was called with {key} ({_b64(key.encode())})"
        lines = [first, *(line for k in keys for line in echoed_lines(k))]
        lines.append("VERDICT: PASS" if judge else f"ANSWER: {key}")
        return "\n".join(lines)

    def _tool_query(self, key: str) -> str:
        return json.dumps({"query": f"SELECT '{key}' AS k, '{_b64(key.encode())}' AS b"})

    async def _chat(self, request: web.Request) -> web.Response:
        self.calls += 1
        key = request.headers["Authorization"].removeprefix("Bearer ")
        body = await request.json()
        answered = any(m.get("role") == "tool" for m in body["messages"])
        message: dict[str, Any]
        if body.get("tools") and not answered:
            call = {
                "id": f"call_{key}",
                "type": "function",
                "function": {"name": "run_sql", "arguments": self._tool_query(key)},
            }
            message, finish = (
                {"role": "assistant", "content": None, "tool_calls": [call]},
                "tool_calls",
            )
        else:
            text = self._text(key, judge=body["model"] == "judge")
            message, finish = {"role": "assistant", "content": text}, "stop"
        raw = json.dumps(
            {
                "id": f"chatcmpl-{key}",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 30},
            }
        )
        # the answer line's key \u-escaped in the raw body: the decoded reply holds it as is
        raw = raw.replace(f"ANSWER: {key}", "ANSWER: " + _escaped(key))
        return web.Response(text=raw, content_type="application/json")

    async def _messages(self, request: web.Request) -> web.Response:
        self.calls += 1
        key = request.headers.get("x-api-key") or request.headers["Authorization"].removeprefix(
            "Bearer "
        )
        body = await request.json()
        answered = any(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for m in body["messages"]
            for block in (m["content"] if isinstance(m["content"], list) else [])
        )
        content: list[dict[str, Any]]
        if body.get("tools") and not answered:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{key}",
                    "name": "run_sql",
                    "input": json.loads(self._tool_query(key)),
                }
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": self._text(key, judge=False)}], "end_turn"
        raw = json.dumps(
            {
                "id": f"msg_{key}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": stop,
                "usage": {"input_tokens": 20, "output_tokens": 30},
            }
        )
        raw = raw.replace(f"ANSWER: {key}", "ANSWER: " + _escaped(key))
        return web.Response(text=raw, content_type="application/json")


def write_configs(folder: Path, port: int) -> None:
    folder.mkdir(parents=True)
    for name, (api, path, key_env, model) in CONFIGS.items():
        (folder / f"{name}.yaml").write_text(
            f"name: {name}\napi: {api}\nprovider: echo\nmodel: {model}\n"
            f"base_url: http://127.0.0.1:{port}{path}\napi_key_env: {key_env}\n"
            "max_in_flight: 8\ntimeout_s: 20\nconnect_timeout_s: 5\n"
            "retry: {max_attempts: 1, base_delay_s: 0.01, max_delay_s: 0.01, max_total_s: 1}\n"
        )


def _views(text: str) -> Iterator[str]:
    """The text, and what it decodes to as JSON and as percent-encoding."""
    yield text
    yield urllib.parse.unquote(text)
    try:
        decoded = json.loads(text)
    except ValueError:
        return
    yield json.dumps(decoded, ensure_ascii=False)


def places_holding_keys(folder: Path, warehouse: Path) -> list[str]:
    """Every (place, key form) where a key is found: each file written under `folder`
    (line by line, decoded too), and each text column of every table and view."""
    forms = [form for key in KEYS.values() for form in searched_forms(key)]
    found: list[str] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".duckdb"):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            hits = {form for view in _views(line) for form in forms if form in view}
            found += [f"{path.relative_to(folder)}:{number} holds {form!r}" for form in hits]
    con = connect(warehouse, read_only=True)
    try:
        columns = con.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "WHERE data_type = 'VARCHAR' OR data_type = 'JSON'"
        ).fetchall()
        assert len(columns) > 40, columns
        for schema, table, column in columns:
            values = con.execute(f'SELECT "{column}" FROM "{schema}"."{table}"').fetchall()
            for (value,) in values:
                if value is None:
                    continue
                hits = {form for view in _views(str(value)) for form in forms if form in view}
                found += [f"{schema}.{table}.{column} holds {form!r}" for form in hits]
    finally:
        con.close()
    return found


def test_an_echoed_key_reaches_no_lane_record_judge_call_nor_warehouse_table(
    small_fixture_set: FixtureSet,
    agent_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable, key in KEYS.items():
        monkeypatch.setenv(variable, key)
    monkeypatch.setenv("EVALP_MODELS_DIR", str(tmp_path / "models"))
    judged = [c for c in small_fixture_set.cases if "judged" in c.tiers][:2]
    plain = [c for c in small_fixture_set.cases if "judged" not in c.tiers][:3]
    cases = [*plain, *judged]
    assert len(judged) == 2
    lanes_root, runs_root = tmp_path / "lanes", tmp_path / "runs"
    warehouse = tmp_path / "warehouse.duckdb"
    judge = load_judge().model_copy(update={"model": "echo-judge"})
    folders: dict[tuple[Lane, str], Path] = {}

    with EchoingProvider() as provider:
        write_configs(tmp_path / "models", provider.port)
        configs = scan_model_configs().require(MODELS)
        run_id = "echo-sweep"
        with (
            session_for(
                configs, run_id=run_id, journal=runs_root / run_id / JOURNAL_NAME
            ) as session,
            open_product_tools(
                LaneSettings(lane="product"), small_fixture_set, agent_db
            ) as product_tools,
        ):

            async def sweep() -> None:
                async with session:
                    for lane in ("model", "product"):
                        for model, config in configs.items():
                            folder = partition_dir(lane, model, 0, lanes_root)
                            folders[(lane, model)] = folder
                            summary = await run_partition(
                                lane=lane,
                                config=config,
                                seed=0,
                                fixture_set=small_fixture_set,
                                session=session,
                                settings=LaneSettings(lane=lane),
                                product_tools=product_tools if lane == "product" else None,
                                folder=folder,
                                cases=cases,
                            )
                            assert summary.cases == len(cases)

            asyncio.run(sweep())
        con = connect(warehouse)
        try:
            load_partition_records(folders.values(), runs_root, con)
            by_id = {case.case_id: case for case in small_fixture_set.cases}
            asked = 0
            for lane, model in folders:
                graded = grade_partition(
                    con,
                    Partition(lane=lane, model=model, seed=0),
                    by_id,
                    judge,
                    judge_asker(judge, "echo-judge-run", runs_root),
                )
                asked += graded.judge_asked
                assert len(graded.scores) == len(cases)
            load_journal(runs_root / "echo-judge-run" / JOURNAL_NAME, con)
        finally:
            con.close()
        # the judge ruled on the product lane's judged replies, whose text it was sent
        assert asked == 2 * len(judged)
        assert len(provider.seen) == 3 and provider.calls > 4 * len(cases)

    found = places_holding_keys(tmp_path, warehouse)
    assert not found, f"a key is stored in {len(found)} places, e.g.:\n" + "\n".join(found[:40])
    # what was stored is the replies, redacted: the answers, the judge's requests (which
    # carry them) and its verdicts' reasons (its reply's first line)
    con = connect(warehouse, read_only=True)
    try:
        counts = con.execute(
            f"""
            SELECT
                (SELECT count(*) FROM runs.case_runs
                 WHERE lane = 'product' AND contains(final_text, 'ANSWER: {REDACTED}')),
                (SELECT count(*) FROM runs.call_envelopes
                 WHERE lane = ? AND final AND contains(request_json, 'plain {REDACTED}')),
                (SELECT count(*) FROM {VERDICTS} WHERE contains(reason, '{REDACTED}'))
            """,
            [JUDGE_LANE],
        ).fetchone()
    finally:
        con.close()
    assert counts == (len(MODELS) * len(cases), asked, asked)

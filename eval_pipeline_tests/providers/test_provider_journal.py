"""Envelopes are written as they land: a crash loses nothing that landed.

Also: the warehouse load is idempotent and in batches, the table round-trips envelopes,
and the per-provider limit bounds the calls in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.envelope import read_journal
from eval_pipeline.providers.errors import JournalError
from eval_pipeline.providers.harness import CallSession, CallTag
from eval_pipeline.providers.transport import AttemptOutcome, WireRequest
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.providers.wire import openai_body, parse_openai_body
from eval_pipeline.sim.process import SimHandle
from eval_pipeline.warehouse.envelopes import load_journal, read_envelopes
from eval_pipeline_tests.providers.conftest import FAKE_KEY, KEY_ENV, new_session, sim_config

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from eval_pipeline.providers.config import ModelConfig
    from eval_pipeline.providers.harness import CallSession, CallTag
    from eval_pipeline.providers.types import Message, ModelRequest
    from eval_pipeline.project_configs import load_price_book

    config = ModelConfig.model_validate_json(sys.argv[2])

    async def main() -> None:
        session = CallSession(
            price_book=load_price_book(), run_id="crash", journal_path=Path(sys.argv[1])
        )
        client = session.client(config)
        for n in range(10_000):
            request = ModelRequest(
                messages=(Message(role="user", content=f"case {n} word{n}"),), max_tokens=16
            )
            result = await client.call(request, CallTag(lane="m", case_id=str(n)))
            print("landed", result.final.envelope_id, flush=True)

    asyncio.run(main())
    """
)


def test_a_killed_run_keeps_every_envelope_that_landed(sim: SimHandle, tmp_path: Path) -> None:
    journal = tmp_path / "crash.jsonl"
    config = sim_config(sim, "tool-responder")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(journal), config.model_dump_json()],
        stdout=subprocess.PIPE,
        env={**os.environ},
        text=True,
    )
    assert child.stdout is not None
    landed = []
    for line in child.stdout:
        landed.append(line.split()[1])
        if len(landed) == 25:
            break
    child.send_signal(signal.SIGKILL)  # no cleanup, no close, no flush at exit
    child.wait(timeout=10)
    child.stdout.close()
    recorded = {envelope.envelope_id for envelope in read_journal(journal)}
    assert set(landed) <= recorded


def test_torn_last_line_is_skipped_and_a_corrupt_line_is_an_error(
    sim: SimHandle, tmp_path: Path
) -> None:
    async def run() -> None:
        async with new_session(tmp_path) as session:
            client = session.client(sim_config(sim, "tool-responder"))
            for n in range(3):
                request = ModelRequest(
                    messages=(Message(role="user", content=f"q {n}"),), max_tokens=8
                )
                await client.call(request, CallTag(lane="m", case_id=str(n)))

    asyncio.run(run())
    journal = tmp_path / "runs" / "run-1" / "envelopes.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines) + lines[0][:50])
    assert len(list(read_journal(journal))) == 3
    journal.write_text(lines[0] + "{broken\n" + lines[1])
    with pytest.raises(JournalError, match=":2:"):
        list(read_journal(journal))


def test_warehouse_load_is_idempotent_and_round_trips(sim: SimHandle, tmp_path: Path) -> None:
    async def run() -> list[Any]:
        async with new_session(tmp_path) as session:
            client = session.client(sim_config(sim, "flaky"))
            await asyncio.gather(
                *(
                    client.call(
                        ModelRequest(
                            messages=(Message(role="user", content=f"q{n}"),), max_tokens=8
                        ),
                        CallTag(lane="m", case_id=str(n)),
                    )
                    for n in range(30)
                )
            )
            return session.envelopes

    envelopes = asyncio.run(run())
    journal = tmp_path / "runs" / "run-1" / "envelopes.jsonl"
    database = tmp_path / "w.duckdb"
    assert load_journal(journal, database, batch_size=7) == len(envelopes)
    assert load_journal(journal, database) == 0
    with duckdb.connect(str(database)) as con:
        back = read_envelopes(con, run_id="run-1")
    assert sorted(back, key=lambda e: e.envelope_id) == sorted(
        envelopes, key=lambda e: e.envelope_id
    )


class SlowEcho:
    """A transport that answers after a short sleep and tracks calls in flight."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        return openai_body(request)

    async def send(self, wire: WireRequest, request: ModelRequest) -> AttemptOutcome:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        body = (
            '{"choices": [{"message": {"content": "ANSWER: 1"}, "finish_reason": "stop"}],'
            ' "usage": {"prompt_tokens": 5, "completion_tokens": 3}}'
        )
        return AttemptOutcome(
            http_status=200,
            body=body,
            cause=None,
            detail=None,
            retry_after_ms=None,
            response=parse_openai_body(body),
        )

    async def close(self) -> None:
        return None


def test_per_provider_limit_bounds_calls_in_flight(tmp_path: Path) -> None:
    transport = SlowEcho()

    def config(name: str, limit: int) -> ModelConfig:
        return ModelConfig(
            name=name,
            api="openai_compatible",
            provider="shared",
            model="tool-responder",
            base_url="http://127.0.0.1:9/v1",
            api_key_env=KEY_ENV,
            max_in_flight=limit,
        )

    async def run() -> None:
        async with new_session(tmp_path, provider_limits={"shared": 5}) as session:
            one = session.client(config("one", 50), transport=transport)
            two = session.client(config("two", 50), transport=transport)
            request = ModelRequest(messages=(Message(role="user", content="x"),), max_tokens=4)
            await asyncio.gather(
                *(
                    (one if n % 2 else two).call(
                        request.model_copy(update={"replicate": n}),
                        CallTag(lane="m", case_id=str(n)),
                    )
                    for n in range(40)
                )
            )

    asyncio.run(run())
    assert transport.peak == 5


def test_a_key_in_any_free_text_field_is_redacted_before_the_journal(tmp_path: Path) -> None:
    """The journal searches an envelope's text fields for keys in one pass: a key planted
    in any field that holds free text (one at a time) never reaches the journal."""
    from datetime import date, datetime
    from decimal import Decimal

    from eval_pipeline.providers.envelope import CallEnvelope

    base = CallEnvelope(
        envelope_id="r/c/1",
        run_id="r",
        call_id="c",
        attempt=1,
        final=True,
        request_hash="h",
        lane="m",
        case_id="c",
        turn=0,
        seed=None,
        replicate=0,
        model="m",
        provider="p",
        api="openai_compatible",
        wire_model="w",
        started_at=datetime(2026, 1, 1),
        call_day=date(2026, 1, 1),
        elapsed_ms=1.0,
        status="ok",
        http_status=200,
        failure_cause=None,
        failure_detail="d",
        retry_after_ms=None,
        backoff_ms=None,
        finish_reason="stop",
        stop_kind="end",
        input_tokens=1,
        output_tokens=1,
        price_model="m",
        price_tier="t",
        cost_usd=Decimal(0),
        reserved_usd=Decimal(0),
        label=None,
        label_reason="r",
        drop_cause=None,
        answer="a",
        cache_status="off",
        request_json="{}",
        response_body="{}",
        response_json="{}",
    )
    free_text = [
        name
        for name, info in CallEnvelope.model_fields.items()
        if info.annotation in (str, str | None)
    ]
    assert {"response_body", "answer", "failure_detail", "request_json"} <= set(free_text)
    session = CallSession(
        price_book=load_price_book(), run_id="r", journal_path=tmp_path / "journal.jsonl"
    )
    session.redact.add(FAKE_KEY)
    for name in free_text:
        recorded = session.record(base.model_copy(update={name: f"x {FAKE_KEY} y"}))
        assert getattr(recorded, name) == "x [REDACTED] y", name
    session.journal.close()
    text = (tmp_path / "journal.jsonl").read_text(encoding="utf-8")
    assert text.count("[REDACTED]") == len(free_text)
    assert FAKE_KEY not in text

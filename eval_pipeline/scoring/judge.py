"""Tier 3: a pinned judge model and rubric, called through the model-call layer.

The judge sees the operator's question and the reply, never the expected answer. Its
verdict is stored keyed by everything that decides it (judge model, rubric hash, case,
reply), so re-grading reuses it without a call; a changed rubric or reply asks again. A
judge call that fails is a judge error (‡ for the case), never the model's failure.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
from pydantic import Field

from eval_pipeline import paths
from eval_pipeline.cases.case import Case
from eval_pipeline.config import load_yaml_config
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession, CallTag
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.score import JudgeVerdict
from eval_pipeline.warehouse import has_table

JUDGE_LANE = "judge"
VERDICTS = "runs.judge_verdicts"
_VERDICT = re.compile(r"^\W*VERDICT\W*:\s*(PASS|FAIL)\b", re.IGNORECASE | re.MULTILINE)


class JudgeConfig(FrozenRecord):
    model: str
    rubric: str
    max_tokens: int = Field(default=256, gt=0)


class Judge(FrozenRecord):
    """A judge as pinned: its model config name, its rubric and the rubric's hash."""

    model: str
    rubric_text: str
    rubric_hash: str
    max_tokens: int


def load_judge(path: Path | None = None) -> Judge:
    path = path or paths.judge_config()
    config = load_yaml_config(JudgeConfig, path)
    rubric_path = path.parent / config.rubric
    text = rubric_path.read_text(encoding="utf-8")
    return Judge(
        model=config.model,
        rubric_text=text,
        rubric_hash=hashlib.sha256(text.encode()).hexdigest()[:16],
        max_tokens=config.max_tokens,
    )


def verdict_key(judge: Judge, case: Case, reply: str | None) -> str:
    material = "\x1f".join([judge.model, judge.rubric_hash, case.case_id, case.prompt, reply or ""])
    return hashlib.sha256(material.encode()).hexdigest()


def ensure_verdict_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE SCHEMA IF NOT EXISTS runs")
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {VERDICTS} (key VARCHAR PRIMARY KEY, judge_model VARCHAR, "
        "rubric_hash VARCHAR, case_id VARCHAR, passed BOOLEAN, reason VARCHAR, call_id VARCHAR)"
    )


def stored_verdicts(con: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> dict[str, JudgeVerdict]:
    """Stored verdicts by key (read-only: no table yet means none stored)."""
    if not keys or not has_table(con, VERDICTS):
        return {}
    rows = con.execute(
        f"SELECT key, passed, reason, call_id FROM {VERDICTS} WHERE key IN (SELECT unnest(?))",
        [list(keys)],
    ).fetchall()
    return {
        key: JudgeVerdict(passed=passed, reason=reason, call_id=call_id)
        for key, passed, reason, call_id in rows
    }


def store_verdicts(
    con: duckdb.DuckDBPyConnection,
    judge: Judge,
    cases: Mapping[str, Case],
    verdicts: Mapping[str, JudgeVerdict],
) -> None:
    ensure_verdict_table(con)
    for key, verdict in verdicts.items():
        if verdict.failed or verdict.passed is None:
            continue  # a failed judge call is asked again next time
        con.execute(
            f"INSERT OR REPLACE INTO {VERDICTS} VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                key,
                judge.model,
                judge.rubric_hash,
                cases[key].case_id,
                verdict.passed,
                verdict.reason,
                verdict.call_id,
            ],
        )


def judge_request(judge: Judge, case: Case, reply: str | None) -> ModelRequest:
    question = case.prompt.splitlines()[0]
    return ModelRequest(
        messages=(
            Message(role="system", content=judge.rubric_text),
            Message(role="user", content=f"QUESTION: {question}\nREPLY:\n{reply or '(no reply)'}"),
        ),
        max_tokens=judge.max_tokens,
        temperature=0,
    )


def judge_in_session(
    session: CallSession,
    judge_config: ModelConfig,
    judge: Judge,
    items: Mapping[str, tuple[Case, str | None]],
) -> dict[str, JudgeVerdict]:
    """Ask the judge about `items` in a new session, closed when done (sync callers)."""

    async def go() -> dict[str, JudgeVerdict]:
        async with session:
            return await ask_judge(session, judge_config, judge, items)

    return asyncio.run(go())


async def ask_judge(
    session: CallSession,
    judge_config: ModelConfig,
    judge: Judge,
    items: Mapping[str, tuple[Case, str | None]],
) -> dict[str, JudgeVerdict]:
    """One judge call per item (keyed by `verdict_key`); a failed call is a judge error."""
    client = session.client(judge_config)

    async def one(key: str, case: Case, reply: str | None) -> tuple[str, JudgeVerdict]:
        result = await client.call(
            judge_request(judge, case, reply), CallTag(lane=JUDGE_LANE, case_id=case.case_id)
        )
        if result.status != "ok" or result.response is None:
            return key, JudgeVerdict(
                passed=None,
                reason=f"judge call {result.status}",
                call_id=result.call_id,
                failed=True,
            )
        ruling = result.response.text or ""
        matches = list(_VERDICT.finditer(ruling))
        if not matches:
            return key, JudgeVerdict(
                passed=None,
                reason="the judge gave no verdict line",
                call_id=result.call_id,
                failed=True,
            )
        # The last verdict line counts; a verdict line is not blank, so the stripped ruling
        # has a first line.
        return key, JudgeVerdict(
            passed=matches[-1].group(1).upper() == "PASS",
            reason=ruling.strip().splitlines()[0][:200],
            call_id=result.call_id,
        )

    pairs = await asyncio.gather(*(one(key, case, reply) for key, (case, reply) in items.items()))
    return dict(pairs)

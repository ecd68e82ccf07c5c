"""A sweep in Inspect AI's log format, so `inspect view` browses it.

One Inspect log per lane and model (Inspect's unit: a task run against a model): every
case is a sample, each seed an epoch (the seed is in the sample's metadata), with the
conversation as Inspect messages (the prompt, each reply with its tool calls, each tool
result), the final reply as the output, the case score as the sample's score (its tiers,
label and failed checks in the score's metadata), and the tokens as model usage. Cases never
heard (‡) or budget-stopped (†) are samples without a score, their status in the metadata.
Logs are built with Inspect's own models and written by its own writer; the log of a
simulated model names the project's simulated provider.

Inspect AI is optional (`pip install 'eval-pipeline[inspect]'`): only this export needs it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

import duckdb

from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.lane_records import LaneIdentity
from eval_pipeline.providers.config import SIMULATED
from eval_pipeline.records import FrozenRecord
from eval_pipeline.report.transcript import Transcript, read_transcripts
from eval_pipeline.scoring.score import CaseScore

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage

SCORER = "evalp_case_score"


class ExportError(EvalPipelineError):
    """Nothing to export, or Inspect AI is not installed."""


class ExportedLog(FrozenRecord):
    lane: str
    model: str
    path: str
    samples: int
    scored: int


def _inspect() -> Any:
    try:
        import inspect_ai.log
    except ImportError as error:
        raise ExportError(
            "Inspect AI is not installed: `pip install 'eval-pipeline[inspect]'` (or "
            "`uv sync`, which installs it with the dev tools)"
        ) from error
    return inspect_ai.log


def export_inspect(
    con: duckdb.DuckDBPyConnection,
    fixture_set: FixtureSet,
    scores: Sequence[CaseScore],
    identities: Mapping[str, LaneIdentity],
    out: Path,
) -> list[ExportedLog]:
    """Write one `.eval` log per lane and model of `scores` into `out`."""
    log_module = _inspect()
    if not scores:
        raise ExportError(
            f"no scores of fixture set {fixture_set.fixture_id} to export: run `evalp demo` "
            "(or `evalp sweep`) first"
        )
    cases = {case.case_id: case for case in fixture_set.cases}
    groups: dict[tuple[str, str], list[CaseScore]] = defaultdict(list)
    for score in scores:
        groups[(score.lane, score.model)].append(score)
    out.mkdir(parents=True, exist_ok=True)
    exported = []
    for (lane, model), rows in sorted(groups.items()):
        transcripts = read_transcripts(con, cases, rows)
        provider = _provider(rows, identities)
        log = eval_log(lane, model, provider, fixture_set, transcripts)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{lane}-lane_{model}")
        path = out / f"{safe}.eval"
        log_module.write_eval_log(log, path, format="eval")
        exported.append(
            ExportedLog(
                lane=lane,
                model=model,
                path=str(path),
                samples=len(transcripts),
                scored=sum(1 for t in transcripts if t.score.score is not None),
            )
        )
    return exported


def _provider(rows: Sequence[CaseScore], identities: Mapping[str, LaneIdentity]) -> str:
    configs = [identities[s.settings_hash].config for s in rows if s.settings_hash in identities]
    providers = {str(config.get("provider", "unknown")) for config in configs} or {"unknown"}
    return "+".join(sorted(providers))


def eval_log(
    lane: str,
    model: str,
    provider: str,
    fixture_set: FixtureSet,
    transcripts: Sequence[Transcript],
) -> EvalLog:
    """The Inspect log of one lane and model."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelUsage

    seeds = sorted({t.score.seed for t in transcripts})
    epoch_of = {seed: index + 1 for index, seed in enumerate(seeds)}
    samples = [sample(t, epoch_of[t.score.seed], f"{provider}/{model}") for t in transcripts]
    scored = [t.score.score for t in transcripts if t.score.score is not None]
    case_ids = sorted({t.score.case_id for t in transcripts})
    started = min((t.run.started_at for t in transcripts), default="")
    ended = max((t.run.started_at for t in transcripts), default="")
    identity = hashlib.sha256(
        json.dumps([lane, model, fixture_set.fixture_id, seeds]).encode()
    ).hexdigest()[:22]
    usage = ModelUsage(
        input_tokens=sum(t.run.input_tokens for t in transcripts),
        output_tokens=sum(t.run.output_tokens for t in transcripts),
        total_tokens=sum(t.run.input_tokens + t.run.output_tokens for t in transcripts),
    )
    simulated = provider == SIMULATED
    return EvalLog(
        status="success",
        eval=EvalSpec(
            eval_id=identity,
            run_id=identity,
            created=started,
            task=f"evalp/{lane}_lane",
            # Inspect takes logs of one task_id for retries of one another: one per model.
            task_id=identity,
            dataset=EvalDataset(
                name=fixture_set.fixture_id, samples=len(case_ids), sample_ids=case_ids
            ),
            model=f"{provider}/{model}",
            config=EvalConfig(epochs=len(seeds)),
            metadata={
                "fixture_id": fixture_set.fixture_id,
                "world_fingerprint": fixture_set.manifest.world.fingerprint,
                "lane": lane,
                "seeds": seeds,
                "provider": "the project's simulated provider" if simulated else provider,
            },
        ),
        results=EvalResults(
            total_samples=len(case_ids),
            completed_samples=len(case_ids),
            scores=[
                EvalScore(
                    name=SCORER,
                    scorer=SCORER,
                    scored_samples=len(scored),
                    unscored_samples=len(transcripts) - len(scored),
                    metrics={
                        "mean": EvalMetric(name="mean", value=mean(scored) if scored else 0.0)
                    },
                )
            ],
        ),
        stats=EvalStats(started_at=started, completed_at=ended, model_usage={model: usage}),
        samples=samples,
    )


def sample(transcript: Transcript, epoch: int, model: str) -> EvalSample:
    """One case in one seed as an Inspect sample."""
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    case, score, run = transcript.case, transcript.score, transcript.run
    final = next((e.data.get("text") for e in transcript.events if e.kind == "final"), None)
    return EvalSample(
        id=case.case_id,
        epoch=epoch,
        input=case.prompt,
        target=case.expected,
        messages=messages(transcript),
        output=ModelOutput.from_content(model, str(final or run.final_text or "")),
        scores=None
        if score.score is None
        else {
            SCORER: Score(
                value=score.score,
                answer=score.answer,
                explanation=score.reason,
                metadata={
                    "exact": score.exact,
                    "trace": score.trace,
                    "judged": score.judged,
                    "label": score.label,
                    "failed_checks": list(score.failed_checks),
                    "security_violation": score.security_violation,
                },
            )
        },
        metadata={
            "seed": score.seed,
            "category": case.category,
            "core": case.core,
            "answer_kind": case.answer_kind,
            "tolerance": case.tolerance,
            "status": score.status,
            "end_reason": run.end_reason,
            "guard_firings": dict(run.guard_firings),
            "cost_usd": str(run.cost_usd),
            "run_id": run.run_id,
            "settings_hash": run.settings_hash,
            "call_ids": list(run.call_ids),
        },
        model_usage={
            model: ModelUsage(
                input_tokens=run.input_tokens,
                output_tokens=run.output_tokens,
                total_tokens=run.input_tokens + run.output_tokens,
            )
        },
        total_time=run.elapsed_ms / 1000,
    )


def messages(transcript: Transcript) -> list[ChatMessage]:
    """The conversation as Inspect messages: the prompt, each reply with the tool calls it
    made (ids from the recorded calls), each tool result."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall, ToolCallError

    shown: list[ChatMessage] = [ChatMessageUser(content=transcript.case.prompt)]
    assistant: ChatMessageAssistant | None = None
    for event in transcript.events:
        data = event.data
        if event.kind == "model_reply":
            assistant = ChatMessageAssistant(content=str(data.get("text") or ""), tool_calls=[])
            shown.append(assistant)
        elif event.kind == "tool_call" and assistant is not None:
            arguments = data.get("arguments")
            assert assistant.tool_calls is not None
            assistant.tool_calls.append(
                ToolCall(
                    id=str(data.get("call_id")),
                    function=str(event.tool),
                    arguments=arguments if isinstance(arguments, dict) else {},
                    parse_error=None
                    if isinstance(arguments, dict)
                    else f"arguments not read: {data.get('raw_arguments')}",
                )
            )
        elif event.kind == "tool_result":
            shown.append(
                ChatMessageTool(
                    content=str(data.get("text") or ""),
                    tool_call_id=str(data.get("call_id")),
                    function=event.tool,
                    error=ToolCallError("unknown", str(data.get("error_kind")))
                    if data.get("is_error")
                    else None,
                )
            )
    return shown

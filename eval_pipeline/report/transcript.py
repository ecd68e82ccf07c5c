"""Why a case failed: its transcript, as stored, beside what it should have answered.

A transcript is one case run (its latest attempt) in one lane for one model and seed:
the prompt, every model reply with its label and stop reason, every tool call with its
arguments and result, every guard firing and recorded write, the final reply, the answer
read from it against the expected answer, each tier's score, and the run's cost. It is read
from the warehouse (the same rows the scores were computed from) and printed as text
(`evalp show`) or as a page of the report.
"""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import duckdb

from eval_pipeline.cases.case import Case
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.lane_records import CaseRun, TraceEvent
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.score import CaseScore, failed, failing_tier

MAX_SHOWN_CHARS = 2_000
"""A tool result or reply longer than this is cut, saying how much was left out (a run_sql
result can be megabytes)."""


class TranscriptError(EvalPipelineError):
    """The case, model, seed or lane asked for has no stored run."""


class Transcript(FrozenRecord):
    case: Case
    score: CaseScore
    run: CaseRun
    events: tuple[TraceEvent, ...]


def _cut(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" … ({len(text) - limit:,} more characters, not shown)"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def transcript_blocks(transcript: Transcript) -> list[tuple[str, str]]:
    """The transcript as (heading, body) blocks in order: what the text and the HTML
    renderings both show."""
    case, score, run = transcript.case, transcript.score, transcript.run
    tolerance = f" (± {case.tolerance})" if case.tolerance != "0" else ""
    guards = ", ".join(f"{name}×{count}" for name, count in sorted(run.guard_firings.items()))
    blocks = [
        (
            "outcome",
            f"score {'–' if score.score is None else f'{score.score:.2f}'} · "
            f"{'failed at: ' + failing_tier(score) if failed(score) else 'passed'}\n"
            f"tiers: exact {_tier(score.exact)}, trace {_tier(score.trace)}, judged "
            f"{_tier(score.judged)}; final call label {score.label or '–'}; "
            f"security violation {'yes' if score.security_violation else 'no'}\n"
            f"reason: {score.reason or '–'}",
        ),
        (
            "answer",
            f"expected ({case.answer_kind}){tolerance}: {case.expected}\n"
            f"read from the reply: {score.answer if score.answer is not None else '– (none read)'}",
        ),
        (
            "run",
            f"status {run.status}, end reason {run.end_reason}; {run.turns} turn(s), "
            f"{run.tool_calls} tool call(s); guards fired: {guards or 'none'}\n"
            f"cost {run.cost_usd.normalize():f} USD, "
            f"{run.input_tokens + run.output_tokens:,} tokens, "
            f"{len(run.call_ids)} model call(s), attempt {run.attempt}, "
            f"{run.elapsed_ms / 1000:.1f} s; run {run.run_id}, fixture set {run.fixture_id}",
        ),
        ("prompt", case.prompt),
    ]
    for event in transcript.events:
        blocks.append(_event_block(event))
    return blocks


def _tier(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _event_block(event: TraceEvent) -> tuple[str, str]:
    data = event.data
    turn = f"turn {event.turn}"
    if event.kind == "model_reply":
        calls = "".join(
            f"\n→ {call.get('name')} {_cut(str(call.get('arguments')), 500)}"
            for call in data.get("tool_calls") or []
        )
        text = data.get("text")
        return (
            f"{turn} · model reply ({data.get('status')}, label {data.get('label') or '–'}, "
            f"stop {data.get('stop_kind')})",
            (_cut(text) if text else "(no text)") + calls,
        )
    if event.kind == "tool_call":
        repairs = data.get("repairs") or []
        return (
            f"{turn} · tool call {event.tool}",
            _cut(str(data.get("raw_arguments")), 1_000)
            + (f"\nrepaired: {'; '.join(map(str, repairs))}" if repairs else ""),
        )
    if event.kind == "tool_result":
        error = f" ERROR {data.get('error_kind')}" if data.get("is_error") else ""
        return (
            f"{turn} · tool result {event.tool}{error} ({data.get('elapsed_ms')} ms)",
            _cut(str(data.get("text"))),
        )
    if event.kind == "guard":
        detail = {k: v for k, v in data.items() if k not in ("guard", "action")}
        return (
            f"{turn} · guard {data.get('guard')}: {data.get('action')}",
            _json(detail) if detail else "",
        )
    if event.kind == "write":
        allowed = "allowed" if data.get("allowed") else "NOT ALLOWED"
        return (
            f"{turn} · write by {event.tool} (dry run, never executed; {allowed})",
            _cut(_json(data.get("request")), 1_000),
        )
    return (
        f"{turn} · final ({data.get('status')}, {data.get('end_reason')})",
        _cut(str(data.get("text"))) if data.get("text") else "(no final text)",
    )


def title(transcript: Transcript) -> str:
    s = transcript.score
    return f"{s.case_id} ({s.category}) · {s.model} · {s.lane} lane · seed {s.seed}"


def transcript_text(transcript: Transcript) -> str:
    """The transcript for a terminal."""
    lines = [title(transcript), "=" * min(len(title(transcript)), 100)]
    for heading, body in transcript_blocks(transcript):
        lines.append(f"[{heading}]")
        lines += [f"  {line}" for line in body.splitlines()] if body else []
    return "\n".join(lines)


def transcript_html(transcript: Transcript, back: str = "") -> str:
    """The transcript as one HTML page of the report (`back`: the link to the report)."""
    heading = html.escape(title(transcript))
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{heading}</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:60em;margin:1em auto;"
        "padding:0 1em}pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;"
        "padding:.5em;margin:.2em 0 1em}h2{font-size:1em;margin:.8em 0 0}"
        ".failed{color:#b00}</style></head><body>",
        f"<p><a href='{html.escape(back)}'>← report</a></p>" if back else "",
        f"<h1>{heading}</h1>",
    ]
    for name, body in transcript_blocks(transcript):
        css = " class='failed'" if name == "outcome" and failed(transcript.score) else ""
        parts.append(f"<h2{css}>{html.escape(name)}</h2><pre>{html.escape(body)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def transcript_path(score: CaseScore) -> str:
    """Where a transcript page sits in the report's folder (relative)."""
    safe = [re.sub(r"[^A-Za-z0-9._-]+", "_", part) for part in (score.lane, score.model)]
    case = re.sub(r"[^A-Za-z0-9._-]+", "_", score.case_id)
    return f"transcripts/{safe[0]}/{safe[1]}/{case}-seed{score.seed}.html"


def read_transcripts(
    con: duckdb.DuckDBPyConnection,
    cases: Mapping[str, Case],
    scores: Iterable[CaseScore],
) -> list[Transcript]:
    """The stored transcript behind each of `scores` (one read per partition)."""
    from eval_pipeline.scoring.score_tables import read_partition

    wanted: dict[tuple[str, str, int], list[CaseScore]] = defaultdict(list)
    for score in scores:
        wanted[(score.lane, score.model, score.seed)].append(score)
    found: list[Transcript] = []
    for (lane, model, seed), chosen in sorted(wanted.items()):
        inputs = read_partition(con, lane, model, seed)
        runs = {run.case_id: run for run in inputs.runs}
        for score in chosen:
            run = runs.get(score.case_id)
            case = cases.get(score.case_id)
            if run is None or case is None:
                raise TranscriptError(
                    f"{score.case_id} in {lane}/{model}/{seed}: "
                    + ("no stored run" if run is None else "not in the current fixture set")
                )
            events = inputs.events.get((run.run_id, run.case_id, run.attempt), [])
            found.append(Transcript(case=case, score=score, run=run, events=tuple(events)))
    return found


def show_case(
    con: duckdb.DuckDBPyConnection,
    cases: Mapping[str, Case],
    scores: Sequence[CaseScore],
    case_id: str,
    model: str,
    lane: str,
    seeds: Sequence[int] = (),
) -> list[Transcript]:
    """`evalp show`: the case's transcripts for the model in the lane (every stored seed,
    or `seeds`); what is missing is named with what is stored."""
    if case_id not in cases:
        near = sorted(c for c in cases if c.split("-")[0] == case_id.split("-")[0])[:5]
        raise TranscriptError(
            f"no case {case_id!r} in the current fixture set"
            + (f" (e.g. {', '.join(near)})" if near else "")
        )
    chosen = [
        s
        for s in scores
        if s.case_id == case_id
        and s.model == model
        and s.lane == lane
        and (not seeds or s.seed in seeds)
    ]
    if not chosen:
        stored = sorted({f"{s.model}:{s.lane}" for s in scores})
        raise TranscriptError(
            f"no stored score of {case_id} for {model} in the {lane} lane"
            + (f" seeds {','.join(map(str, seeds))}" if seeds else "")
            + f"; stored: {', '.join(stored) if stored else 'none'}"
        )
    return read_transcripts(con, cases, sorted(chosen, key=lambda s: s.seed))

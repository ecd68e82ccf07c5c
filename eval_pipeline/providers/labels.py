"""Six labels per model call, yield and accuracy-on-yield.

A call is labelled, in this order of precedence:

1. ``drop`` — the path failed: connection error, timeout, 429 or 5xx, after retries, a
   reply larger than the config's `max_reply_bytes` (``oversize``, not retried), or the
   process sending it died with the attempt in flight (``interrupted``); the cause is
   kept. A 4xx caused by our own malformed request is *not* a drop: it is
   a harness error, reported apart and unlabelled.
2. ``truncated`` — the stop reason says the reply was cut off, whatever its prefix holds
   (even nothing: a reply that ran out of tokens before any visible text is truncated).
3. ``empty`` — a 200 with nothing in it: empty or unparsable body, no choices/content,
   no text and no tool calls.
4. ``schema`` — a reply in the wrong shape: text with no ANSWER or ABSTAIN tag (read by
   :mod:`eval_pipeline.cases.readers`, the same reader the scorers use), a tool call whose
   arguments are not a JSON object or break the tool's schema, a call to a tool that was
   not offered.
5. ``wrong`` / 6. ``right`` — a well-formed reply, judged by a grader.

Yield is (right + wrong) / labelled calls; accuracy-on-yield is right / (right + wrong).
Schema failures count in neither term of accuracy, so the summary reports their rate
next to it (a model that reliably drops a required field must not become invisible).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any, Literal, Protocol

from eval_pipeline.cases.case import AnswerKind
from eval_pipeline.cases.readers import (
    AnswerTextReader,
    answer_text,
    canonical_json,
    read_answer_line,
    read_value,
)
from eval_pipeline.cases.schema_check import schema_problem
from eval_pipeline.providers.types import ModelResponse, ToolCall, ToolSpec
from eval_pipeline.records import FrozenRecord

Label = Literal["drop", "empty", "truncated", "schema", "wrong", "right"]
LABELS: tuple[Label, ...] = ("drop", "empty", "truncated", "schema", "wrong", "right")

CallStatus = Literal["ok", "retried", "infra_error", "harness_error", "budget_stopped"]
"""ok: a reply landed; retried: a retryable failure that was retried (not final);
infra_error: retryable failures until the retry bounds (‡); harness_error: our own request
was refused (4xx); budget_stopped: refused by the budget before sending (†)."""

FailureCause = Literal[
    "connect", "timeout", "429", "5xx", "oversize", "interrupted", "harness_4xx", "budget"
]
DropCause = Literal["connect", "timeout", "429", "5xx", "oversize", "interrupted"]
DROP_CAUSES: tuple[DropCause, ...] = ("connect", "timeout", "429", "5xx", "oversize", "interrupted")
"""`oversize`: a 2xx reply larger than the config's `max_reply_bytes`, stopped while it was
read (the provider's or the path's fault: a model cannot exceed its output limit, and a
retry would most likely read the same again, so it is not retried). `interrupted`: the
process that sent the attempt ended before its reply landed (the journal holds the
attempt's pre-send record and nothing after it)."""

STATUS_MARKS: Mapping[str, str] = {"infra_error": "‡", "budget_stopped": "†"}
"""How a case's status is shown in tables instead of a score: never as a zero."""


def extract_answer(text: str | None) -> str | None:
    """The answer a reply gives on its final ANSWER/ABSTAIN line (one reader for the
    classifier and the scorers: :func:`eval_pipeline.cases.readers.answer_text`)."""
    return answer_text(text)


class GradeInput(FrozenRecord):
    """What a grader sees: the complete reply and the answer read from it."""

    response: ModelResponse
    answer: str | None


Grader = Callable[[GradeInput], bool]
AnswerReader = AnswerTextReader
"""Reads a reply's answer for the classifier: a value, or the problem that makes the reply
a schema failure (no answer line; a JSON answer breaking its schema)."""


def expect_answer(expected: str, kind: AnswerKind = "text", currency: str = "USD") -> Grader:
    """Right when the reply's answer, read as `kind` (money, percent, ids...), equals
    `expected` read the same way: `$2,480.10` is `2480.10`, `15000.00` is `15000`."""
    if kind == "json":
        structure = canonical_json(json.loads(expected))
        return lambda reply: reply.answer == structure
    target = read_value(kind, expected.removeprefix("ANSWER:"), currency=currency).value

    def grade(reply: GradeInput) -> bool:
        if reply.answer is None or reply.answer.startswith("ABSTAIN"):
            return False
        return read_value(kind, reply.answer, currency=currency).value == target

    return grade


def expect_tool_call(name: str, arguments: Mapping[str, Any]) -> Grader:
    """Right when the first tool call has this name and these arguments, as a structure."""
    wanted = json.loads(json.dumps(arguments))

    def grade(reply: GradeInput) -> bool:
        if not reply.response.tool_calls:
            return False
        first = reply.response.tool_calls[0]
        try:
            return first.name == name and first.parsed_arguments() == wanted
        except ValueError:
            return False

    return grade


class LabelResult(FrozenRecord):
    """A call's label (None: unlabelled harness error / budget stop, or not graded)."""

    label: Label | None
    reason: str
    drop_cause: DropCause | None = None
    answer: str | None = None


def tool_call_problem(call: ToolCall, tools: Iterable[ToolSpec]) -> str | None:
    """Why a tool call is malformed (tool not offered, arguments invalid), or None."""
    return call_problem(call.name, call.arguments, tools)


def call_problem(name: str, raw_arguments: str, tools: Iterable[ToolSpec]) -> str | None:
    """:func:`tool_call_problem` as a pure function of the call's name and raw arguments
    (so a bulk re-label can decide each distinct call once)."""
    spec = next((tool for tool in tools if tool.name == name), None)
    if spec is None:
        return f"tool {name!r} was not offered"
    try:
        arguments = json.loads(raw_arguments)
    except ValueError:
        return f"arguments of {name!r} are not valid JSON"
    if not isinstance(arguments, dict):
        return f"arguments of {name!r} are not a JSON object"
    problem = schema_problem(arguments, spec.input_schema)
    return f"arguments of {name!r}: {problem}" if problem else None


def _drop_cause(cause: FailureCause | None) -> DropCause | None:
    for known in DROP_CAUSES:
        if cause == known:
            return known
    return None


def classify(
    status: CallStatus,
    response: ModelResponse | None,
    tools: Iterable[ToolSpec] = (),
    *,
    failure_cause: FailureCause | None = None,
    grader: Grader | None = None,
    read_answer: AnswerReader = read_answer_line,
) -> LabelResult:
    """Label one call's final outcome; precedence drop > truncated > empty > schema > graded.

    Without a grader a well-formed reply gets no label (``label=None``, "not graded"), so
    the structural labels can be stored now and wrong/right decided later from the body.
    """
    if status in ("harness_error", "budget_stopped"):
        return LabelResult(label=None, reason=status)
    if status in ("infra_error", "retried"):
        cause = _drop_cause(failure_cause)
        return LabelResult(label="drop", reason=f"drop: {cause}", drop_cause=cause)
    if response is not None and response.truncated:
        # Cut off at the limit, even with nothing visible yet: it ran out of tokens.
        return LabelResult(
            label="truncated", reason=f"truncated: stop reason {response.finish_reason!r}"
        )
    if response is None or response.body_problem is not None:
        body = response.body_problem if response else "no response"
        return LabelResult(label="empty", reason=f"empty: {body}")
    offered = tuple(tools)
    for call in response.tool_calls:
        problem = tool_call_problem(call, offered)
        if problem:
            return LabelResult(label="schema", reason=f"schema: {problem}")
    read = read_answer(response.text)
    answer = read.value
    if not response.tool_calls and answer is None:
        return LabelResult(label="schema", reason=f"schema: {read.problem}")
    if grader is None:
        return LabelResult(label=None, reason="well-formed, not graded", answer=answer)
    right = grader(GradeInput(response=response, answer=answer))
    return LabelResult(
        label="right" if right else "wrong",
        reason="graded right" if right else "graded wrong",
        answer=answer,
    )


class LabelledCall(Protocol):
    """What a summary reads from a call envelope."""

    @property
    def status(self) -> CallStatus: ...

    @property
    def label(self) -> Label | None: ...

    @property
    def failure_cause(self) -> FailureCause | None: ...


class LabelSummary(FrozenRecord):
    """Counts over a set of call envelopes (every attempt), and the rates made from them."""

    labels: dict[str, int]
    drop_causes: dict[str, int]
    ungraded: int
    harness_errors: int
    budget_stopped: int
    retries: int
    retry_causes: dict[str, int]

    @property
    def labelled(self) -> int:
        return sum(self.labels.values())

    @property
    def infra_errors(self) -> int:
        """Calls that still failed after retries (‡): the drops."""
        return self.labels.get("drop", 0)

    @property
    def yield_rate(self) -> Fraction | None:
        """(right + wrong) / labelled calls: how much of the traffic could be graded."""
        graded = self.labels.get("right", 0) + self.labels.get("wrong", 0)
        return Fraction(graded, self.labelled) if self.labelled else None

    @property
    def accuracy_on_yield(self) -> Fraction | None:
        """right / (right + wrong): drops, empties, truncations and schema errors excluded."""
        graded = self.labels.get("right", 0) + self.labels.get("wrong", 0)
        return Fraction(self.labels.get("right", 0), graded) if graded else None

    @property
    def schema_rate(self) -> Fraction | None:
        """schema / labelled: reported beside accuracy, which cannot see it."""
        if not self.labelled:
            return None
        return Fraction(self.labels.get("schema", 0), self.labelled)


def summarize(calls: Iterable[LabelledCall]) -> LabelSummary:
    """Labels of final attempts, with retries (non-final attempts) counted apart from drops."""
    labels: Counter[str] = Counter({label: 0 for label in LABELS})
    drops: Counter[str] = Counter()
    retry_causes: Counter[str] = Counter()
    ungraded = harness = budget = retries = 0
    for call in calls:
        if call.status == "retried":
            retries += 1
            retry_causes[str(call.failure_cause)] += 1
        elif call.status == "harness_error":
            harness += 1
        elif call.status == "budget_stopped":
            budget += 1
        elif call.label is None:
            ungraded += 1
        else:
            labels[call.label] += 1
            if call.label == "drop":
                drops[str(call.failure_cause)] += 1
    return LabelSummary(
        labels=dict(labels),
        drop_causes=dict(drops),
        ungraded=ungraded,
        harness_errors=harness,
        budget_stopped=budget,
        retries=retries,
        retry_causes=dict(retry_causes),
    )


def naive_pass(http_status: int | None, body: str | None, expected_text: str) -> bool:
    """The boolean this module replaces: HTTP 200 and the expected text somewhere in the body."""
    return http_status == 200 and body is not None and expected_text in body


class FailedCall(Protocol):
    """What a cause summary reads from a call envelope."""

    @property
    def status(self) -> CallStatus: ...

    @property
    def http_status(self) -> int | None: ...

    @property
    def failure_detail(self) -> str | None: ...


class FailureGroup(FrozenRecord):
    """Final attempts that failed alike: a status, the HTTP status and the detail (the
    server's own message for a refusal), with how many calls ended so."""

    status: CallStatus
    http_status: int | None
    detail: str
    calls: int

    def line(self) -> str:
        return f"{self.calls} call(s) ended {self.status}: {self.detail}"


def top_failures(
    calls: Iterable[FailedCall], redact: Callable[[str], str], limit: int = 3
) -> tuple[FailureGroup, ...]:
    """The most common ways final attempts failed (infrastructure or harness errors; not
    retried attempts, not budget stops), most frequent first, each detail passed through
    `redact` (a provider's refusal may echo a key)."""
    counts: Counter[tuple[CallStatus, int | None, str]] = Counter()
    for call in calls:
        if call.status in ("infra_error", "harness_error"):
            counts[(call.status, call.http_status, redact(call.failure_detail or "no detail"))] += 1
    return tuple(
        FailureGroup(status=status, http_status=http, detail=detail, calls=n)
        for (status, http, detail), n in counts.most_common(limit)
    )

"""Call envelopes: one record per attempt, success or failure, written as it lands.

The journal is a JSON-lines file per run, opened for append and flushed after every line,
so a crash loses nothing that landed; it is loaded into the warehouse table
`runs.call_envelopes` in batches (see :mod:`eval_pipeline.warehouse.envelopes`), which
keeps the hot path free of the single-writer DuckDB file. The raw response body is kept
so that any run can be re-graded without calling a model; request headers are never kept.
"""

from __future__ import annotations

import json
import operator
import os
import threading
from collections.abc import Iterable, Iterator, Set
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Literal, get_args, get_origin

from pydantic import ValidationError

from eval_pipeline.providers.errors import JournalError
from eval_pipeline.providers.labels import CallStatus, DropCause, FailureCause, Label
from eval_pipeline.providers.types import ModelRequest, ModelResponse
from eval_pipeline.records import FrozenRecord

CacheStatus = Literal["off", "miss", "hit"]

VOLATILE_FIELDS: frozenset[str] = frozenset(
    {"run_id", "envelope_id", "started_at", "elapsed_ms", "cache_status"}
)
"""Fields that differ between a recorded run and its replay: identity, timing, provenance."""


class CallEnvelope(FrozenRecord):
    """One attempt of one model call, as recorded."""

    envelope_id: str
    run_id: str
    call_id: str
    attempt: int
    final: bool
    request_hash: str
    lane: str
    case_id: str
    turn: int
    seed: int | None
    replicate: int
    model: str
    provider: str
    api: str
    wire_model: str
    started_at: datetime
    call_day: date
    elapsed_ms: float
    status: CallStatus
    http_status: int | None
    failure_cause: FailureCause | None
    failure_detail: str | None
    retry_after_ms: int | None
    backoff_ms: float | None
    finish_reason: str | None
    stop_kind: str | None
    input_tokens: int | None
    output_tokens: int | None
    price_model: str
    price_tier: str | None
    cost_usd: Decimal | None
    reserved_usd: Decimal | None
    label: Label | None
    label_reason: str | None
    drop_cause: DropCause | None
    answer: str | None
    cache_status: CacheStatus
    request_json: str
    response_body: str | None
    response_json: str | None

    def request(self) -> ModelRequest:
        """The request as sent, rebuilt from the stored JSON (to re-run or re-grade)."""
        return ModelRequest.model_validate_json(self.request_json)

    def response(self) -> ModelResponse | None:
        """The response as read, rebuilt from the stored JSON."""
        if self.response_json is None:
            return None
        return ModelResponse.model_validate_json(self.response_json)

    def stable_view(self) -> dict[str, object]:
        """The envelope without its volatile fields, for comparing a run with its replay."""
        return self.model_dump(exclude=set(VOLATILE_FIELDS))


def _holds_text(annotation: object) -> bool:
    """Whether a field annotated so can hold a string (str, a Literal of strings, or a
    union with either)."""
    if annotation is str:
        return True
    if get_origin(annotation) is Literal:
        return any(isinstance(value, str) for value in get_args(annotation))
    return any(_holds_text(arg) for arg in get_args(annotation))


TEXT_FIELDS: tuple[str, ...] = tuple(
    name for name, info in CallEnvelope.model_fields.items() if _holds_text(info.annotation)
)
"""Every field of an envelope that can hold text: what redaction must search."""
envelope_texts = operator.attrgetter(*TEXT_FIELDS)
"""The text fields' values of an envelope, as a tuple (None where a field is unset)."""


JOURNAL_NAME = "envelopes.jsonl"
"""A run's envelope journal's file name, in the run's folder (`runs/<run id>/`)."""


class EnvelopeJournal:
    """Append-only JSON-lines journal; each envelope is in the OS as it lands (one
    unbuffered write per line, no user-space buffer to flush).

    `fsync=True` also forces each line to the disk (survives power loss, costs ~ms a line).
    The file is created with its first line: a session that makes no call leaves no
    journal, not an empty one that no record names and so nothing would ever load.
    """

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._closed = False
        self.written = 0

    def append(self, envelope: CallEnvelope) -> None:
        self.append_json(envelope_json(envelope))

    def append_json(self, line: bytes) -> None:
        """Append one envelope already serialized to UTF-8 JSON (`envelope_json`)."""
        data = line + b"\n"
        with self._lock:
            if self._closed:
                raise JournalError(f"journal {self.path} is closed")
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # Unbuffered: each line is one write(2) of its bytes, in the OS when it returns.
                self._file = self.path.open("ab", buffering=0)
            done = self._file.write(data)
            while done < len(data):  # a regular file takes it whole; a short write goes on
                done += self._file.write(data[done:])
            if self._fsync:
                os.fsync(self._file.fileno())
            self.written += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> EnvelopeJournal:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def envelope_json(envelope: CallEnvelope) -> bytes:
    """`envelope.model_dump_json()` as the UTF-8 bytes pydantic makes (not decoded to be
    encoded again on the way to the journal)."""
    return CallEnvelope.__pydantic_serializer__.to_json(envelope)


def read_journal(path: Path) -> Iterator[CallEnvelope]:
    """Envelopes of a journal, one per attempt, in the order attempts were first written.

    An attempt is journaled twice: a pre-send record (an interrupted attempt) and then its
    own envelope, which supersedes it; the last line of an envelope id wins, so an attempt
    whose process died in flight reads back as interrupted. A torn last line (crash
    mid-write) is skipped.
    """
    with path.open(encoding="utf-8") as handle:
        lines = handle.readlines()
    latest: dict[str, CallEnvelope] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            envelope = CallEnvelope.model_validate_json(line)
        except ValidationError as error:
            torn_tail = number == len(lines) and not line.endswith("\n")
            if torn_tail:
                break
            raise JournalError(f"{path}:{number}: not a call envelope: {error}") from error
        latest[envelope.envelope_id] = envelope
    yield from latest.values()


def envelope_row(envelope: CallEnvelope) -> dict[str, object]:
    """The envelope as a flat JSON-compatible row (decimals as strings)."""
    row: dict[str, object] = json.loads(envelope.model_dump_json())
    return row


UNGRADED_HERE = "graded by the scores"
"""A final answer's label before scoring: right or wrong is the scores' to say."""


def split_labels(
    envelopes: Iterable[CallEnvelope], final_call_ids: Set[str]
) -> dict[str, dict[str, int]]:
    """The labels of a lane's calls (each call's last attempt), split: the calls that gave
    a case its final answer (a drop, empty, truncated or schema label is the call's own;
    right or wrong is decided by the scores, so such a call counts as `graded by the
    scores` here), and the calls inside the loop (tool calls, labelled only for being
    well-formed, never graded)."""
    last: dict[str, tuple[int, str | None]] = {}
    for envelope in envelopes:
        seen = last.get(envelope.call_id)
        if seen is None or envelope.attempt >= seen[0]:
            last[envelope.call_id] = (envelope.attempt, envelope.label)
    split: dict[str, dict[str, int]] = {"final_answer": {}, "inside_the_loop": {}}
    for call_id, (_, label) in sorted(last.items()):
        final = call_id in final_call_ids
        if label is None and not final:
            continue
        group = split["final_answer" if final else "inside_the_loop"]
        shown = label or UNGRADED_HERE
        group[shown] = group.get(shown, 0) + 1
    return split

"""Append-only JSON-lines journals of frozen records: written as things happen, read back
after a crash.

A journal is flushed line by line, so a killed process loses at most the line it was
writing; reading skips a torn last line and nothing else. The lanes journal their case
outcomes and trace events this way and load them into the warehouse idempotently.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from eval_pipeline.errors import EvalPipelineError

RecordT = TypeVar("RecordT", bound=BaseModel)


class JournalError(EvalPipelineError):
    """A journal is closed, or holds a line that is not a record of its kind."""


class Journal(Generic[RecordT]):
    """Appends records as JSON lines, flushing each (``fsync=True`` also syncs to disk)."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = path.open("a", encoding="utf-8")
        self.written = 0

    def append(self, record: RecordT) -> None:
        line = record.model_dump_json() + "\n"
        with self._lock:
            if self._file is None:
                raise JournalError(f"journal {self.path} is closed")
            self._file.write(line)
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
            self.written += 1

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Journal[RecordT]:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def read_records(path: Path, model: type[RecordT]) -> Iterator[RecordT]:
    """The records of a journal in order; a torn last line (a crash mid-write) is skipped,
    any other unreadable line raises JournalError naming the file and line."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield model.model_validate_json(line)
        except ValidationError as error:
            if number == len(lines) and not line.endswith("\n"):
                return
            raise JournalError(f"{path}:{number}: not a {model.__name__}: {error}") from error

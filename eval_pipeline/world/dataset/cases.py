"""Reading a user's case file (JSONL or CSV) into the pipeline's frozen cases.

Each row is a prompt with its exact expected answer: `id`, `prompt`, `expected`, `kind`
(the answer reader: integer, money, percent, date, text, id_list, yes_no, abstain), and
optionally `tolerance`, `category`, `core`, `expected_first_call` ({"name": ..., "arguments":
{...}}, the model lane's expected first action) and `trace_checks`. A prompt without an
`ANSWER:` line gets one for its kind. Any row that cannot be read is an error naming the
file, the row and the field: a typo never freezes a smaller suite.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, get_args

from pydantic import Field, ValidationError, field_validator

from eval_pipeline.cases.case import CATEGORY_NAME, AnswerKind, Case, ExpectedToolCall
from eval_pipeline.config import describe_validation_error
from eval_pipeline.errors import ConfigError
from eval_pipeline.records import FrozenRecord

MAX_FILE_BYTES = 64 * 1024 * 1024
"""A case file larger than this is refused unread."""
MAX_CASES = 100_000
CASE_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
CONTRACTS: dict[str, str] = {
    "money": "End with one line: ANSWER: $<amount in USD, to the cent>",
    "integer": "End with one line: ANSWER: <integer>",
    "percent": "End with one line: ANSWER: <percent>",
    "date": "End with one line: ANSWER: <date, YYYY-MM-DD>",
    "text": "End with one line: ANSWER: <text>",
    "id_list": "End with one line: ANSWER: <comma-separated ids>",
    "yes_no": "End with one line: ANSWER: <yes or no>",
    "abstain": "End with one line: ANSWER: <answer, or ABSTAIN: <reason> if it cannot be known>",
}
"""The output contract appended to a prompt that states none, by answer kind."""
DATASET_TEMPLATE = "dataset"


class DatasetCase(FrozenRecord):
    """One row of a case file, as the user wrote it."""

    id: str = Field(pattern=CASE_ID)
    prompt: str = Field(min_length=1, max_length=100_000)
    expected: str
    kind: AnswerKind
    tolerance: str = "0"
    category: str = "general"
    core: bool = False
    expected_first_call: ExpectedToolCall | None = None
    trace_checks: tuple[str, ...] = ()

    @field_validator("kind")
    @classmethod
    def _no_json(cls, value: str) -> str:
        if value == "json":
            raise ValueError("json answers need an answer schema, which a case file cannot give")
        return value

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if not CATEGORY_NAME.fullmatch(value):
            raise ValueError(f"category {value!r}: lower-case letters, digits and underscores")
        return value

    def as_case(self, source: str, row: int) -> Case:
        prompt = self.prompt.rstrip()
        if "ANSWER:" not in prompt.splitlines()[-1]:
            prompt = f"{prompt}\n{CONTRACTS[self.kind]}"
        return Case(
            case_id=self.id,
            category=self.category,
            prompt=prompt,
            answer_kind=self.kind,
            expected=self.expected,
            tolerance=self.tolerance,
            tiers=("exact", "trace") if self.trace_checks else ("exact",),
            trace_checks=self.trace_checks,
            expected_first_call=self.expected_first_call,
            core=self.core,
            template=DATASET_TEMPLATE,
            resolver=f"dataset-file:{source}",
            params={"row": str(row)},
        )


def _rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    if path.suffix.lower() == ".jsonl":
        rows: list[tuple[int, dict[str, Any]]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                raise ConfigError(f"{path}:{number}: not a JSON object: {error}") from error
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{number}: not a JSON object")
            rows.append((number, row))
        return rows
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        found: list[tuple[int, dict[str, Any]]] = []
        for row in reader:
            if None in row:
                raise ConfigError(f"{path}:{reader.line_num}: more fields than the header names")
            found.append((reader.line_num, _csv_row(path, reader.line_num, row)))
        return found
    raise ConfigError(f"case file {path}: expected a .jsonl or .csv file")


def _csv_row(path: Path, line: int, row: dict[str, str]) -> dict[str, Any]:
    """A CSV row with empty cells left out and the structured columns parsed."""
    out: dict[str, Any] = {key: value for key, value in row.items() if value != ""}
    if "core" in out:
        flag = out["core"].strip().lower()
        if flag not in {"true", "false", "1", "0", "yes", "no"}:
            raise ConfigError(f"{path}:{line}: core: {out['core']!r} is not true or false")
        out["core"] = flag in {"true", "1", "yes"}
    for column in ("expected_first_call", "trace_checks"):
        if column in out:
            try:
                out[column] = json.loads(out[column])
            except ValueError as error:
                raise ConfigError(f"{path}:{line}: {column}: not JSON: {error}") from error
    return out


def read_case_file(path: Path) -> tuple[bytes, list[Case]]:
    """The file's bytes and its cases, in file order (ConfigError naming the row that is
    wrong: unreadable, an unknown field or kind, an expected answer its reader cannot
    read, a repeated id)."""
    from eval_pipeline.cases.readers import read_value

    if not path.is_file():
        raise ConfigError(f"case file not found: {path}")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"case file {path} is {size} bytes; at most {MAX_FILE_BYTES} are read")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(f"case file {path} is not UTF-8: {error}") from error
    rows = _rows(path, text)
    if not rows:
        raise ConfigError(f"case file {path} holds no case")
    if len(rows) > MAX_CASES:
        raise ConfigError(f"case file {path} holds {len(rows)} cases; at most {MAX_CASES}")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for number, row in rows:
        where = f"{path}:{number}"
        try:
            record = DatasetCase.model_validate(row)
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, where)) from error
        if record.id in seen:
            raise ConfigError(f"{where}: id {record.id!r} is also the id of row {seen[record.id]}")
        seen[record.id] = number
        read = read_value(record.kind, record.expected)
        if read.value is None:
            raise ConfigError(
                f"{where}: expected: {record.expected!r} cannot be read as a {record.kind} "
                f"answer ({read.problem})"
            )
        try:
            cases.append(record.as_case(path.name, number))
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, where)) from error
    return data, cases


__all__ = ["CONTRACTS", "DatasetCase", "read_case_file"]
_KINDS = get_args(AnswerKind)

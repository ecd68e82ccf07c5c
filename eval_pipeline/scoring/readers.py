"""Reading a model's final answer: where it put it, and what it means for the case's kind.

One reader per answer kind, used wherever an answer is read (the call classifier, the
scorers, the ablation), so the label stored at call time and the score agree:

- the final answer: the last ``ANSWER:`` or ``ABSTAIN:`` tag wherever it stands, its value
  running to the end of its line or to the next tag (``... ANSWER: $1,204.18 Actually,
  correcting: ANSWER: $1,250.00`` answers 1,250.00). At a line's start, after markdown
  marks, a tag is read in any case (``**ANSWER:**``, ``- answer:``); inside a line only
  in capitals and not inside a word (prose saying "my answer: ..." is not a tag). An
  ``ABSTAIN:`` alone or beside a placeholder answer (``ANSWER: N/A``, ``$0``, ``NO``,
  ``0``, ``ABSTAIN``) is an abstention, an abstention followed later by a real answer is
  not;
- money: a Decimal in the case's currency, whatever the symbols, separators and trailing
  zeros (``$2,480.10``, ``USD 2480.1``, ``2 480,10 €`` is refused only if it names another
  currency); percentages, counts, dates, identifiers and text, sets of line ids, YES/NO.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from eval_pipeline.fixtures.case import AnswerKind, Case
from eval_pipeline.providers.schema_check import schema_problem
from eval_pipeline.records import FrozenRecord

Placement = Literal["answer", "abstain", "none"]

ANSWER_TAGS: tuple[str, ...] = ("ANSWER", "ABSTAIN")
_TAGS = "|".join(ANSWER_TAGS)
_INSIDE_A_LINE = rf"(?<![^\W_])(?:{_TAGS})[\s*_`]*+:"
"""A tag inside a line: in capitals, not preceded by a letter or digit."""
_TAGGED = re.compile(
    rf"(?:^(?:[^\S\n]|[>*_\-#`])*+(?i:({_TAGS}))|(?<![^\W_])({_TAGS}))[\s*_`]*+:"
    rf"[\s*_`]*+(?P<value>.*?)(?=$|{_INSIDE_A_LINE})",
    re.MULTILINE,
)
"""One tag and its value: at a line's start in any case, or inside a line in capitals;
the value runs to the end of the line or to the next tag inside it (its trailing spaces
and marks are cut by `_trimmed`). Possessive runs, and a line start that stays on its
line, keep it linear: no run of spaces or marks is scanned again from each position."""
_MARKS = "*_`"
TAG_LETTERS: dict[str, str] = {
    "A": "aA",
    "B": "bB",
    "E": "eE",
    "I": "iIİı",
    "N": "nN",
    "R": "rR",
    "S": "sSſ",
    "T": "tT",
    "W": "wW",
}
"""Every character Python's `re.IGNORECASE` lets match each letter of the tags (a test
recomputes it over all of Unicode)."""
ANSWER_SUFFIX_REGEX = (
    r"(?sm)^[^\n]*?(?:"
    + "|".join("".join(f"[{TAG_LETTERS[c]}]" for c in tag) for tag in ANSWER_TAGS)
    + r").*"
)
"""A polars (Rust regex) pattern matching a reply from the start of the first line that
holds anything `_TAGGED` could read as a tag, to the end: `final_answer` (so
`answer_text` and `grade_answer` of a line-read case) gives the same for the match as for
the whole reply, and none when nothing matches. Reasoning before the answer lines is cut
off, so a bulk reader reads each distinct ending once. (Every tag `_TAGGED` reads, at a
line's start or inside a line, is tag-like letters on a line at or after the match's
first; the lines cut off hold none, and a tag at the ending's start sees the same
"nothing before it" as after the newline it had; no tag-like letters, no match.)"""
_PLACEHOLDERS = frozenset(
    {"", "n/a", "na", "none", "$0", "0", "no", "abstain", "-", "unknown", "null"}
)
_CURRENCY_WORDS: dict[str, str] = {
    "us$": "USD",
    "usd": "USD",
    "$": "USD",
    "eur": "EUR",
    "€": "EUR",
    "gbp": "GBP",
    "£": "GBP",
    "jpy": "JPY",
    "¥": "JPY",
    "yen": "JPY",
}
_CURRENCY_PATTERN = re.compile(r"us\$|usd|eur|gbp|jpy|yen|[$€£¥]", re.IGNORECASE)
_GROUPED = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)")
_CONTRACT_CURRENCY = re.compile(r"\$<amount in (USD)|<amount in ([A-Z]{3})>")


class FinalAnswer(FrozenRecord):
    """Where the model put its answer, and the raw text of that line's value."""

    placement: Placement
    raw: str | None


class ReadValue(FrozenRecord):
    """An answer's value read for a kind: `value` is canonical text, or `problem` says why
    the text is not an answer of that kind (a schema failure, not a wrong answer)."""

    value: str | None
    problem: str | None = None


def final_answer(text: str | None) -> FinalAnswer:
    """The final answer of a reply: its last tag (see the module docstring)."""
    placement, raw = _final(text)
    return FinalAnswer(placement=placement, raw=raw)


def _final(text: str | None) -> tuple[Placement, str | None]:
    """:func:`final_answer` as a plain tuple (the bulk re-label reads many replies)."""
    lines = [
        (_tag(m.group(1) or m.group(2)), _trimmed(m.group("value")))
        for m in _TAGGED.finditer(text or "")
    ]
    if not lines:
        return "none", None
    last_answer = max((i for i, (tag, _) in enumerate(lines) if tag == "ANSWER"), default=None)
    last_abstain = max((i for i, (tag, _) in enumerate(lines) if tag == "ABSTAIN"), default=None)
    if last_answer is not None:
        value = lines[last_answer][1]
        if value.strip().upper().startswith("ABSTAIN"):
            return "abstain", value
        if last_abstain is None:
            return "answer", value
        # beside an abstention, an answer counts only after it and only if it is no placeholder
        if last_answer > last_abstain and not _is_placeholder(value):
            return "answer", value
    assert last_abstain is not None
    return "abstain", lines[last_abstain][1]


def _trimmed(value: str) -> str:
    """A tag's value without the spaces and markdown marks after it, in one pass from the
    end (a pattern anchored at the line's end would rescan a long run from each of its
    characters). Those before it `_TAGGED` has already passed over."""
    end = len(value)
    while end and (value[end - 1].isspace() or value[end - 1] in _MARKS):
        end -= 1
    return value[:end]


def _tag(matched: str) -> str:
    """The tag a matched tag spells: by its second letter, since `re.IGNORECASE` (a tag at
    a line's start) also matches letters whose upper case is another (`ABSTAİN`.upper() is
    not `ABSTAIN`)."""
    return "ANSWER" if matched[1] in TAG_LETTERS["N"] else "ABSTAIN"


def _is_placeholder(value: str) -> bool:
    """A value filling an answer line, not an answer: N/A, NO, ABSTAIN, or a zero amount in
    any format ($0, 0.00, USD 0) — it only counts beside an ABSTAIN line."""
    text = value.strip().strip(".").lower()
    if text in _PLACEHOLDERS:
        return True
    number = _decimal(_CURRENCY_PATTERN.sub("", text))
    return number is not None and number == 0


def answer_text(text: str | None) -> str | None:
    """The answer a reply gives, as the call classifier stores it: the final ANSWER line's
    value, ``ABSTAIN: <reason>`` for an abstention, None when the reply gives neither."""
    placement, raw = _final(text)
    if placement == "abstain":
        return f"ABSTAIN: {raw or ''}".rstrip(": ").rstrip()  # "ABSTAIN" with no reason
    if placement == "answer":
        return raw or None
    return None


def case_currency(case: Case) -> str:
    """The currency a money case's output contract asks for (USD unless it names another)."""
    match = _CONTRACT_CURRENCY.search(case.prompt.splitlines()[-1])
    if match is None:
        return "USD"
    return match.group(1) or match.group(2)


def _decimal(text: str) -> Decimal | None:
    cleaned = text.strip().replace("\u2212", "-")
    negative = cleaned.startswith("(") and cleaned.endswith(")")
    cleaned = cleaned.strip("()").replace(" ", "").replace("\u202f", "").replace("\u00a0", "")
    if _GROUPED.fullmatch(cleaned):
        cleaned = cleaned.replace(",", "")
    if not _NUMBER.fullmatch(cleaned):
        return None
    try:
        number = Decimal(cleaned)
    except InvalidOperation:
        return None
    return -number if negative else number


def read_money(raw: str, currency: str) -> ReadValue:
    text = raw.strip().rstrip(".")
    named = {_CURRENCY_WORDS[m.group(0).lower()] for m in _CURRENCY_PATTERN.finditer(text)}
    if named - {currency}:
        return ReadValue(value=None, problem=f"names {', '.join(sorted(named))}, not {currency}")
    number = _decimal(_CURRENCY_PATTERN.sub("", text))
    if number is None:
        return ReadValue(value=None, problem=f"not an amount: {raw!r}")
    return ReadValue(value=format(number.normalize() if number else Decimal(0), "f"))


def read_value(kind: AnswerKind, raw: str, *, currency: str = "USD") -> ReadValue:
    """The canonical value of an answer of `kind` (Decimal text, ISO date, sorted ids...)."""
    text = raw.strip().strip("`").strip()
    if kind == "money":
        return read_money(text, currency)
    if kind in ("percent", "integer"):
        number = _decimal(text.rstrip(".").strip().rstrip("%"))
        if number is None:
            return ReadValue(value=None, problem=f"not a number: {raw!r}")
        if kind == "integer" and number != number.to_integral_value():
            return ReadValue(value=None, problem=f"not a whole number: {raw!r}")
        return ReadValue(value=format(number.normalize() if number else Decimal(0), "f"))
    if kind == "date":
        parsed = _date(text.rstrip("."))
        return (
            ReadValue(value=parsed.isoformat())
            if parsed
            else ReadValue(value=None, problem=f"not a date: {raw!r}")
        )
    if kind == "id_list":
        if text.strip(".").upper() == "NONE":  # an empty text, [] or () splits into no ids
            return ReadValue(value="")
        ids = re.split(r"[\s,;]+", text.strip("[]().").strip())
        if not all(re.fullmatch(r"\d+", i) for i in ids if i):
            return ReadValue(value=None, problem=f"not a list of line ids: {raw!r}")
        return ReadValue(value=",".join(str(i) for i in sorted({int(i) for i in ids if i})))
    if kind == "yes_no":
        word = text.strip(".!").strip().upper()
        if word in ("YES", "Y", "TRUE"):
            return ReadValue(value="YES")
        if word in ("NO", "N", "FALSE"):
            return ReadValue(value="NO")
        return ReadValue(value=None, problem=f"not YES or NO: {raw!r}")
    # text and identifiers: case, quotes, spacing and a final period do not matter
    unquoted = text.rstrip(".").strip().strip("\"'“”‘’").strip()
    return ReadValue(value=" ".join(unquoted.split()).casefold())


_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(?P<body>.*?)\n\s*```", re.DOTALL | re.IGNORECASE)


def _json_candidates(text: str) -> list[str]:
    """Where a structured answer may be, most specific first: the final ANSWER line's
    value, the last fenced block, the whole reply."""
    placement, raw = _final(text)
    found = [raw] if placement == "answer" and raw else []
    fenced = [m.group("body") for m in _FENCED_JSON.finditer(text)]
    return [*found, *fenced[-1:], text]


def canonical_json(value: Any) -> str:
    """One text per structure: key order, whitespace and number spelling do not matter."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def read_json_answer(text: str | None, schema: Mapping[str, Any]) -> ReadValue:
    """A JSON answer (structured output), wherever the reply put it, checked against the
    case's schema: a different layout of the same data reads the same; a reply that breaks
    the schema is a schema failure naming what broke; no JSON at all is none."""
    return _read_json(text, lambda candidate: _checked_json(candidate, schema))


JsonCheck = Callable[[str], tuple[str | None, str | None]]


def _read_json(text: str | None, check: JsonCheck) -> ReadValue:
    """:func:`read_json_answer`, each JSON candidate checked by `check` (`_checked_json`)."""
    problem = "no JSON answer in the reply"
    for candidate in _json_candidates(text or ""):
        stripped = candidate.strip()
        try:
            json.loads(stripped)
        except ValueError:
            continue
        value, broken = check(stripped)
        if broken is None:
            return ReadValue(value=value)
        problem = f"the JSON answer breaks its schema: {broken}"
    return ReadValue(value=None, problem=problem)


def _checked_json(candidate: str, schema: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(canonical JSON, None) for a JSON text that keeps the schema, (None, what broke)
    otherwise."""
    value = json.loads(candidate)
    broken = schema_problem(value, schema)
    return (canonical_json(value), None) if broken is None else (None, broken)


def reads_json(case: Case) -> bool:
    """Whether the case's answer is read as JSON against its schema (wherever the reply
    put it), not from the final ANSWER/ABSTAIN line."""
    return case.answer_schema is not None  # a Case has a schema exactly when its kind is json


def reader_for(case: Case) -> AnswerTextReader:
    """How the call classifier reads this case's replies (JSON cases by their schema).

    A JSON reader checks each distinct JSON text against the schema once (a pure
    function, kept for the reader's life): replies repeat their JSON answers, and a bulk
    re-label reads many replies with one reader."""
    schema = case.answer_schema
    if schema is not None:  # reads_json(case)
        check: JsonCheck = functools.cache(lambda candidate: _checked_json(candidate, schema))
        return lambda text: _read_json(text, check)
    return read_answer_line


AnswerTextReader = Callable[[str | None], ReadValue]


def read_answer_line(text: str | None) -> ReadValue:
    """The answer on the reply's final ANSWER/ABSTAIN line, as stored with the call."""
    answer = answer_text(text)
    return ReadValue(
        value=answer, problem=None if answer is not None else "no answer line in the text"
    )


def _date(text: str) -> date | None:
    for pattern in ("%Y-%m-%d", "%d %B %Y", "%B %d, %Y", "%d %b %Y", "%b %d, %Y"):
        try:
            return datetime.strptime(text, pattern).date()
        except ValueError:
            continue
    return None


class Grade(FrozenRecord):
    """One reply read against one case."""

    correct: bool
    placement: Placement
    value: str | None
    expected: str | None
    reason: str


def grade_answer(case: Case, text: str | None) -> Grade:
    """Read the reply's final answer for the case's kind and compare it with `expected`."""
    if case.answer_schema is not None:  # reads_json(case)
        structured = read_json_answer(text, case.answer_schema)
        structure = canonical_json(json.loads(case.expected))
        return Grade(
            correct=structured.value == structure,
            placement="answer" if structured.value is not None else "none",
            value=structured.value,
            expected=structure,
            reason="right"
            if structured.value == structure
            else (structured.problem or "a different structure than expected"),
        )
    final = final_answer(text)
    abstention_case = case.answer_kind == "abstain"
    if final.placement == "none":
        return Grade(
            correct=False,
            placement="none",
            value=None,
            expected=case.expected,
            reason="no answer line",
        )
    if final.placement == "abstain":
        return Grade(
            correct=abstention_case,
            placement="abstain",
            value=None,
            expected=case.expected,
            reason="abstained" + ("" if abstention_case else " on an answerable case"),
        )
    if abstention_case:
        return Grade(
            correct=False,
            placement="answer",
            value=final.raw,
            expected=case.expected,
            reason="answered an unanswerable case",
        )
    assert final.raw is not None
    currency = case_currency(case)  # read only for money
    read = read_value(case.answer_kind, final.raw, currency=currency)
    if read.value is None:
        return Grade(
            correct=False,
            placement="answer",
            value=None,
            expected=case.expected,
            reason=f"unreadable: {read.problem}",
        )
    expected = read_value(case.answer_kind, case.expected, currency=currency).value
    if case.answer_kind in ("money", "percent", "integer") and expected is not None:
        within = abs(Decimal(read.value) - Decimal(expected)) <= Decimal(case.tolerance)
    else:
        within = read.value == expected
    return Grade(
        correct=within,
        placement="answer",
        value=read.value,
        expected=expected,
        reason="right" if within else f"read {read.value}, expected {expected}",
    )

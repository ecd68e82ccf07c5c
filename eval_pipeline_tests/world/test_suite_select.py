"""The suite's subject selection: ranked exact gains over frames pick what the first selection
(every candidate's gain recomputed as a Fraction at every pick) picked."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from fractions import Fraction
from typing import Any, cast

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label.rulebook import RULES, RuleReading
from eval_pipeline.world.label.suite import SUBJECT_STREAM, select, suite_templates
from eval_pipeline.world.label.suite.answers import LabelData
from eval_pipeline.world.label.suite.readings import Views, build_views
from eval_pipeline.world.label.suite.select import COVERAGE, Candidate, Evaluated, Selector
from eval_pipeline.world.label.suite.templates import TEMPLATES
from eval_pipeline.world.rng import Stream

MISREADINGS = ("m0", "m1", "m2", "m3", "m4")


def selector(support: dict[str, int]) -> Selector:
    contracts = pl.DataFrame({"contract_id": ["CON-0001"], "artist_id": ["ART-0001"]})
    data = LabelData(world={"contracts": contracts}, truth={}, reading=RULES)
    views = Views(
        rules=data,
        rules_part=data,
        misread={m: data for m in MISREADINGS},
        pool=frozenset({"ART-0001"}),
    )
    chosen = Selector(views, Stream(5, "select-test"))
    chosen.support = dict(support)
    return chosen


def reference_candidate(evaluated: Evaluated, index: int) -> Candidate:
    """The candidate in row ``index``, read as first written: its row, and the misread
    answers filed under its index."""
    row = {k: v for k, v in evaluated.frame.row(index, named=True).items() if k != "_mask"}
    misread = evaluated.misread.filter(pl.col("_index") == index)
    artist = None if evaluated.artist is None else row[evaluated.artist]
    return Candidate(
        row=row,
        answer=str(row["answer"]),
        misread=dict(misread.select("misreading", "misread_answer").iter_rows()),
        artist=None if artist is None else str(artist),
    )


def reference_choose(selector: Selector, name: str, count: int) -> list[Candidate]:
    """The selection as first written: every candidate's gain recomputed as a Fraction at
    every pick, ties kept by the seeded order."""
    evaluated = selector.evaluated[name]
    candidates = [reference_candidate(evaluated, i) for i in range(evaluated.frame.height)]
    order = selector.stream.child(name).permutation(len(candidates))
    taken: list[int] = []
    artists: set[str] = set()
    answers: set[str] = set()
    for _ in range(count):
        best, best_score = -1, (-1, -1, Fraction(-1), -1)
        for index in order:
            if index in taken:
                continue
            candidate = candidates[index]
            gain = sum(
                (
                    Fraction(1, selector.support.get(m) or 1)
                    for m in candidate.misread
                    if selector.need[m] > 0
                ),
                Fraction(0),
            )
            fresh = int(candidate.artist is None or candidate.artist not in artists)
            new_answer = int(candidate.answer not in answers)
            score: tuple[Any, ...] = (new_answer, int(gain > 0), gain, fresh)
            if score > best_score:
                best, best_score = index, score
        taken.append(best)
        chosen = candidates[best]
        if chosen.artist is not None:
            artists.add(chosen.artist)
        answers.add(chosen.answer)
        for m in chosen.misread:
            selector.need[m] -= 1
    return [candidates[i] for i in sorted(taken)]


candidate_strategy = st.builds(
    lambda answer, misread, artist: Candidate(
        row={"answer": str(answer), "who": artist},
        answer=str(answer),
        misread={m: "x" for m in misread},
        artist=artist,
    ),
    st.integers(0, 3),
    st.sets(st.sampled_from(MISREADINGS), max_size=3),
    st.one_of(st.none(), st.sampled_from(["ART-0001", "ART-0002", "ART-0003"])),
)


@settings(max_examples=150, deadline=None)
@given(
    candidate_lists=st.lists(st.lists(candidate_strategy, min_size=1, max_size=25), max_size=4),
    support=st.fixed_dictionaries({m: st.integers(0, 40) for m in MISREADINGS}),
    counts=st.lists(st.integers(1, 6), min_size=4, max_size=4),
)
def test_choose_picks_what_fractions_picked(
    candidate_lists: list[list[Candidate]], support: dict[str, int], counts: list[int]
) -> None:
    """Several templates in a row (the need carries over), each picking up to all of its
    candidates: the integer gains choose exactly the subjects the fractions chose."""
    fast, slow = selector(support), selector(support)
    for number, (candidates, count) in enumerate(zip(candidate_lists, counts, strict=False)):
        template = TEMPLATES[number]
        count = min(count, len(candidates))
        evaluated = Evaluated.of(candidates, fast.bits, "who")
        fast.evaluated[template.name] = slow.evaluated[template.name] = evaluated
        fast.choose(replace(template, count=count))
        expected = reference_choose(slow, template.name, count)
        assert fast.chosen[template.name] == expected
        assert fast.need == slow.need
    assert all(left <= COVERAGE for left in fast.need.values())


@pytest.mark.parametrize(
    ("lines", "workers"), [(1_000, 2), (select.SIDE_BY_SIDE_MAX_LINES, 1)], ids=["small", "scale"]
)
def test_templates_are_evaluated_side_by_side_only_in_worlds_of_few_lines(
    monkeypatch: pytest.MonkeyPatch, lines: int, workers: int
) -> None:
    """At scale two templates' candidates at once were the suite's memory peak."""
    pools: list[int | None] = []

    class Recorded(ThreadPoolExecutor):
        def __init__(self, max_workers: int | None = None) -> None:
            pools.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(select, "ThreadPoolExecutor", Recorded)
    monkeypatch.setattr(select, "side_by_side_workers", lambda lines: 2)
    none = Evaluated(
        frame=pl.DataFrame(schema={"answer": pl.String, "_mask": pl.Int64}),
        misread=pl.DataFrame(),
        artist=None,
    )
    monkeypatch.setattr(Selector, "evaluate", lambda self, template: none)
    chosen = selector({m: 0 for m in MISREADINGS})
    world = dict(chosen.views.rules.world)
    world["statement_lines"] = pl.DataFrame({"line_id": pl.int_range(lines, eager=True)})
    data = replace(chosen.views.rules, world=world)
    chosen.views = replace(chosen.views, rules=data)
    assert chosen.rarest_first(TEMPLATES[:3]) == sorted(TEMPLATES[:3], key=lambda t: t.name)
    assert pools == [workers]


_SUBJECTS = st.one_of(st.none(), st.integers(0, 5))
_ANSWERS = st.sampled_from(["A", "B", "NO"])
_TABLE = st.lists(st.tuples(_SUBJECTS, _ANSWERS), max_size=8)


@given(
    rules=st.dictionaries(_SUBJECTS, _ANSWERS, max_size=6),
    misread=st.lists(_TABLE, min_size=1, max_size=4),
    absent_answer=st.sampled_from([None, "NO"]),
    stacked_rows=st.sampled_from([1, 5, 2_000_000]),
    stackable=st.booleans(),
)
def test_misread_answers_are_each_misreadings_first_answer_that_differs(
    rules: dict[int | None, str],
    misread: list[list[tuple[int | None, str]]],
    absent_answer: str | None,
    stacked_rows: int,
    stackable: bool,
) -> None:
    """Answered stacked (several misreadings' tables in one) or one by one, compared
    stacked (several misreadings per join) or one at a time, each candidate's answer under a
    misreading is the first its table lists, or ``absent_answer`` when the table leaves the
    candidate out; only answers that differ are kept, by misreading then candidate."""
    schema = {"subject": pl.Int64, "answer": pl.String}
    frame = pl.DataFrame(list(rules.items()), schema=schema, orient="row")

    def view(rows: list[tuple[int | None, str]]) -> LabelData:
        table = pl.DataFrame(rows, schema=schema, orient="row")
        return LabelData(world={}, truth={"answers": table}, reading=RULES)

    template = replace(
        TEMPLATES[0],
        table=lambda data: data.table("answers"),
        params=("subject",),
        absent_answer=absent_answer,
        stackable=stackable,
    )
    views = {f"m{i}": view(rows) for i, rows in enumerate(misread)}
    inputs = select._Inputs(view(list(rules.items())))
    template.table(inputs)  # as `evaluate` does: the inputs note what the table reads
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(select, "STACKED_ROWS", stacked_rows)
        found = selector({})._misread_answers(template, inputs, frame, views)
    expected = []
    for misreading, rows in zip(views, misread, strict=True):
        first: dict[int, str] = {}
        for subject, answer in rows:
            if subject is not None:
                first.setdefault(subject, answer)
        for index, (subject, answer) in enumerate(rules.items()):
            theirs = first.get(subject, absent_answer) if subject is not None else absent_answer
            if theirs is not None and theirs != answer:
                expected.append((index, misreading, theirs))
    assert found.schema == select._MISREAD_SCHEMA
    assert found.rows() == expected


def test_a_stacked_group_holds_no_more_answers_than_the_stacked_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group of misreadings is sized by their answers too, not only by the tables they
    differ in: at 10x `line_royalty` gives 225,000 answers per misreading from tables of
    20,000 rows, and a group of five held 1.1 million answers at once (the 10x peak 225 MB
    higher)."""
    schema = {"subject": pl.Int64, "answer": pl.String}
    frame = pl.DataFrame({"subject": [1, 2, 3, 4], "answer": ["A"] * 4}, schema=schema)

    def view(answer: str) -> LabelData:
        table = pl.DataFrame({"subject": [1], "answer": [answer]}, schema=schema)
        return LabelData(world={}, truth={"answers": table}, reading=RULES)

    template = replace(
        TEMPLATES[0], table=lambda data: data.table("answers"), params=("subject",), stackable=True
    )
    inputs = select._Inputs(LabelData(world={}, truth={"answers": frame}, reading=RULES))
    template.table(cast(LabelData, inputs))
    sizes: list[int] = []
    answered = Selector._answered

    def recorded(
        template: Any, group: list[tuple[str, LabelData]]
    ) -> list[tuple[list[str], pl.DataFrame]]:
        sizes.append(len(group))
        return answered(template, group)

    monkeypatch.setattr(Selector, "_answered", staticmethod(recorded))
    monkeypatch.setattr(select, "STACKED_ROWS", 8)
    views = {"m0": view("B"), "m1": view("C"), "m2": view("D")}
    found = selector({})._misread_answers(template, inputs, frame, views)
    assert sizes == [2, 1]  # four answers each: two fit in eight rows
    assert found.rows() == [(0, "m0", "B"), (0, "m1", "C"), (0, "m2", "D")]


def test_tables_stacked_from_views_that_hold_other_columns_keep_those_all_hold() -> None:
    """A misreading's own registry keeps only the columns the answer tables read, where
    another view holds the whole registry: stacked, they keep the columns both hold (a
    concat of the two refused their shapes)."""
    whole = pl.DataFrame({"subject": [1], "answer": ["B"], "note": ["whole registry"]})
    trimmed = pl.DataFrame({"subject": [1], "answer": ["C"]})
    views = [
        ("whole", LabelData(world={}, truth={"answers": whole})),
        ("trimmed", LabelData(world={}, truth={"answers": trimmed})),
    ]
    stacked = select._stacked_view(views).table("answers")
    assert stacked.columns == ["subject", "answer", "misreading"]
    assert stacked.rows() == [(1, "B", "whole"), (1, "C", "trimmed")]


def test_misreadings_that_read_a_field_differently_are_answered_one_by_one() -> None:
    """Misreadings are grouped by the reading fields the rules' answers read; one a group
    reads only on a branch the rules do not take, and reads differently, cannot be answered
    stacked: the group is answered view by view, with each view's own answers."""
    schema = {"subject": pl.Int64, "answer": pl.String}
    frame = pl.DataFrame({"subject": [1, 2], "answer": ["A", "A"]}, schema=schema)

    def table(data: LabelData) -> pl.DataFrame:
        answers = data.table("answers")
        if data.reading.flagged_lines_earn:
            return answers.with_columns(answer=pl.lit(data.reading.rounding))
        return answers

    def view(reading: RuleReading) -> LabelData:
        own = pl.DataFrame({"subject": [1, 2], "answer": ["A", "A"]}, schema=schema)
        return LabelData(world={}, truth={"answers": own}, reading=reading)

    template = replace(TEMPLATES[0], table=table, params=("subject",), stackable=True)
    inputs = select._Inputs(LabelData(world={}, truth={"answers": frame}, reading=RULES))
    template.table(cast(LabelData, inputs))
    views = {
        "up": view(replace(RULES, flagged_lines_earn=True, rounding="half_up")),
        "even": view(replace(RULES, flagged_lines_earn=True)),
    }
    (group,) = Selector._answer_groups(template, inputs, views, frame.height)
    assert [m for m, _ in group] == ["up", "even"]
    found = selector({})._misread_answers(template, inputs, frame, views)
    assert found.rows() == [
        (0, "up", "half_up"),
        (1, "up", "half_up"),
        (0, "even", "half_even"),
        (1, "even", "half_even"),
    ]


def test_a_stackable_template_answers_each_misreading_stacked_as_its_own_view_does(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    """On the default world, every template marked stackable answers its misreadings a
    group at a time, in one table, with what each misreading's own view answers (a
    parameter naming one answer per misreading, so the order of rows does not count)."""
    stream = Stream(label_world.seed, SUBJECT_STREAM)
    views = build_views(label_world.tables, label_key.tables, stream.child("pool"))
    templates = suite_templates(label_world.tables, label_key.tables, views.pool, stream)
    stackable = [t for t in templates if t.stackable]
    assert len(stackable) == 16
    for template in stackable:
        params = list(template.params)
        inputs = select._Inputs(views.rules_part if template.artist_column else views.rules)
        answers = template.table(cast(LabelData, inputs)).height
        stacked = 0
        for group in Selector._answer_groups(template, inputs, views.misread, answers):
            together = Selector._answered(template, group)
            stacked += len(together) == 1 and len(group) > 1
            for misreading, view in group:
                mine = pl.concat([table for _, table in together]).filter(
                    pl.col("misreading") == misreading
                )
                ((_, alone),) = Selector._answered(template, [(misreading, view)])
                assert mine.select(params).is_duplicated().sum() == 0, template.name
                assert mine.sort(params).equals(alone.sort(params)), (template.name, misreading)
        assert stacked, f"{template.name} answered no misreadings stacked"


@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["1.00", "2.00"]),
            st.sampled_from([None, "ART-1", "ART-2"]),
            st.lists(st.sampled_from(MISREADINGS), unique=True, max_size=3),
        ),
        min_size=1,
        max_size=8,
    ),
    data=st.data(),
)
def test_candidates_read_together_are_each_candidate_read_alone(
    rows: list[tuple[str, str | None, list[str]]], data: st.DataObject
) -> None:
    """The chosen subjects are read in one pass (two frame operations per template, not
    three per subject), in the order asked, each with its own misread answers."""
    bits = {m: i for i, m in enumerate(MISREADINGS)}
    given_candidates = [
        Candidate(
            row={"subject": i, "answer": answer, "artist_id": artist},
            answer=answer,
            misread={m: f"{answer}-{m}" for m in misreadings},
            artist=artist,
        )
        for i, (answer, artist, misreadings) in enumerate(rows)
    ]
    evaluated = Evaluated.of(given_candidates, bits, "artist_id")
    indices = data.draw(st.permutations(range(len(rows))))
    read = evaluated.candidates(indices)
    assert read == [reference_candidate(evaluated, i) for i in indices]
    assert read == [given_candidates[i] for i in indices]

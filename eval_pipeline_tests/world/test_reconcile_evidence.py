"""The reconciliation evidence of one world is scanned once per run, not once per stage."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.world.base import GeneratedWorld
from eval_pipeline.world.label import reconcile
from eval_pipeline.world.label.rulebook import MISREADINGS, RuleReading
from eval_pipeline.world.label.suite.readings import REGISTRY_COLUMNS_READ
from eval_pipeline.world.memo import MAX_SHARED_PIECES


def test_the_lines_of_one_world_are_scanned_once(
    label_world: GeneratedWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans: list[int] = []
    scan = reconcile.scan_evidence

    def counted(world: dict[str, pl.DataFrame]) -> reconcile.LineEvidence:
        scans.append(world["statement_lines"].height)
        return scan(world)

    monkeypatch.setattr(reconcile, "scan_evidence", counted)
    reconcile._evidence.clear()
    tables = dict(label_world.tables)
    first = reconcile.flag_lines(tables)
    again = reconcile.flag_lines(dict(label_world.tables), MISREADINGS[0].reading)
    assert reconcile.collect_evidence(tables) is reconcile.collect_evidence(tables)
    assert len(scans) == 1 and first.height and again.height

    # Another frame (even with the same rows) is another world to the memo: scanned again,
    # and its answer is the same.
    copied = dict(tables, statement_lines=tables["statement_lines"].clone())
    assert reconcile.flag_lines(copied).equals(first)
    assert len(scans) == 2


def test_an_undescribed_registry_flags_the_same_lines_as_what(label_world: GeneratedWorld) -> None:
    """The suite's misreadings read only which lines are flagged, and as what: their
    registries leave the notes and ids out (at 10x a reading flags 500,000 lines)."""
    evidence = reconcile.collect_evidence(dict(label_world.tables))
    for m in MISREADINGS:
        full = reconcile.registry(evidence, m.reading)
        lean = reconcile.registry(evidence, m.reading, described=False)
        columns = ["line_id", "kind", "statement_id", "flaggable", "borderline"]
        assert lean.select(columns).equals(full.select(columns)), m.misreading_id
        assert lean.schema == full.schema
        assert lean["note"].null_count() == lean.height == lean["anomaly_id"].null_count()


def test_the_repeated_lines_are_grouped_once_per_world_not_once_per_reading(
    label_world: GeneratedWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F1's and F7's groups do not depend on the reading (only which members are flagged
    does): at 10x a world repeats 800,000 lines and grouping them took a second a reading."""
    groupings: list[str] = []

    def counting(name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        group: Callable[[pl.DataFrame], pl.DataFrame] = getattr(reconcile, name)

        def counted(repeats: pl.DataFrame) -> pl.DataFrame:
            groupings.append(name)
            return group(repeats)

        return counted

    for name in ("duplicate_members", "twin_members"):
        monkeypatch.setattr(reconcile, name, counting(name))
    evidence = reconcile.scan_evidence(dict(label_world.tables))
    assert sorted(groupings) == ["duplicate_members", "twin_members"]
    registries = [reconcile.registry(evidence, m.reading) for m in MISREADINGS]
    assert len(groupings) == 2 and all(r.height for r in registries)
    # Both kinds are present in this world, so the groups are exercised, not empty.
    assert evidence.duplicates.height and evidence.twins.height


# -- a reading's registry made beside the rules' -------------------------------------------

_LINES = st.integers(1, 40)
"""Few line ids, so one line falls under several kinds (filing it once is what can move)."""


def _unique_lines(draw: st.DrawFn) -> list[int]:
    return sorted(draw(st.sets(_LINES, max_size=25)))


def _drawn(
    draw: st.DrawFn, lines: list[int], columns: dict[str, tuple[st.SearchStrategy[object], Any]]
) -> pl.DataFrame:
    """A frame of ``lines`` with each other column's values drawn from its strategy."""
    return pl.DataFrame(
        {
            "line_id": lines,
            **{name: [draw(values) for _ in lines] for name, (values, _) in columns.items()},
        },
        schema={"line_id": pl.Int64, **{name: dtype for name, (_, dtype) in columns.items()}},
    )


@st.composite
def _evidence(draw: st.DrawFn) -> reconcile.LineEvidence:
    """Evidence with any overlap between the kinds: duplicates and twins with their
    groups' lines, and single lines of any units, amounts, currencies and dates."""
    duplicates = _unique_lines(draw)
    twins = _unique_lines(draw)
    singles = _unique_lines(draw)
    statement = (st.sampled_from(["STM-1", "STM-2"]), pl.String)
    member = (st.sampled_from(duplicates + twins + singles or [1]), pl.Int64)
    day = st.dates(date(2024, 12, 1), date(2026, 2, 1))
    return reconcile.LineEvidence(
        duplicates=_drawn(
            draw, duplicates, {"statement_id": statement, "first": member, "last": member}
        ),
        twins=_drawn(
            draw,
            twins,
            {
                "statement_id": statement,
                "territory": (st.sampled_from(["GB", "DE"]), pl.String),
                "first": member,
                "other": member,
            },
        ),
        singles=_drawn(
            draw,
            singles,
            {
                "statement_id": statement,
                "units": (st.integers(-2, 2), pl.Int64),
                "amount_minor": (st.integers(-2, 2), pl.Int64),
                "currency": (st.sampled_from(["USD", "EUR"]), pl.String),
                "isrc": (st.sampled_from(["GBX", "USY"]), pl.String),
                "period": (st.sampled_from(["2025-01", "2025-02"]), pl.String),
                "known": (st.booleans(), pl.Boolean),
                "statement_currency": (st.sampled_from(["USD", "EUR"]), pl.String),
                "period_end": (day, pl.Date),
                "original_release_date": (st.one_of(st.none(), day), pl.Date),
            },
        ),
    )


_READINGS = st.builds(
    RuleReading,
    duplicate_copy=st.sampled_from(["later", "earlier", "both"]),
    flag_unknown_isrc=st.booleans(),
    flag_currency_mismatch=st.booleans(),
    flag_impossible_units=st.booleans(),
    flag_pre_release=st.booleans(),
    flag_returns=st.booleans(),
    flag_territory_twins=st.booleans(),
)


@given(_evidence(), _READINGS, st.sampled_from([0, 3, 1_000]))
@settings(max_examples=300, deadline=None)
def test_a_registry_made_beside_the_rules_is_the_registry_built_whole(
    evidence: reconcile.LineEvidence, reading: RuleReading, most: int
) -> None:
    """Only the lines a differently read field could move are filed again: whatever kinds
    a line falls under, the rest is the rules' rows, and the whole is the reading's own
    registry (the columns the suite reads); more lines to move than ``most``: None."""
    rules = reconcile.registry(evidence).select(*REGISTRY_COLUMNS_READ)
    whole = reconcile.registry(evidence, reading, described=False).select(*REGISTRY_COLUMNS_READ)
    beside = reconcile.registry_beside(evidence, reading, rules, most)
    if beside is None:
        assert most < 1_000
        return
    assert beside.equals(whole), (beside, whole)
    assert beside.schema == whole.schema


def test_each_misreading_of_the_flags_is_made_beside_the_rules_on_the_default_world(
    label_world: GeneratedWorld,
) -> None:
    """On a real world, every misreading that moves a few lines gets its registry beside
    the rules' (equal to its own, and holding the rules' rows rather than copies)."""
    evidence = reconcile.collect_evidence(dict(label_world.tables))
    rules = reconcile.registry(evidence).select(*REGISTRY_COLUMNS_READ)
    beside_any = False
    for m in MISREADINGS:
        beside = reconcile.registry_beside(evidence, m.reading, rules, MAX_SHARED_PIECES)
        whole = reconcile.registry(evidence, m.reading, described=False)
        if beside is None:
            continue
        beside_any = beside_any or beside is not rules
        assert beside.equals(whole.select(*REGISTRY_COLUMNS_READ)), m.misreading_id
    assert beside_any

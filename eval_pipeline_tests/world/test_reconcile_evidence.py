"""The reconciliation evidence of one world is scanned once per run, not once per stage."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import pytest

from eval_pipeline.world.base import GeneratedWorld
from eval_pipeline.world.label import reconcile
from eval_pipeline.world.label.rulebook import MISREADINGS


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

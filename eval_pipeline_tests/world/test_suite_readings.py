"""Each misreading's view of the answer key, as the suite's answer tables read it."""

from __future__ import annotations

import pytest

from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label.reconcile import FLAG_FIELDS, collect_evidence, registry
from eval_pipeline.world.label.rulebook import MISREADINGS, RULES
from eval_pipeline.world.label.suite import SUBJECT_STREAM, readings
from eval_pipeline.world.label.suite.readings import (
    REGISTRY_COLUMNS_READ,
    SIDE_BY_SIDE_MAX_LINES,
    build_views,
    side_by_side_workers,
)
from eval_pipeline.world.rng import Stream


def test_a_flag_misreadings_registry_is_its_own_and_shares_the_rules_rows(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    """A misreading of the flagging rules lists the lines it flags, as what; where it agrees
    with the rules (all but a dozen lines), its registry is slices of the rules' one."""
    views = build_views(
        label_world.tables, label_key.tables, Stream(label_world.seed, SUBJECT_STREAM).child("p")
    )
    evidence = collect_evidence(dict(label_world.tables))
    flagging = [
        m
        for m in MISREADINGS
        if any(getattr(m.reading, f) != getattr(RULES, f) for f in FLAG_FIELDS)
    ]
    assert flagging
    pieced = 0
    for m in flagging:
        own = registry(evidence, m.reading, described=False).select(*REGISTRY_COLUMNS_READ)
        held = views.misread[m.misreading_id].truth["anomalies"]
        assert held.equals(own), m.misreading_id
        pieced += held.n_chunks() > 1
    assert pieced >= len(flagging) - 1


@pytest.mark.parametrize(
    ("cores", "small", "at_scale"), [(1, 2, 1), (2, 4, 2), (4, 8, 4), (16, 8, 4)]
)
def test_a_small_world_runs_more_threads_side_by_side_than_cores_a_big_one_no_more(
    monkeypatch: pytest.MonkeyPatch, cores: int, small: int, at_scale: int
) -> None:
    """Small frames wait on polars' pool more than they compute: twice the cores (at most
    8). At scale each thread holds a misreading's tables: the cores, at most 4."""
    monkeypatch.setattr(readings.os, "cpu_count", lambda: cores)
    assert side_by_side_workers(SIDE_BY_SIDE_MAX_LINES - 1) == small
    assert side_by_side_workers(SIDE_BY_SIDE_MAX_LINES) == at_scale

"""Each misreading's view of the answer key, as the suite's answer tables read it."""

from __future__ import annotations

from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label.reconcile import FLAG_FIELDS, collect_evidence, registry
from eval_pipeline.world.label.rulebook import MISREADINGS, RULES
from eval_pipeline.world.label.suite import SUBJECT_STREAM
from eval_pipeline.world.label.suite.readings import REGISTRY_COLUMNS_READ, build_views
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

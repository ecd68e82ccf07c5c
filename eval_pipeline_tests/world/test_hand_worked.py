"""The artist-months worked by hand in docs/royalty-rules.md, kept equal to the engine.

Section 3 of the document is rendered line by line on the engine's scalar face, and every
total is checked against the answer key (the vectorized face) while rendering; the test
regenerates it and requires the committed text to be identical, so an edited number, a
changed rule or a changed world fails here.
"""

from __future__ import annotations

import pytest

from eval_pipeline.errors import WorldError
from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import engine
from eval_pipeline.world.label.worked import (
    SECTION_END,
    SECTION_START,
    choose_months,
    render_month,
    render_section,
)

DOC = PROJECT_ROOT / "docs" / "royalty-rules.md"


def committed_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index(SECTION_START) : text.index(SECTION_END) + len(SECTION_END)]


def test_document_equals_the_rendered_months(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    assert committed_section() == render_section(label_world, label_key), (
        "docs/royalty-rules.md section 3 is out of date: run "
        "`uv run python -m eval_pipeline.world.label.worked`"
    )


def test_the_five_months_are_of_five_kinds(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    picks = choose_months(label_world, label_key)
    assert [p.title for p in picks] == [
        "A plain artist-month",
        "A cross-collateralized artist-month",
        "An escalator that bites",
        "Four currencies",
        "Recoupment that consumes part of the earnings",
    ]
    assert len({(p.artist_id, p.period) for p in picks}) == 5


def test_rendering_refuses_an_answer_key_that_disagrees(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    pick = choose_months(label_world, label_key)[1]
    ledger = label_key.tables["account_ledger"]
    import polars as pl

    tampered = ledger.with_columns(
        recouped_micro=pl.when(
            (pl.col("artist_id") == pick.artist_id) & (pl.col("period") == pick.period)
        )
        .then(pl.col("recouped_micro") + 1)
        .otherwise(pl.col("recouped_micro"))
    )
    key = AnswerKey(tables={**label_key.tables, "account_ledger": tampered}, fingerprint="x")
    with pytest.raises(WorldError, match="disagrees"):
        list(render_month(2, pick, label_world, key))


def test_document_examples_of_the_scalar_face() -> None:
    line = engine.line_royalty_micro(145, "EUR", 1_021_473, 205_000)
    assert (line.gross_usd_micro, line.royalty_micro) == (1_481_136, 303_633)
    assert str(engine.line_royalty("1.45", "EUR", "1.021473", "0.205").royalty_usd) == "0.303633"
    assert engine.recouped_payable_usd([(124_274_749, 188_655_900)])[1] == engine.cents_to_usd(
        6_438
    )

"""Dated prices: the tier is picked by the call's day; unknown model or day is an error."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from eval_pipeline.errors import ConfigError, EvalPipelineError
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.errors import UncoveredDatePriceError, UnknownModelPriceError
from eval_pipeline.providers.prices import PriceBook

BEFORE_CHANGE = date(2026, 12, 31)
AFTER_CHANGE = date(2027, 1, 1)


def test_sim_models_have_an_intro_tier_at_two_thirds_of_sticker() -> None:
    book = load_price_book()
    for model in ("planted", "flaky", "tool-responder"):
        intro = book.quote(model, BEFORE_CHANGE, 3_000, 1_500)
        sticker = book.quote(model, AFTER_CHANGE, 3_000, 1_500)
        assert intro.tier_id == "sim-intro"
        assert sticker.tier_id == "sim-sticker"
        assert intro.cost_usd * 3 == sticker.cost_usd * 2
        assert isinstance(intro.cost_usd, Decimal)


def test_cost_is_exact_decimal() -> None:
    quote = load_price_book().quote("planted", BEFORE_CHANGE, 1_234, 567)
    assert quote.cost_usd == Decimal("0.002468") + Decimal("0.00567")


def test_variants_share_the_base_price_only_when_allowed() -> None:
    book = load_price_book()
    assert book.quote("flaky:fast", BEFORE_CHANGE, 10, 10).tier_id == "sim-intro"
    with pytest.raises(UnknownModelPriceError):
        book.quote("gpt-4.1:mini", BEFORE_CHANGE, 10, 10)


def test_unknown_model_is_an_error_never_zero() -> None:
    with pytest.raises(UnknownModelPriceError, match="no-such-model") as caught:
        load_price_book().quote("no-such-model", BEFORE_CHANGE, 10, 10)
    assert isinstance(caught.value, EvalPipelineError)


def test_a_day_no_tier_covers_is_an_error() -> None:
    with pytest.raises(UncoveredDatePriceError, match="2020-01-01"):
        load_price_book().quote("gpt-4.1", date(2020, 1, 1), 10, 10)


def test_naive_sticker_table_is_caught_by_the_dated_meter() -> None:
    """The regression shape of the article's bug: a sticker-only table meters 1.5x the bill."""
    book = load_price_book()
    billed = book.quote("planted", BEFORE_CHANGE, 9_000, 3_000).cost_usd
    sticker = book.tier("planted", AFTER_CHANGE).usd_per_mtok
    naive = (9_000 * sticker.input + 3_000 * sticker.output) / 1_000_000
    assert naive == billed * Decimal("1.5")
    assert naive != billed


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_float_prices_and_overlapping_tiers_are_refused(tmp_path: Path) -> None:
    floats = """
models:
  m:
    kind: real
    tiers:
      - {id: a, start: 2025-01-01, usd_per_mtok: {input: 1.5, output: "2"}}
"""
    with pytest.raises(ConfigError, match=r"models\.m\.tiers\.0\.usd_per_mtok\.input"):
        load_price_book(_write(tmp_path, floats))
    overlap = """
models:
  m:
    kind: real
    tiers:
      - {id: a, start: 2025-01-01, end: 2025-06-01, usd_per_mtok: {input: "1", output: "2"}}
      - {id: b, start: 2025-05-01, usd_per_mtok: {input: "1", output: "2"}}
"""
    with pytest.raises(ConfigError, match="overlap"):
        load_price_book(_write(tmp_path, overlap))


def test_gap_between_tiers_is_uncovered(tmp_path: Path) -> None:
    gap = """
models:
  m:
    kind: real
    tiers:
      - {id: a, start: 2025-01-01, end: 2025-02-01, usd_per_mtok: {input: "1", output: "2"}}
      - {id: b, start: 2025-03-01, usd_per_mtok: {input: "1", output: "2"}}
"""
    book: PriceBook = load_price_book(_write(tmp_path, gap))
    assert book.quote("m", date(2025, 1, 31), 1, 1).tier_id == "a"
    with pytest.raises(UncoveredDatePriceError):
        book.quote("m", date(2025, 2, 15), 1, 1)
    assert book.quote("m", date(2025, 3, 1), 1, 1).tier_id == "b"

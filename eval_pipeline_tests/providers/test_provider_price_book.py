"""The price book on a small in-memory book: the worst case to the last digit, the edges of
what a price may be, and what each refusal says.

Mutation testing (issue 13) found `worst_case` tested only through the budget (its cost
could subtract the output or divide by a rate unnoticed), zero tokens never priced, and no
refusal's wording asserted.
"""

from __future__ import annotations

import os
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from eval_pipeline.errors import ConfigError
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.errors import (
    PriceError,
    UncoveredDatePriceError,
    UnknownModelPriceError,
)
from eval_pipeline.providers.prices import (
    ModelPrices,
    PriceBook,
    PriceTier,
    TokenPrices,
    _price_has_few_decimals,
)

DAY = date(2026, 6, 1)


def book(variants: bool = False, **rates: str) -> PriceBook:
    prices = {"input": "2.00", "output": "8.00", **rates}
    tiers = (
        PriceTier.model_validate(
            {"id": "early", "start": "2026-01-01", "end": "2026-03-01", "usd_per_mtok": prices}
        ),
        PriceTier.model_validate({"id": "now", "start": "2026-04-01", "usd_per_mtok": prices}),
    )
    prices_of_m = ModelPrices(kind="simulated", tiers=tiers, variants=variants)
    return PriceBook(models={"m": prices_of_m}, source="test")


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as raised:
        TokenPrices.model_validate(data)
    [error] = raised.value.errors()
    return str(error["msg"])


def test_the_worst_case_is_every_input_token_at_the_dearest_input_rate() -> None:
    quote = book(cache_read="0.20", cache_write="2.50").worst_case("m", DAY, 1_000, 300)
    assert quote.cost_usd == Decimal("0.0049")  # 1000 x 2.50 + 300 x 8.00, per million
    assert (quote.input_usd_per_mtok, quote.output_usd_per_mtok) == (Decimal("2.50"), 8)
    assert (quote.tier_id, quote.input_tokens, quote.output_tokens) == ("now", 1_000, 300)
    assert book().worst_case("m", DAY, 1_000, 0).cost_usd == Decimal("0.002")
    assert book().worst_case("m", DAY, 0, 1_000).cost_usd == Decimal("0.008")


@given(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
def test_no_split_of_the_input_costs_more_than_the_worst_case(
    plain: int, read: int, write: int, output: int
) -> None:
    priced = book(cache_read="0.20", cache_write="2.50")
    actual = priced.quote(
        "m", DAY, plain, output, cache_read_tokens=read, cache_write_tokens=write
    ).cost_usd
    worst = priced.worst_case("m", DAY, plain + read + write, output).cost_usd
    assert actual <= worst
    assert actual == (plain * 2 + read * Decimal("0.2") + write * Decimal("2.5") + output * 8) / (
        10**6
    )


def test_negative_token_counts_are_refused_and_zero_is_free() -> None:
    for method in (book().worst_case, book().quote):
        assert method("m", DAY, 0, 0).cost_usd == 0
        with pytest.raises(ValueError, match=r"^token counts cannot be negative$"):
            method("m", DAY, -1, 5)
        with pytest.raises(ValueError, match=r"^token counts cannot be negative$"):
            method("m", DAY, 5, -1)


@pytest.mark.parametrize("kind", ["cache_read", "cache_write"])
def test_a_cache_kind_the_tier_does_not_price_is_refused_by_name(kind: str) -> None:
    with pytest.raises(PriceError) as raised:
        book().quote("m", DAY, 10, 10, **{f"{kind}_tokens": 7})
    assert str(raised.value) == (
        f"tier now of model 'm' has no {kind} price (7 {kind} tokens on 2026-06-01) in test"
    )


def test_a_quote_records_every_token_count_it_priced() -> None:
    quote = book(cache_read="0.20", cache_write="2.50").quote(
        "m", DAY, 100, 20, cache_read_tokens=30, cache_write_tokens=40
    )
    assert (quote.input_tokens, quote.output_tokens) == (100, 20)
    assert (quote.cache_read_tokens, quote.cache_write_tokens) == (30, 40)
    assert (quote.input_usd_per_mtok, quote.output_usd_per_mtok) == (2, 8)


def test_a_variant_is_priced_by_the_name_before_its_first_separator() -> None:
    priced = book(variants=True)
    assert priced.tier("m:fast:v2", DAY).id == "now"
    with pytest.raises(UnknownModelPriceError) as raised:
        book().tier("m:fast", DAY)
    assert str(raised.value) == "no prices for model 'm:fast' in test; known models: m"


def test_a_missing_price_book_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_price_book(tmp_path / "prices.yaml")
    assert str(raised.value) == f"price book not found: {(tmp_path / 'prices.yaml').resolve()}"


def test_an_edited_price_book_is_read_again_even_at_the_same_size(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    text = (
        "currency: USD\nunit: usd_per_million_tokens\nmodels:\n  m:\n    kind: real\n"
        "    tiers:\n"
        "      - {id: t, start: 2026-01-01, usd_per_mtok: {input: '2.00', output: '1'}}\n"
    )
    path.write_text(text)
    assert load_price_book(path).quote("m", DAY, 10**6, 0).cost_usd == 2
    path.write_text(text.replace("'2.00'", "'3.00'"))  # same size, new content
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert load_price_book(path).quote("m", DAY, 10**6, 0).cost_usd == 3


def test_a_day_between_tiers_names_every_tier_open_or_closed() -> None:
    with pytest.raises(UncoveredDatePriceError) as raised:
        book().tier("m", date(2026, 3, 1))  # the early tier's end is exclusive
    assert str(raised.value) == (
        "no price tier of model 'm' covers 2026-03-01 in test; "
        "tiers: early [2026-01-01, 2026-03-01); now [2026-04-01, open)"
    )
    assert book().tier("m", date(2026, 2, 28)).id == "early"
    assert book().tier("m", date(2026, 4, 1)).id == "now"


def test_a_float_price_is_refused_with_how_to_write_it() -> None:
    assert refusal({"input": 3.0, "output": "1"}) == (
        "Value error, write prices as quoted decimal strings (e.g. '3.00'), not floats"
    )


@pytest.mark.parametrize("price", ["0.000001", "3E+7", "0", 12])
def test_prices_with_up_to_six_decimals_are_accepted(price: str | int) -> None:
    assert TokenPrices.model_validate({"input": price, "output": price}).input == Decimal(price)


@pytest.mark.parametrize(
    ("price", "message"),
    [
        ("0.0000001", "Value error, at most 6 decimal places in a price"),
        ("-0.01", "Value error, a price cannot be negative"),
    ],
)
def test_a_price_too_precise_not_a_number_or_negative_is_refused(price: str, message: str) -> None:
    assert refusal({"input": "1", "output": price}) == message
    assert refusal({"input": "1", "output": "1", "cache_write": price}) == message


def test_a_price_that_is_not_a_finite_number_is_refused() -> None:
    """Pydantic refuses NaN before the check runs; the check refuses it on its own too."""
    assert refusal({"input": "1", "output": "NaN"}) == "Input should be a finite number"
    for special in ("NaN", "Infinity"):
        with pytest.raises(ValueError, match=r"^at most 6 decimal places in a price$"):
            _price_has_few_decimals(Decimal(special))


def test_tiers_must_end_after_they_start_and_not_overlap() -> None:
    tier = {"usd_per_mtok": {"input": "1", "output": "1"}}
    with pytest.raises(ValidationError, match="tier a: end must be after start"):
        ModelPrices.model_validate(
            {"kind": "real", "tiers": [{**tier, "id": "a", "start": DAY, "end": DAY}]}
        )
    with pytest.raises(ValidationError, match="tiers a and b overlap"):
        ModelPrices.model_validate(
            {
                "kind": "real",
                "tiers": [
                    {**tier, "id": "b", "start": "2026-02-01"},
                    {**tier, "id": "a", "start": "2026-01-01", "end": "2026-02-02"},
                ],
            }
        )
    adjacent = ModelPrices.model_validate(
        {
            "kind": "real",
            "tiers": [
                {**tier, "id": "a", "start": "2026-01-01", "end": "2026-02-01"},
                {**tier, "id": "b", "start": "2026-02-01"},
            ],
        }
    )
    assert [t.id for t in adjacent.tiers] == ["a", "b"]

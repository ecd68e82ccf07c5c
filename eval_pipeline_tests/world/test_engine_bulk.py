"""The engine's bulk face (engine_bulk), function by function, on frames small enough to
work by hand: several contracts, channels, periods and currencies at once, so that a code,
a key or a lookup that goes to the wrong row shows.

The world of these tests (built inside each test):

- deals: ISRC I0 and I2 under contract C2, I1 under C1 (contract codes sorted: C1 0, C2 1);
- periods 2025-01 (index 0) and 2025-02 (1); keys (contract * 4 + channel) * 2 + period;
- terms: C1 streaming p0 100,000 ppm (key 0), C1 download p0 109,960 (key 2), C1 download
  p1 120,000 with an escalator over 5 units to 150,000 (key 3), C2 streaming p0 200,000
  with an escalator over 10 units to 250,003 (key 8), C2 download p0 210,000 (key 10);
- FX in 2025-01: USD 1,000,000, EUR 1,080,000, GBP 1,250,050 micro-USD; in 2025-02 JPY
  6,700 (and no USD).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label import engine, engine_bulk

PERIODS = ("2025-01", "2025-02")
LINE_SCHEMA = {
    "line_id": pl.Int64,
    "isrc": pl.String,
    "period": pl.String,
    "channel": pl.String,
    "currency": pl.String,
    "units": pl.Int64,
    "amount_minor": pl.Int64,
}
PRICED = [
    # line_id, isrc, period, channel, currency, units, amount_minor
    (1, "I0", "2025-01", "streaming", "USD", 4, 150),
    (2, "I1", "2025-02", "download", "JPY", 3, 1000),
    (3, "I2", "2025-01", "streaming", "EUR", 7, 333),
    (5, "I1", "2025-01", "download", "GBP", 5, 1),
]


def lines(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=LINE_SCHEMA, orient="row")


def deals() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "track_id": ["T0", "T1", "T2"],
            "isrc": ["I0", "I1", "I2"],
            "artist_id": ["A1", "A2", "A1"],
            "contract_id": ["C2", "C1", "C2"],
            "account_id": ["ACC-2", "ACC-1", "ACC-2"],
        }
    )


def terms() -> pl.DataFrame:
    return pl.DataFrame(
        [
            ("C1", "streaming", "2025-01", 100_000, None, None),
            ("C1", "download", "2025-01", 109_960, None, None),
            ("C1", "download", "2025-02", 120_000, 5, 150_000),
            ("C2", "streaming", "2025-01", 200_000, 10, 250_003),
            ("C2", "download", "2025-01", 210_000, None, None),
            # Outside the deals, the channels or the periods: never looked up.
            ("C3", "streaming", "2025-01", 1, None, None),
            ("C1", "radio", "2025-01", 2, None, None),
            ("C1", "streaming", "2025-03", 3, None, None),
        ],
        schema={
            "contract_id": pl.String,
            "channel": pl.String,
            "period": pl.String,
            "rate_ppm": pl.Int64,
            "escalator_units": pl.Int64,
            "escalated_rate_ppm": pl.Int64,
        },
        orient="row",
    )


def fx_rates() -> pl.DataFrame:
    return pl.DataFrame(
        [
            ("2025-01", "USD", 1_000_000),
            ("2025-01", "EUR", 1_080_000),
            ("2025-01", "GBP", 1_250_050),
            ("2025-02", "JPY", 6_700),
            # An unknown period and an unknown currency: ignored.
            ("2025-03", "USD", 999),
            ("2025-01", "XYZ", 5),
        ],
        schema={"period": pl.String, "currency": pl.String, "usd_per_unit_micro": pl.Int64},
        orient="row",
    )


def test_code_lines_turns_every_text_column_into_its_code_and_attaches_fx() -> None:
    source = lines([*PRICED, (4, "IX", "2025-03", "radio", "XYZ", 1, 5)])
    coded = engine_bulk.code_lines(source, deals(), fx_rates(), PERIODS)
    assert coded.periods == PERIODS
    assert coded.lines.equals(source)
    assert coded.frame.schema == pl.Schema(
        {
            "line_id": pl.Int64,
            "units": pl.Int64,
            "amount_minor": pl.Int64,
            "deal_index": pl.Int32,
            "period_index": pl.Int32,
            "channel_code": pl.Int32,
            "currency_code": pl.Int32,
            "usd_per_unit_micro": pl.Int64,
        }
    )
    assert coded.frame.to_dict(as_series=False) == {
        "line_id": [1, 2, 3, 5, 4],
        "units": [4, 3, 7, 5, 1],
        "amount_minor": [150, 1000, 333, 1, 5],
        "deal_index": [0, 1, 2, 1, None],  # row of the deals frame
        "period_index": [0, 1, 0, 0, None],
        "channel_code": [0, 1, 0, 1, None],  # CHANNELS order
        "currency_code": [0, 3, 1, 2, None],  # USD, EUR, GBP, JPY
        "usd_per_unit_micro": [1_000_000, 6_700, 1_080_000, 1_250_050, None],
    }
    # amount x rate / minor units per major (100, or 1 for JPY); 12,500.5 is a tie.
    assert coded.gross("half_even").to_list() == [1_500_000, 6_700_000, 3_596_400, 12_500, None]
    assert coded.gross("half_up").to_list() == [1_500_000, 6_700_000, 3_596_400, 12_501, None]


def test_code_lines_keeps_the_columns_asked_for() -> None:
    source = lines(PRICED).with_columns(note=pl.lit("x"))
    coded = engine_bulk.code_lines(source, deals(), fx_rates(), PERIODS, keep=("note",))
    assert coded.frame.columns[:3] == ["note", "units", "amount_minor"]
    assert "line_id" not in coded.frame.columns


def test_a_line_without_an_fx_rate_in_its_period_has_none() -> None:
    source = lines([(1, "I0", "2025-02", "streaming", "USD", 1, 1)])
    coded = engine_bulk.code_lines(source, deals(), fx_rates(), PERIODS)
    assert coded.frame.get_column("usd_per_unit_micro").to_list() == [None]


def test_gross_is_rounded_as_asked_and_computed_once_per_rounding() -> None:
    # 1 penny at 1,250,050 micro-USD a pound is 12,500.5 micro-USD: a tie.
    source = lines([(1, "I1", "2025-01", "download", "GBP", 1, 1), PRICED[0]])
    source = pl.concat([source, lines([(9, "I1", "2025-01", "download", "GBP", 1, -1)])])
    coded = engine_bulk.code_lines(source, deals(), fx_rates(), PERIODS)
    even = coded.gross("half_even")
    assert even.to_list() == [12_500, 1_500_000, -12_500]
    assert coded.gross("half_up").to_list() == [12_501, 1_500_000, -12_501]
    assert coded.gross("half_even") is even
    assert "_gross" not in repr(coded)


def test_dense_terms_places_each_term_at_its_contract_channel_period_key() -> None:
    dense = engine_bulk.dense_terms(deals(), terms(), PERIODS)
    assert dense.size == 2 * 4 * 2
    assert dense.deal_contract.to_list() == [1, 0, 1]
    assert dense.deal_contract.dtype == pl.Int64
    rate: list[int | None] = [None] * 16
    esc_units: list[int | None] = [None] * 16
    esc_rate: list[int | None] = [None] * 16
    rate[0], rate[2], rate[3], rate[8], rate[10] = 100_000, 109_960, 120_000, 200_000, 210_000
    esc_units[3], esc_rate[3] = 5, 150_000
    esc_units[8], esc_rate[8] = 10, 250_003
    assert dense.rate.to_list() == rate
    assert dense.esc_units.to_list() == esc_units
    assert dense.esc_rate.to_list() == esc_rate
    assert {s.dtype for s in (dense.rate, dense.esc_units, dense.esc_rate)} == {pl.Int64}


def test_key_expr_numbers_contract_then_channel_then_period() -> None:
    frame = pl.DataFrame(
        {"deal_index": [0, 1, 2, 1], "channel_code": [0, 1, 3, 2], "period_index": [0, 1, 1, 0]}
    )
    contract_of_deal = pl.Series([1, 0, 2], dtype=pl.Int64)
    keys = frame.select(engine_bulk.key_expr(contract_of_deal, 3)).to_series().to_list()
    # (contract * 4 + channel) * 3 + period
    assert keys == [(1 * 4 + 0) * 3 + 0, (0 * 4 + 1) * 3 + 1, (2 * 4 + 3) * 3 + 1, 2 * 3]


def test_key_units_sums_units_per_key_and_skips_lines_without_one() -> None:
    frame = pl.DataFrame(
        {"_key": [0, 3, 0, None, 5], "units": [2, 5, 7, 100, 1]},
        schema={"_key": pl.Int64, "units": pl.Int64},
    )
    units = engine_bulk.key_units(frame, 6)
    assert units.to_list() == [9, 0, 0, 5, 0, 1]
    assert units.dtype == pl.Int64


def priced(**kwargs: Any) -> pl.DataFrame:
    coded = engine_bulk.code_lines(lines(PRICED), deals(), fx_rates(), PERIODS)
    return engine_bulk.price_lines(coded, deals(), terms(), **kwargs)


def test_price_lines_prices_each_line_under_its_own_terms() -> None:
    result = priced()
    assert result.columns == [
        "line_id",
        "units",
        "amount_minor",
        "deal_index",
        "period_index",
        "channel_code",
        "usd_per_unit_micro",
        "units_in_period",
        "gross_usd_micro",
        "rate_ppm",
        "escalated",
        "royalty_micro",
    ]
    assert result.select(
        "line_id", "units_in_period", "gross_usd_micro", "rate_ppm", "escalated", "royalty_micro"
    ).rows() == [
        # C2 streaming 2025-01 sells 4 + 7 = 11 > 10 units: escalated; 375,004.5 to even.
        (1, 11, 1_500_000, 250_003, True, 375_004),
        # C1 download 2025-02: 3 units, not over 5.
        (2, 3, 6_700_000, 120_000, False, 804_000),
        (3, 11, 3_596_400, 250_003, True, 899_111),
        # 12,500.5 to even, then 12,500 x 109,960 ppm = 1,374.5 to even.
        (5, 5, 12_500, 109_960, False, 1_374),
    ]


def test_price_lines_rounds_ties_up_when_asked() -> None:
    result = priced(rounding="half_up")
    assert result.select("line_id", "gross_usd_micro", "royalty_micro").rows() == [
        (1, 1_500_000, 375_005),
        (2, 6_700_000, 804_000),
        (3, 3_596_400, 899_111),
        (5, 12_501, 1_375),
    ]


def test_only_included_lines_count_unless_count_units_says_otherwise() -> None:
    include = pl.Series([True, True, False, True])
    alone = priced(include=include)
    assert alone.select("line_id", "units_in_period", "rate_ppm", "royalty_micro").rows() == [
        (1, 4, 200_000, 300_000),  # 4 units: no escalator
        (2, 3, 120_000, 804_000),
        (5, 5, 109_960, 1_374),
    ]
    counted = priced(include=include, count_units=pl.Series([True] * 4))
    assert counted.select("line_id", "units_in_period", "rate_ppm").rows() == [
        (1, 11, 250_003),
        (2, 3, 120_000),
        (5, 5, 109_960),
    ]


def test_the_escalator_at_exactly_its_threshold_bites_only_when_not_strict() -> None:
    by_key = pl.Series([0] * 16, dtype=pl.Int64).scatter([3, 8], [5, 10])
    strict = priced(units_by_key=by_key)
    assert strict.select("line_id", "units_in_period", "rate_ppm", "escalated").rows() == [
        (1, 10, 200_000, False),
        (2, 5, 120_000, False),
        (3, 10, 200_000, False),
        (5, 0, 109_960, False),
    ]
    loose = priced(units_by_key=by_key, escalator_strict=False)
    assert loose.select("line_id", "rate_ppm", "escalated").rows() == [
        (1, 250_003, True),
        (2, 150_000, True),
        (3, 250_003, True),
        (5, 109_960, False),
    ]


def test_line_royalties_is_code_lines_then_price_lines_half_even_and_strict_by_default() -> None:
    # C2 streaming 2025-01 sells 4 + 6 = exactly its threshold of 10 units.
    rows = [*PRICED[:2], (3, "I2", "2025-01", "streaming", "EUR", 6, 333), PRICED[3]]
    include = pl.Series([True, True, False, True])
    for kwargs in (
        {},
        {"include": include, "count_units": pl.Series([True] * 4)},
        {"rounding": "half_up", "escalator_strict": False},
    ):
        bulk = engine_bulk.line_royalties(
            lines(rows),
            deals(),
            terms(),
            fx_rates(),
            PERIODS,
            **kwargs,
        )
        coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS)
        full: dict[str, Any] = {"rounding": "half_even", "escalator_strict": True, **kwargs}
        assert bulk.equals(engine_bulk.price_lines(coded, deals(), terms(), **full)), kwargs
        if not kwargs:
            assert bulk.select(
                "line_id", "units_in_period", "rate_ppm", "royalty_micro"
            ).rows() == [
                (1, 10, 200_000, 300_000),
                (2, 3, 120_000, 804_000),
                (3, 10, 200_000, 719_280),
                (5, 5, 109_960, 1_374),
            ]
    kept = engine_bulk.line_royalties(
        lines(PRICED).with_columns(note=pl.lit("n")),
        deals(),
        terms(),
        fx_rates(),
        PERIODS,
        ("note",),
    )
    assert kept.columns[0] == "note"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"include": pl.Series([True, True, False, True])},
        {"include": pl.Series([True, True, False, True]), "count_units": pl.Series([True] * 4)},
        {"units_by_key": pl.Series([0] * 16, dtype=pl.Int64).scatter([3, 8], [5, 10])},
        {"rounding": "half_up", "escalator_strict": False},
    ],
)
def test_asking_for_some_columns_gives_those_columns_of_the_whole_result(
    options: dict[str, Any],
) -> None:
    whole = priced(**options)
    for columns in (
        ["royalty_micro", "line_id"],
        ["units", "gross_usd_micro", "rate_ppm", "escalated", "royalty_micro"],
        ["amount_minor", "usd_per_unit_micro", "units_in_period", "deal_index"],
        whole.columns,
    ):
        assert priced(**options, columns=columns).equals(whole.select(columns)), columns
    with pytest.raises(pl.exceptions.ColumnNotFoundError, match="isrc"):
        priced(**options, columns=["line_id", "isrc"])


UNKNOWN = [
    (11, "IX", "2025-01", "streaming", "USD", 1, 1),  # no deal for the ISRC
    (12, "I0", "2025-03", "streaming", "USD", 1, 1),  # period outside the run
    (13, "I0", "2025-01", "radio", "USD", 1, 1),  # no such channel
    (14, "I0", "2025-01", "streaming", "XYZ", 1, 1),  # no such currency
]


def test_a_line_unknown_in_any_one_column_is_refused_with_three_named() -> None:
    coded = engine_bulk.code_lines(lines([*PRICED, *UNKNOWN]), deals(), fx_rates(), PERIODS)
    with pytest.raises(WorldError) as refused:
        engine_bulk.price_lines(coded, deals(), terms())
    assert str(refused.value) == (
        "4 clean line(s) have an unknown ISRC, period, channel or currency, e.g. "
        "[{'isrc': 'IX', 'period': '2025-01', 'channel': 'streaming', 'currency': 'USD'}, "
        "{'isrc': 'I0', 'period': '2025-03', 'channel': 'streaming', 'currency': 'USD'}, "
        "{'isrc': 'I0', 'period': '2025-01', 'channel': 'radio', 'currency': 'USD'}]"
    )
    for one in UNKNOWN:
        coded = engine_bulk.code_lines(lines([*PRICED, one]), deals(), fx_rates(), PERIODS)
        with pytest.raises(WorldError, match=r"^1 clean line\(s\) have an unknown"):
            engine_bulk.price_lines(coded, deals(), terms())


def test_lines_left_out_are_not_checked_and_samples_are_found_by_position_without_ids() -> None:
    rows = [UNKNOWN[0], *PRICED, UNKNOWN[2]]
    coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS)
    include = pl.Series([False, True, True, True, True, True])
    with pytest.raises(WorldError) as refused:
        engine_bulk.price_lines(coded, deals(), terms(), include)
    assert str(refused.value).startswith("1 clean line(s)")
    assert str(refused.value).endswith(
        "e.g. [{'isrc': 'I0', 'period': '2025-01', 'channel': 'radio', 'currency': 'USD'}]"
    )
    # Without line ids the sample is found by position among the included lines.
    coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS, keep=())
    with pytest.raises(WorldError) as refused:
        engine_bulk.price_lines(coded, deals(), terms(), include)
    assert str(refused.value).endswith(
        "e.g. [{'isrc': 'I0', 'period': '2025-01', 'channel': 'radio', 'currency': 'USD'}]"
    )
    coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS, keep=())
    with pytest.raises(WorldError) as refused:
        engine_bulk.price_lines(coded, deals(), terms())
    assert str(refused.value).startswith("2 clean line(s)")
    assert str(refused.value).endswith(
        "e.g. [{'isrc': 'IX', 'period': '2025-01', 'channel': 'streaming', 'currency': 'USD'}, "
        "{'isrc': 'I0', 'period': '2025-01', 'channel': 'radio', 'currency': 'USD'}]"
    )
    priced_ok = engine_bulk.price_lines(
        coded, deals(), terms(), pl.Series([False, True, True, True, True, False])
    )
    assert priced_ok.height == 4


def test_a_line_without_an_fx_rate_is_refused_by_name_among_the_lines_counted() -> None:
    left_out = (20, "I0", "2025-02", "streaming", "EUR", 1, 1)  # no FX rate either
    rows = [left_out, *PRICED, (21, "I0", "2025-02", "streaming", "USD", 1, 1)]
    coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS, keep=())
    with pytest.raises(WorldError) as refused:
        engine_bulk.price_lines(coded, deals(), terms(), pl.Series([False] + [True] * 5))
    assert str(refused.value) == (
        "no FX rate for 1 line(s), e.g. [{'period': '2025-02', 'currency': 'USD'}]"
    )


def test_a_line_whose_contract_has_no_terms_for_its_channel_and_period_is_refused() -> None:
    left_out = (30, "I1", "2025-01", "sync", "USD", 1, 1)  # no terms either
    rows = [left_out, *PRICED, (31, "I0", "2025-01", "physical", "USD", 1, 1)]
    coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS, keep=())
    with pytest.raises(WorldError) as refused:
        engine_bulk.price_lines(coded, deals(), terms(), pl.Series([False] + [True] * 5))
    assert str(refused.value) == (
        "no contract terms for 1 line(s), e.g. "
        "[{'isrc': 'I0', 'channel': 'physical', 'period': '2025-01'}]"
    )


def test_a_royalty_product_beyond_int64_is_refused() -> None:
    # 10**12 cents at $1 is within Int64 (10**18), but its gross x 200,000 ppm is not.
    rows = [(1, "I0", "2025-01", "streaming", "USD", 1, 10**12)]
    coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS)
    with pytest.raises(WorldError, match=r"^gross_usd_micro × rate_ppm reaches about 2\.000e\+21"):
        engine_bulk.price_lines(coded, deals(), terms())


def test_the_recoupment_ledger_carries_each_balance_through_the_periods() -> None:
    accounts = pl.DataFrame({"account_id": ["ACC-2", "ACC-1"], "artist_id": ["A1", "A2"]})
    charges = pl.DataFrame(
        {
            "account_id": ["ACC-1", "ACC-1", "ACC-2", "ACC-9"],
            "period": ["2025-01", "2025-03", "2025-02", "2025-01"],
            "charges_micro": [500, 100, 50, 7],
        }
    )
    earnings = pl.DataFrame(
        {
            "account_id": ["ACC-1", "ACC-1", "ACC-1", "ACC-2", "ACC-2"],
            "period": ["2025-01", "2025-02", "2025-03", "2025-02", "2025-03"],
            "earnings_micro": [200, 400, 300, 30, -10],
        }
    )
    ledger = engine_bulk.recoupment_ledger(
        accounts, charges, earnings, ["2025-01", "2025-02", "2025-03"]
    )
    expected = pl.DataFrame(
        [
            # account, artist, period, charges, before, earnings, recouped, after, payable
            ("ACC-1", "A2", "2025-01", 500, 500, 200, 200, 300, 0),
            ("ACC-1", "A2", "2025-02", 0, 300, 400, 300, 0, 100),
            ("ACC-1", "A2", "2025-03", 100, 100, 300, 100, 0, 200),
            ("ACC-2", "A1", "2025-01", 0, 0, 0, 0, 0, 0),
            ("ACC-2", "A1", "2025-02", 50, 50, 30, 30, 20, 0),
            ("ACC-2", "A1", "2025-03", 0, 20, -10, 0, 20, -10),
        ],
        schema={
            "account_id": pl.String,
            "artist_id": pl.String,
            "period": pl.String,
            "charges_micro": pl.Int64,
            "balance_before_micro": pl.Int64,
            "earnings_micro": pl.Int64,
            "recouped_micro": pl.Int64,
            "balance_after_micro": pl.Int64,
            "payable_micro": pl.Int64,
        },
        orient="row",
    )
    assert ledger.equals(expected)
    assert ledger.schema == expected.schema


def account_ledger() -> pl.DataFrame:
    return pl.DataFrame(
        [
            # account, artist, period, earnings, recouped, payable, balance after
            ("X", "A1", "2025-01", 20_000, 15_000, 5_000, 45_000),
            ("Z", "A2", "2025-01", 35_000, 10_000, 25_000, 0),
            ("Y", "A1", "2025-01", 5_000, 0, 5_000, 0),
            ("X", "A1", "2024-12", 5_000, 5_000, 0, 60_000),
        ],
        schema={
            "account_id": pl.String,
            "artist_id": pl.String,
            "period": pl.String,
            "earnings_micro": pl.Int64,
            "recouped_micro": pl.Int64,
            "payable_micro": pl.Int64,
            "balance_after_micro": pl.Int64,
        },
        orient="row",
    )


ARTIST_COLUMNS = [
    "artist_id",
    "period",
    "gross_micro",
    "recouped_micro",
    "payable_micro",
    "net_payable_cents",
    "balance_after_micro",
    "gross_cents",
    "recouped_cents",
    "balance_after_cents",
    "account_count",
]


def test_the_artist_ledger_sums_accounts_then_rounds_once_half_even() -> None:
    ledger = engine_bulk.artist_ledger(account_ledger())
    assert ledger.columns == ARTIST_COLUMNS
    assert ledger.rows() == [
        # half a cent earned and recouped: 0 cents each
        ("A1", "2024-12", 5_000, 5_000, 0, 0, 60_000, 0, 0, 6, 1),
        # payables 0.5 + 0.5 cents = 1 cent; gross 2.5 -> 2, recouped 1.5 -> 2, balance 4.5 -> 4
        ("A1", "2025-01", 25_000, 15_000, 10_000, 1, 45_000, 2, 2, 4, 2),
        ("A2", "2025-01", 35_000, 10_000, 25_000, 2, 0, 4, 1, 0, 1),
    ]
    assert ledger.get_column("account_count").dtype == pl.Int64


def test_the_artist_ledger_under_the_rounding_misreadings() -> None:
    per_account = engine_bulk.artist_ledger(account_ledger(), payable_rounding="per_account")
    # Each account's half cent rounds to 0 before the sum.
    assert per_account.get_column("net_payable_cents").to_list() == [0, 0, 2]
    up = engine_bulk.artist_ledger(account_ledger(), rounding="half_up")
    assert up.select(
        "net_payable_cents", "gross_cents", "recouped_cents", "balance_after_cents"
    ).rows() == [(0, 1, 1, 6), (1, 3, 2, 5), (3, 4, 1, 0)]
    both = engine_bulk.artist_ledger(
        account_ledger(), rounding="half_up", payable_rounding="per_account"
    )
    assert both.get_column("net_payable_cents").to_list() == [0, 2, 3]


def test_an_amount_whose_conversion_leaves_int64_is_refused_before_pricing() -> None:
    rows = [(1, "I0", "2025-01", "streaming", "USD", 1, 10**13)]
    coded = engine_bulk.code_lines(lines(rows), deals(), fx_rates(), PERIODS)
    with pytest.raises(
        WorldError, match=r"^amount_minor × usd_per_unit_micro reaches about 1\.000e\+19"
    ):
        engine_bulk.price_lines(coded, deals(), terms())


def test_only_the_counted_lines_are_held_to_the_int64_bound() -> None:
    huge = (9, "I0", "2025-01", "streaming", "USD", 1, 10**13)
    coded = engine_bulk.code_lines(lines([*PRICED, huge]), deals(), fx_rates(), PERIODS)
    include = pl.Series([True] * len(PRICED) + [False])
    for columns in (None, ["line_id", "royalty_micro"]):
        counted = engine_bulk.price_lines(coded, deals(), terms(), include, columns=columns)
        assert counted.get_column("line_id").to_list() == [1, 2, 3, 5]
    with pytest.raises(WorldError, match=r"^amount_minor × usd_per_unit_micro reaches"):
        engine_bulk.price_lines(coded, deals(), terms(), pl.Series([True] * (len(PRICED) + 1)))


def reference_recoupment_ledger(
    accounts: pl.DataFrame, charges: pl.DataFrame, earnings: pl.DataFrame, periods: list[str]
) -> list[tuple[Any, ...]]:
    """Rule 8 as first written: :func:`engine.recoup` step by step, account by account."""
    charged = {(a, p): v for a, p, v in charges.iter_rows()}
    earned = {(a, p): v for a, p, v in earnings.iter_rows()}
    rows = []
    for account, artist in sorted(accounts.iter_rows()):
        balance = 0
        for period in periods:
            charge = charged.get((account, period), 0)
            step = engine.recoup(balance + charge, earned.get((account, period), 0))
            balance = step.balance_after_micro
            rows.append(
                (
                    account,
                    artist,
                    period,
                    charge,
                    step.balance_before_micro,
                    step.earnings_micro,
                    step.recouped_micro,
                    step.balance_after_micro,
                    step.payable_micro,
                )
            )
    return rows


_ACCOUNTS = [f"ACC-{n}" for n in range(5)]
_PERIODS = ["2025-01", "2025-02", "2025-03", "2025-04"]


@settings(max_examples=150, deadline=None)
@given(
    artists=st.lists(st.sampled_from(["A1", "A2", "A3"]), min_size=0, max_size=5),
    charged=st.dictionaries(
        st.tuples(st.sampled_from([*_ACCOUNTS, "ACC-9"]), st.sampled_from([*_PERIODS, "2026-01"])),
        st.integers(0, 10**15),
        max_size=12,
    ),
    earned=st.dictionaries(
        st.tuples(st.sampled_from(_ACCOUNTS), st.sampled_from(_PERIODS)),
        st.integers(-(10**12), 10**15),
        max_size=16,
    ),
    periods=st.integers(0, 4),
)
def test_the_recoupment_ledger_is_rule_8_step_by_step(
    artists: list[str],
    charged: dict[tuple[str, str], int],
    earned: dict[tuple[str, str], int],
    periods: int,
) -> None:
    """Any accounts, charges (some of accounts or periods not asked about) and earnings (some
    negative), over any number of periods: the ledger of every account at once is the one
    the scalar rule gives, row for row."""
    accounts = pl.DataFrame(
        {"account_id": _ACCOUNTS[: len(artists)][::-1], "artist_id": artists},
        schema={"account_id": pl.String, "artist_id": pl.String},
    )

    def cells(values: dict[tuple[str, str], int], column: str) -> pl.DataFrame:
        return pl.DataFrame(
            [(a, p, v) for (a, p), v in values.items()],
            schema={"account_id": pl.String, "period": pl.String, column: pl.Int64},
            orient="row",
        )

    charges, earnings = cells(charged, "charges_micro"), cells(earned, "earnings_micro")
    asked = _PERIODS[:periods]
    ledger = engine_bulk.recoupment_ledger(accounts, charges, earnings, asked)
    assert ledger.rows() == reference_recoupment_ledger(accounts, charges, earnings, asked)


def test_a_recoupment_ledger_refuses_two_charges_for_one_account_and_period() -> None:
    accounts = pl.DataFrame({"account_id": ["ACC-1"], "artist_id": ["A1"]})
    charges = pl.DataFrame(
        {"account_id": ["ACC-1", "ACC-1"], "period": ["2025-01"] * 2, "charges_micro": [1, 2]}
    )
    earnings = pl.DataFrame(
        schema={"account_id": pl.String, "period": pl.String, "earnings_micro": pl.Int64}
    )
    with pytest.raises(WorldError, match=r"^charges_micro holds more than one value"):
        engine_bulk.recoupment_ledger(accounts, charges, earnings, ["2025-01"])


def test_a_recoupment_ledger_of_no_accounts_is_empty_but_typed() -> None:
    accounts = pl.DataFrame(schema={"account_id": pl.String, "artist_id": pl.String})
    charges = pl.DataFrame(
        schema={"account_id": pl.String, "period": pl.String, "charges_micro": pl.Int64}
    )
    earnings = pl.DataFrame(
        schema={"account_id": pl.String, "period": pl.String, "earnings_micro": pl.Int64}
    )
    ledger = engine_bulk.recoupment_ledger(accounts, charges, earnings, ["2025-01"])
    assert ledger.height == 0
    assert ledger.schema == pl.Schema(
        {"account_id": pl.String, "artist_id": pl.String, "period": pl.String}
        | {
            name: pl.Int64
            for name in (
                "charges_micro",
                "balance_before_micro",
                "earnings_micro",
                "recouped_micro",
                "balance_after_micro",
                "payable_micro",
            )
        }
    )


def test_dense_terms_refuses_a_period_listed_twice() -> None:
    with pytest.raises(WorldError, match=r"^duplicate period in \['2025-01', '2025-01'\]"):
        engine_bulk.dense_terms(deals(), terms(), ["2025-01", "2025-01"])


def test_dense_terms_of_no_deals_are_empty_int64_arrays() -> None:
    dense = engine_bulk.dense_terms(deals().clear(), terms(), PERIODS)
    assert dense.size == 0
    for array in (dense.deal_contract, dense.rate, dense.esc_units, dense.esc_rate):
        assert array.dtype == pl.Int64
        assert array.len() == 0


def test_dense_terms_without_any_escalator_still_hold_int64_arrays() -> None:
    plain = terms().with_columns(escalator_units=None, escalated_rate_ppm=None)
    dense = engine_bulk.dense_terms(deals(), plain, PERIODS)
    assert dense.esc_units.dtype == dense.esc_rate.dtype == pl.Int64
    assert dense.esc_units.null_count() == dense.esc_rate.null_count() == 16


def test_code_lines_refuses_an_isrc_under_two_deals_and_a_period_listed_twice() -> None:
    twice = pl.concat([deals(), deals().head(1)])
    with pytest.raises(WorldError, match=r"^duplicate ISRC in \['I0', 'I1', 'I2', 'I0'\]"):
        engine_bulk.code_lines(lines(PRICED), twice, fx_rates(), PERIODS)
    with pytest.raises(WorldError, match=r"^duplicate period in \['2025-01', '2025-01'\]"):
        engine_bulk.code_lines(lines(PRICED), deals(), fx_rates(), ["2025-01", "2025-01"])


def test_lines_coded_with_no_fx_rate_at_all_have_an_int64_null_rate() -> None:
    coded = engine_bulk.code_lines(lines(PRICED), deals(), fx_rates().clear(), PERIODS)
    rate = coded.frame.get_column("usd_per_unit_micro")
    assert rate.dtype == pl.Int64
    assert rate.null_count() == len(PRICED)


def test_dense_terms_are_computed_once_per_deals_and_terms_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found profiling the suite: 32 readings of a 1x world computed the dense terms 32
    times over 6 distinct deals and terms, 5 ms each."""
    computed: list[tuple[int, int]] = []
    compute = engine_bulk.compute_dense_terms

    def counted(
        deals: pl.DataFrame, terms: pl.DataFrame, periods: Sequence[str]
    ) -> engine_bulk.DenseTerms:
        computed.append((id(deals), id(terms)))
        return compute(deals, terms, periods)

    monkeypatch.setattr(engine_bulk, "compute_dense_terms", counted)
    the_deals, the_terms = deals(), terms()
    first = engine_bulk.dense_terms(the_deals, the_terms, PERIODS)
    assert engine_bulk.dense_terms(the_deals, the_terms, PERIODS) is first
    other_terms = terms()  # equal, but another frame: computed afresh
    again = engine_bulk.dense_terms(the_deals, other_terms, PERIODS)
    assert again is not first
    assert again.rate.to_list() == first.rate.to_list()
    assert engine_bulk.dense_terms(the_deals, the_terms, PERIODS[:1]).size == first.size // 2
    assert len(computed) == 3

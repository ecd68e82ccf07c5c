"""The label's royalty terms: each base contract's rate per channel (some with an
escalator) and the amendments that replace a channel's whole row (rule R4)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import polars as pl

from eval_pipeline.world.label.engine import CHANNELS
from eval_pipeline.world.label.roster import WORLD_END, WORLD_START, ContractDraws, date_between
from eval_pipeline.world.rng import Cumulative, Stream

N_AMENDED_TWICE = 7
N_AMENDMENTS = 84
# An amendment that changes a channel with an escalator removes it this often.
ESCALATOR_REMOVAL_PPM = 350_000

# A contract's popularity is the sum of its tracks' expected monthly streams. A month's
# streaming units are about 0.95 of it and download units about 0.00095 of it; escalator
# thresholds sit at 0.8-1.25 times that, so many escalators bite in some months and not
# in others.
STREAMS_PER_MILLE_OF_POPULARITY = 950
DOWNLOADS_PER_MILLION_OF_POPULARITY = 950

RateRow = tuple[int, int | None, int | None]
"""(rate_ppm, escalator_units, escalated_rate_ppm) of one channel."""


def nice_units(value: int) -> int:
    """Two significant digits, at least 10: 123_456 -> 120_000."""
    step = int(10 ** max(1, len(str(max(value, 1))) - 2))
    return max(10, (value // step) * step)


def _escalator_units(stream: Stream, counter: int, channel: str, popularity: int) -> int:
    spread = stream.between(counter, 800, 1_250)
    if channel == "streaming":
        expected = popularity * STREAMS_PER_MILLE_OF_POPULARITY // 1_000
    else:
        expected = popularity * DOWNLOADS_PER_MILLION_OF_POPULARITY // 1_000_000
    return nice_units(expected * spread // 1_000)


def draw_base_rates(stream: Stream, contract_pop: list[int]) -> list[dict[str, RateRow]]:
    """Each base contract's row per channel; about a third escalate streaming, a few
    downloads."""
    rates: list[dict[str, RateRow]] = []
    for c, popularity in enumerate(contract_pop):
        own = stream.child(str(c))
        base_rates = (
            150_000 + 2_500 * own.below(0, 41),
            120_000 + 2_500 * own.below(1, 33),
            100_000 + 2_500 * own.below(2, 33),
            400_000 + 25_000 * own.below(3, 7),
        )
        terms: dict[str, RateRow] = {}
        for channel, rate in zip(CHANNELS, base_rates, strict=True):
            row: RateRow = (rate, None, None)
            if channel == "streaming" and own.chance(4, 320_000):
                row = (
                    rate,
                    _escalator_units(own, 5, channel, popularity),
                    rate + 2_500 * own.between(6, 8, 20),
                )
            elif channel == "download" and own.chance(7, 80_000):
                row = (
                    rate,
                    _escalator_units(own, 9, channel, popularity),
                    rate + 2_500 * own.between(8, 4, 12),
                )
            terms[channel] = row
        rates.append(terms)
    return rates


def _amended_row(stream: Stream, channel: str, row: RateRow, popularity: int) -> RateRow:
    """An amendment's whole new row for one channel (rule R4), from the row in force: the
    rate moves by 1 to 3 points; an escalator may be removed, or one added to streaming."""
    rate, esc_units, esc_rate = row
    step = 10_000 + 2_500 * stream.below(0, 9)
    new_rate = max(50_000, rate + step if stream.chance(1, 750_000) else rate - step)
    if esc_units is not None and stream.chance(2, ESCALATOR_REMOVAL_PPM):
        esc_units, esc_rate = None, None
    elif channel == "streaming" and stream.chance(3, 450_000):
        esc_units = _escalator_units(stream, 4, channel, popularity)
        esc_rate = new_rate + 2_500 * stream.between(5, 8, 20)
    elif esc_rate is not None:
        esc_rate = max(esc_rate, new_rate + 10_000)
    return (new_rate, esc_units, esc_rate)


@dataclass(frozen=True)
class Amendment:
    amendment_id: str
    base_index: int
    effective: date
    rows: dict[str, RateRow]


def draw_amendments(
    stream: Stream,
    contracts: ContractDraws,
    base_rates: list[dict[str, RateRow]],
    contract_pop: list[int],
) -> list[Amendment]:
    """84 amendments (seven contracts amended twice), each replacing one or two channels'
    whole rows; an amendment may remove an escalator (its row has no threshold)."""
    n_base = len(contracts.artist)
    weights = Cumulative([4 if contracts.end[c] >= WORLD_START else 1 for c in range(n_base)])
    amended: list[int] = []
    picks = stream.child("contracts")
    counter = 0
    while len(amended) < N_AMENDMENTS - N_AMENDED_TWICE:
        c = picks.choice_index(counter, weights)
        counter += 1
        if c not in amended:
            amended.append(c)
    order = stream.child("twice").permutation(len(amended))
    twice = [amended[i] for i in order[:N_AMENDED_TWICE]]
    plan = sorted([(c, 1) for c in amended] + [(c, 2) for c in twice])
    current = [dict(terms) for terms in base_rates]
    dates: dict[tuple[int, int], date] = {}
    result: list[Amendment] = []
    for c, number in plan:
        own = stream.child(f"{c}/{number}")
        low = max(contracts.effective[c] + timedelta(days=60), date(2019, 1, 1))
        high = min(contracts.end[c], WORLD_END)
        if low > high:
            low = contracts.effective[c] + timedelta(days=1)
        if number == 1 and own.chance(0, 450_000) and high >= WORLD_START:
            low = max(low, WORLD_START)
        if number == 2:
            low = max(low, dates[(c, 1)] + timedelta(days=30))
            high = max(high, low)
        dates[(c, number)] = date_between(own, 1, low, high)
        n_channels = 1 + int(own.chance(2, 300_000))
        picked: list[str] = []
        draws = own.child("channels")
        draw = 0
        while len(picked) < n_channels:
            channel = CHANNELS[draws.choice_index(draw, [50, 20, 15, 15])]
            draw += 1
            if channel not in picked:
                picked.append(channel)
        rows: dict[str, RateRow] = {}
        for channel in sorted(picked, key=CHANNELS.index):
            rows[channel] = _amended_row(
                own.child(channel), channel, current[c][channel], contract_pop[c]
            )
            current[c][channel] = rows[channel]
        result.append(Amendment(f"CON-{c + 1:04d}-A{number}", c, dates[(c, number)], rows))
    return result


def rates_frame(
    base_ids: list[str], base_rates: list[dict[str, RateRow]], amendments: list[Amendment]
) -> pl.DataFrame:
    """contract_rates: a row per channel of each base contract, and per changed channel of
    each amendment."""
    rows: dict[str, list[object]] = {k: [] for k in _RATE_SCHEMA}
    entries = [(base_ids[c], terms) for c, terms in enumerate(base_rates)]
    entries += [(amendment.amendment_id, amendment.rows) for amendment in amendments]
    for contract_id, terms in entries:
        for channel in CHANNELS:
            if channel in terms:
                rate, esc_units, esc_rate = terms[channel]
                for column, value in zip(
                    _RATE_SCHEMA, (contract_id, channel, rate, esc_units, esc_rate), strict=True
                ):
                    rows[column].append(value)
    return pl.DataFrame(rows, schema=_RATE_SCHEMA).sort(
        ["contract_id", pl.col("channel").replace_strict(list(CHANNELS), list(range(4)))]
    )


_RATE_SCHEMA: dict[str, type[pl.DataType]] = {
    "contract_id": pl.String,
    "channel": pl.String,
    "rate_ppm": pl.Int64,
    "escalator_units": pl.Int64,
    "escalated_rate_ppm": pl.Int64,
}

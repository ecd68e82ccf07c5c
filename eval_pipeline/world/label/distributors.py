"""The label's distributors, their territories and outlets, monthly FX, and the
(distributor, territory, outlet) combinations statement lines are drawn from."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from eval_pipeline.world.label.engine import CHANNELS
from eval_pipeline.world.rng import Stream

PERIODS: tuple[str, ...] = tuple(f"2025-{m:02d}" for m in range(1, 13))
SEASON_PERMILLE: tuple[int, ...] = (
    960,
    930,
    980,
    990,
    1000,
    1010,
    1020,
    1000,
    990,
    1020,
    1050,
    1150,
)
_PRIMES: tuple[int, ...] = (
    211,
    223,
    227,
    229,
    233,
    239,
    241,
    251,
    257,
    263,
    269,
    271,
    277,
    281,
    283,
    293,
)


@dataclass(frozen=True)
class Outlet:
    """A sales outlet of a distributor: a store, a subscription tier, a media type."""

    name: str
    channel: str
    weight: int
    # net receipts per unit, minor units of the statement currency times 10^6
    price_micro_minor: int


@dataclass(frozen=True)
class Territory:
    code: str
    weight: int
    price_permille: int


@dataclass(frozen=True)
class DistributorSpec:
    distributor_id: str
    name: str
    currency: str
    decimal_comma: bool
    quirk: str
    lines_per_month: int
    territories: tuple[Territory, ...]
    outlets: tuple[Outlet, ...]
    # units a track sells through this distributor per channel, per million of its streams
    units_per_million: tuple[tuple[str, int], ...]


def _t(*rows: tuple[str, int, int]) -> tuple[Territory, ...]:
    return tuple(Territory(code, weight, price) for code, weight, price in rows)


def _o(*rows: tuple[str, str, int, int]) -> tuple[Outlet, ...]:
    return tuple(Outlet(name, channel, weight, price) for name, channel, weight, price in rows)


DISTRIBUTORS: tuple[DistributorSpec, ...] = (
    DistributorSpec(
        "DST-01",
        "Streamwave",
        "USD",
        False,
        "Global streaming service; one line per ISRC, territory and subscription tier; "
        "amounts in US cents.",
        19_000,
        _t(
            ("US", 300, 1000),
            ("GB", 90, 950),
            ("DE", 80, 900),
            ("BR", 60, 350),
            ("FR", 55, 850),
            ("MX", 55, 330),
            ("CA", 45, 900),
            ("AU", 40, 900),
            ("JP", 40, 800),
            ("IN", 40, 120),
            ("ES", 30, 700),
            ("IT", 30, 700),
            ("NL", 25, 900),
            ("SE", 25, 1000),
            ("PL", 20, 450),
            ("ID", 20, 150),
            ("PH", 15, 160),
            ("TR", 15, 200),
            ("AR", 15, 180),
            ("CO", 12, 250),
            ("CL", 10, 300),
            ("NO", 10, 1050),
            ("DK", 10, 1000),
            ("BE", 10, 900),
            ("CH", 10, 1100),
            ("KR", 10, 600),
            ("FI", 8, 950),
            ("AT", 8, 900),
            ("IE", 8, 950),
            ("NZ", 8, 900),
            ("ZA", 8, 300),
            ("TW", 8, 500),
            ("TH", 8, 250),
            ("SG", 6, 700),
            ("HK", 6, 700),
            ("MY", 6, 300),
            ("PT", 6, 600),
            ("CZ", 5, 450),
            ("GR", 5, 500),
            ("RO", 5, 350),
        ),
        _o(
            ("premium", "streaming", 50, 550_000),
            ("ad-supported", "streaming", 25, 120_000),
            ("family", "streaming", 12, 420_000),
            ("student", "streaming", 8, 300_000),
            ("duo", "streaming", 5, 480_000),
        ),
        (("streaming", 560_000),),
    ),
    DistributorSpec(
        "DST-02",
        "Klangfluss Digital",
        "EUR",
        True,
        "European streaming service; its statement files write euro amounts with decimal "
        "commas ('1.234,56'); amount_minor holds them parsed to euro cents.",
        10_000,
        _t(
            ("DE", 300, 1000),
            ("FR", 150, 950),
            ("ES", 90, 750),
            ("IT", 90, 750),
            ("NL", 70, 1000),
            ("AT", 50, 1000),
            ("CH", 50, 1150),
            ("PL", 50, 500),
            ("BE", 45, 950),
            ("SE", 40, 1050),
            ("DK", 25, 1050),
            ("NO", 25, 1100),
            ("FI", 20, 1000),
            ("PT", 20, 650),
            ("IE", 20, 1000),
            ("CZ", 15, 500),
            ("RO", 12, 400),
            ("GR", 10, 550),
            ("HU", 10, 450),
            ("LU", 3, 1100),
        ),
        _o(
            ("premium", "streaming", 55, 450_000),
            ("free", "streaming", 30, 100_000),
            ("family", "streaming", 15, 350_000),
            ("student", "streaming", 10, 250_000),
        ),
        (("streaming", 240_000),),
    ),
    DistributorSpec(
        "DST-03",
        "Albion Sounds",
        "GBP",
        False,
        "UK and Crown Dependencies store selling streams and downloads; amounts in pence.",
        4_000,
        _t(("GB", 900, 1000), ("IE", 80, 1000), ("IM", 5, 1000), ("JE", 5, 1000), ("GG", 4, 1000)),
        _o(
            ("stream-premium", "streaming", 45, 400_000),
            ("stream-free", "streaming", 25, 90_000),
            ("stream-family", "streaming", 10, 320_000),
            ("stream-student", "streaming", 5, 250_000),
            ("stream-radio", "streaming", 4, 150_000),
            ("download-track", "download", 10, 59_000_000),
            ("download-album", "download", 6, 45_000_000),
            ("download-hires", "download", 2, 99_000_000),
        ),
        (("streaming", 80_000), ("download", 400)),
    ),
    DistributorSpec(
        "DST-04",
        "Transatlantic Records Retail",
        "USD",
        False,
        "US and UK record retailer (shops and web) selling CDs, vinyl and downloads; one "
        "USD statement for both countries, UK sales converted by the retailer. UK lines "
        "have been seen left in pounds.",
        3_500,
        _t(
            ("US", 600, 1000),
            ("GB", 250, 1000),
            ("CA", 80, 950),
            ("AU", 50, 950),
            ("NZ", 10, 950),
            ("IE", 10, 1000),
        ),
        _o(
            ("cd-store", "physical", 20, 650_000_000),
            ("cd-online", "physical", 15, 700_000_000),
            ("vinyl-store", "physical", 10, 1_100_000_000),
            ("vinyl-online", "physical", 8, 1_150_000_000),
            ("download-track", "download", 30, 70_000_000),
            ("download-album", "download", 17, 55_000_000),
            ("download-track-app", "download", 10, 69_000_000),
            ("download-album-app", "download", 6, 54_000_000),
        ),
        (("physical", 80), ("download", 900)),
    ),
    DistributorSpec(
        "DST-05",
        "Sakura Stream",
        "JPY",
        False,
        "Japanese streaming and download service; yen have no minor unit, so amounts are "
        "whole yen.",
        2_500,
        _t(("JP", 1000, 1000)),
        _o(
            ("standard-mobile", "streaming", 25, 550_000),
            ("standard-desktop", "streaming", 10, 550_000),
            ("standard-tv", "streaming", 3, 550_000),
            ("standard-speaker", "streaming", 2, 550_000),
            ("free-mobile", "streaming", 15, 100_000),
            ("free-desktop", "streaming", 5, 100_000),
            ("free-tv", "streaming", 2, 100_000),
            ("family-mobile", "streaming", 10, 400_000),
            ("family-desktop", "streaming", 3, 400_000),
            ("family-tv", "streaming", 2, 400_000),
            ("student-mobile", "streaming", 6, 300_000),
            ("student-desktop", "streaming", 2, 300_000),
            ("student-tv", "streaming", 1, 300_000),
            ("download-track", "download", 8, 140_000_000),
            ("download-album", "download", 5, 110_000_000),
            ("download-hires", "download", 2, 250_000_000),
        ),
        (("streaming", 70_000), ("download", 300)),
    ),
    DistributorSpec(
        "DST-06",
        "Frameline Sync",
        "USD",
        False,
        "Sync licensing agent; one line per placement (units = 1) with the licence fee "
        "net of the agent's commission; territory WW (worldwide).",
        12,
        _t(("WW", 1, 1000)),
        _o(
            ("film", "sync", 20, 0),
            ("tv", "sync", 30, 0),
            ("advertising", "sync", 20, 0),
            ("games", "sync", 15, 0),
            ("trailer", "sync", 15, 0),
        ),
        (("sync", 0),),
    ),
)

SYNC_FEES_CENTS: tuple[tuple[int, int], ...] = (
    (75_000, 20),
    (150_000, 25),
    (250_000, 20),
    (500_000, 15),
    (750_000, 8),
    (1_200_000, 6),
    (2_500_000, 4),
    (4_000_000, 2),
)
FX_START_MICRO: dict[str, int] = {
    "USD": 1_000_000,
    "EUR": 1_035_200,
    "GBP": 1_241_500,
    "JPY": 6_412,
}


def distributor_frame(specs: tuple[DistributorSpec, ...]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "distributor_id": [d.distributor_id for d in specs],
            "name": [d.name for d in specs],
            "currency": [d.currency for d in specs],
            "decimal_comma": [d.decimal_comma for d in specs],
            "quirk": [d.quirk for d in specs],
            "channels": [",".join(sorted({o.channel for o in d.outlets})) for d in specs],
        },
        schema={
            "distributor_id": pl.String,
            "name": pl.String,
            "currency": pl.String,
            "decimal_comma": pl.Boolean,
            "quirk": pl.String,
            "channels": pl.String,
        },
    )


def fx_frame(seed: int, currencies: tuple[str, ...]) -> pl.DataFrame:
    """Monthly FX as a bounded integer random walk, in USD per unit to six decimals: the
    conversion of a line rounds (rule 2), so converting each line and converting a sum differ."""
    stream = Stream(seed, "label/fx")
    rows: dict[str, list[object]] = {"period": [], "currency": [], "usd_per_unit_micro": []}
    for currency in currencies:
        rate = FX_START_MICRO[currency]
        walk = stream.child(currency)
        for pi, period in enumerate(PERIODS):
            if currency != "USD" and pi > 0:
                step = walk.between(pi, -15_000, 15_000)
                rate = rate * (1_000_000 + step) // 1_000_000
            rows["period"].append(period)
            rows["currency"].append(currency)
            rows["usd_per_unit_micro"].append(rate)
    return pl.DataFrame(
        rows, schema={"period": pl.String, "currency": pl.String, "usd_per_unit_micro": pl.Int64}
    ).sort(["period", "currency"])


def combo_frame(specs: tuple[DistributorSpec, ...]) -> pl.DataFrame:
    """Every (distributor, physical-capable, rank) -> territory/outlet, heaviest first.

    ``combo_id = (dist_index * 2 + physical_ok) * 1024 + rank`` is a dense integer key.
    """
    rows: dict[str, list[object]] = {
        k: []
        for k in (
            "combo_id",
            "dist_index",
            "physical_ok",
            "rank",
            "territory",
            "outlet",
            "channel",
            "channel_code",
            "combo_weight",
            "price_micro_minor",
            "units_per_million",
        )
    }
    for di, spec in enumerate(specs):
        per_million = dict(spec.units_per_million)
        for physical_ok in (False, True):
            combos = [
                (
                    t.weight * o.weight,
                    t.code,
                    o.name,
                    o.channel,
                    o.price_micro_minor * t.price_permille // 1_000,
                )
                for t in spec.territories
                for o in spec.outlets
                if physical_ok or o.channel != "physical"
            ]
            combos.sort(key=lambda c: (-c[0], c[1], c[2]))
            for rank, (weight, code, outlet, channel, price) in enumerate(combos):
                rows["combo_id"].append((di * 2 + int(physical_ok)) * 1024 + rank)
                rows["dist_index"].append(di)
                rows["physical_ok"].append(physical_ok)
                rows["rank"].append(rank)
                rows["territory"].append(code)
                rows["outlet"].append(outlet)
                rows["channel"].append(channel)
                rows["channel_code"].append(CHANNELS.index(channel))
                rows["combo_weight"].append(weight)
                rows["price_micro_minor"].append(price)
                rows["units_per_million"].append(per_million[channel])
    return pl.DataFrame(
        rows,
        schema={
            "combo_id": pl.Int64,
            "dist_index": pl.Int64,
            "physical_ok": pl.Boolean,
            "rank": pl.Int64,
            "territory": pl.String,
            "outlet": pl.String,
            "channel": pl.String,
            "channel_code": pl.Int64,
            "combo_weight": pl.Int64,
            "price_micro_minor": pl.Int64,
            "units_per_million": pl.Int64,
        },
    )

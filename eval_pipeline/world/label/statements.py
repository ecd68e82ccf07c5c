"""Distributors, monthly FX, statements and their lines, and the planted anomalies.

Line generation is vectorized: one row per (statement, released track) decides how many
lines the track gets (stochastic rounding of its share of the statement's volume), the
rows are exploded, and each line takes a distinct (territory, outlet) combination of the
distributor through an affine permutation ``(a * j + b) mod m`` with ``a`` a prime larger
than ``m``. A track's units are spread over its lines in proportion to the combinations'
weights, so the streams a track earns in a month do not depend on the scale; the scale
only multiplies how many lines report them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Any

import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label.catalog import Catalog
from eval_pipeline.world.label.engine import (
    CHANNELS,
    CURRENCY_EXPONENTS,
    div_half_even,
    period_end,
)
from eval_pipeline.world.rng import Stream, high_below, low_below

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


@dataclass(frozen=True)
class PlantedAnomaly:
    """One planted anomaly before line ids exist (``tmp`` is the line's position key)."""

    kind: str
    tmp: int
    related_tmp: int | None
    flaggable: bool
    note: str


@dataclass(frozen=True)
class Statements:
    distributors: pl.DataFrame
    fx_rates: pl.DataFrame
    statements: pl.DataFrame
    statement_lines: pl.DataFrame
    # truth: anomaly_id, kind, line_id, statement_id, flaggable, borderline, note,
    # related_line_id
    anomalies: pl.DataFrame


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
    """Monthly FX as a bounded integer random walk (EUR, GBP to 1e-4 USD; JPY to 1e-6)."""
    stream = Stream(seed, "label/fx")
    rows: dict[str, list[object]] = {"period": [], "currency": [], "usd_per_unit_micro": []}
    for ci, currency in enumerate(currencies):
        rate = FX_START_MICRO[currency]
        for pi, period in enumerate(PERIODS):
            if currency != "USD" and pi > 0:
                step = stream.between(ci * 100 + pi, -15_000, 15_000)
                rate = rate * (1_000_000 + step) // 1_000_000
                if currency != "JPY":
                    rate = div_half_even(rate, 100) * 100
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


def clean_lines(
    seed: int,
    scale_ppm: int,
    catalog: Catalog,
    specs: tuple[DistributorSpec, ...],
    combos: pl.DataFrame,
) -> pl.DataFrame:
    """Clean statement lines as integers: tmp (position key), stmt_index, track_index,
    combo_id, units, amount_minor. Strings are attached later, once."""
    stream = Stream(seed, "label/lines")
    s_pair, s_window, s_line = (stream.child(n) for n in ("pair", "window", "line"))
    statements = pl.DataFrame(
        {
            "stmt_index": list(range(len(specs) * len(PERIODS))),
            "dist_index": [di for di in range(len(specs)) for _ in PERIODS],
            "period_index": [pi for _ in specs for pi in range(len(PERIODS))],
            "period_end": [period_end(p) for _ in specs for p in PERIODS],
            "volume": [spec.lines_per_month for spec in specs for _ in PERIODS],
            "season": [SEASON_PERMILLE[pi] for _ in specs for pi in range(len(PERIODS))],
            "has_physical_outlets": [
                any(o.channel == "physical" for o in spec.outlets)
                for spec in specs
                for _ in PERIODS
            ],
        },
        schema={
            "stmt_index": pl.Int64,
            "dist_index": pl.Int64,
            "period_index": pl.Int64,
            "period_end": pl.Date,
            "volume": pl.Int64,
            "season": pl.Int64,
            "has_physical_outlets": pl.Boolean,
        },
    )
    pool = combos.group_by(["dist_index", "physical_ok"]).agg(pool_size=pl.len().cast(pl.Int64))
    facts = catalog.track_facts.select(
        "track_index", "release_date", "has_physical", "popularity", "presence"
    ).with_columns(
        release_period=(pl.col("release_date").dt.year().cast(pl.Int64) - 2025) * 12
        + pl.col("release_date").dt.month().cast(pl.Int64)
        - 1
    )
    # One row per (statement, released track); the pair decides how many lines it gets.
    pairs = (
        statements.join(facts, how="cross")
        .filter(pl.col("release_date") <= pl.col("period_end"))
        .with_columns(physical_ok=pl.col("has_physical") & pl.col("has_physical_outlets"))
        .join(pool, on=["dist_index", "physical_ok"], how="left", maintain_order="left")
    )
    presence_total = pl.col("presence").sum().over("stmt_index")
    numerator = pl.col("volume") * scale_ppm * pl.col("presence")
    denominator = presence_total * 1_000_000
    pairs = pairs.with_columns(
        pair_id=pl.col("stmt_index") * 1_000_000 + pl.col("track_index"),
        whole=numerator // denominator,
        fraction_ppm=(numerator % denominator) * 1_000_000 // denominator,
    )
    pairs = s_pair.add_u64(pairs, "pair_id", "u_pair")
    pairs = s_window.add_u64(pairs, "pair_id", "u_window")
    pairs = pairs.with_columns(
        k=pl.min_horizontal(
            pl.col("whole")
            + (high_below(pl.col("u_pair"), 1_000_000) < pl.col("fraction_ppm")).cast(pl.Int64),
            pl.col("pool_size"),
        ),
    ).filter(pl.col("k") > 0)
    # New releases sell more in their first months; December more than February.
    age = pl.col("period_index") - pl.col("release_period")
    boost = (
        pl.when(age == 0)
        .then(2_500)
        .when(age == 1)
        .then(2_000)
        .when(age == 2)
        .then(1_500)
        .otherwise(1_000)
    )
    primes = pl.lit(pl.Series(_PRIMES, dtype=pl.Int64))
    pairs = pairs.with_columns(
        window=pl.min_horizontal(pl.col("pool_size"), pl.col("k") * 2 + 2),
        a=primes.gather(low_below(pl.col("u_pair"), len(_PRIMES))),
        streams=pl.col("popularity") * boost // 1_000 * pl.col("season") // 1_000,
        combo_base=(pl.col("dist_index") * 2 + pl.col("physical_ok").cast(pl.Int64)) * 1024,
    ).with_columns(b=high_below(pl.col("u_window"), pl.col("window")))
    lines = (
        pairs.select(
            "stmt_index",
            "track_index",
            "streams",
            "window",
            "a",
            "b",
            "pair_id",
            "combo_base",
            j=pl.int_ranges(0, pl.col("k")),
        )
        .explode("j")
        .select(
            "stmt_index",
            "track_index",
            "streams",
            "pair_id",
            combo_id=pl.col("combo_base")
            + (pl.col("a") * pl.col("j") + pl.col("b")) % pl.col("window"),
            line_counter=pl.col("pair_id") * 4_096 + pl.col("j"),
        )
        .join(
            combos.select(
                "combo_id", "channel_code", "combo_weight", "price_micro_minor", "units_per_million"
            ),
            on="combo_id",
            how="inner",
            maintain_order="left",
        )
        .with_row_index("tmp")
    )
    lines = s_line.add_u64(lines, "line_counter", "u_line")
    # A track's units for a distributor and channel, spread over its lines by combination
    # weight, with +-30% noise per line; at least one unit on a reported line.
    weight_total = pl.col("combo_weight").sum().over(pl.col("pair_id") * 4 + pl.col("channel_code"))
    expected = pl.col("streams") * pl.col("units_per_million") // 1_000_000
    noise = 700 + high_below(pl.col("u_line"), 601)
    price_noise = 950 + low_below(pl.col("u_line"), 101)
    # Keep only what the next steps read (at 10x scale every Int64 column is 37 MB).
    lines = lines.select(
        "tmp",
        pl.col("stmt_index").cast(pl.Int32),
        pl.col("track_index").cast(pl.Int32),
        pl.col("combo_id").cast(pl.Int32),
        pl.col("channel_code").cast(pl.Int32),
        units=pl.max_horizontal(
            pl.lit(1, dtype=pl.Int64),
            expected * pl.col("combo_weight") * noise // (weight_total * 1_000),
        ),
        unit_price=pl.col("price_micro_minor") * price_noise // 1_000,
        # Sync placements: a fee drawn from a ladder (low bits of the line's draw).
        fee_draw=low_below(pl.col("u_line"), sum(w for _, w in SYNC_FEES_CENTS)),
    )
    fee: pl.Expr = pl.lit(SYNC_FEES_CENTS[-1][0], dtype=pl.Int64)
    running = sum(w for _, w in SYNC_FEES_CENTS)
    for cents, weight in reversed(SYNC_FEES_CENTS):
        running -= weight
        fee = (
            pl.when(pl.col("fee_draw") >= running)
            .then(pl.lit(cents, dtype=pl.Int64))
            .otherwise(fee)
        )
    is_sync = pl.col("channel_code") == CHANNELS.index("sync")
    # The half-even helper reads its numerator several times: materialize it first.
    lines = lines.with_columns(
        units=pl.when(is_sync).then(pl.lit(1, dtype=pl.Int64)).otherwise(pl.col("units")),
        amount_numerator=pl.col("units") * pl.col("unit_price"),
    )
    return lines.select(
        pl.col("tmp").cast(pl.Int64),
        "stmt_index",
        "track_index",
        "combo_id",
        "channel_code",
        pl.col("units").cast(pl.Int64),
        amount_minor=pl.when(is_sync)
        .then(fee)
        .otherwise(div_half_even(pl.col("amount_numerator"), 1_000_000))
        .cast(pl.Int64),
    )


# -- assembling the world's statement tables --------------------------------------------

ANOMALY_PLAN: tuple[tuple[str, int, bool], ...] = (
    # (kind, how many, flaggable)
    ("duplicate", 10, True),
    ("unknown_isrc", 8, True),
    ("currency_mismatch", 7, True),
    ("negative_units", 6, True),
    ("zero_units_with_amount", 4, True),
    ("pre_release", 3, True),
    ("genuine_return", 1, False),
    ("territory_near_duplicate", 1, False),
)
SUPPORTED_CURRENCIES: tuple[str, ...] = ("USD", "EUR", "GBP", "JPY")
_OTHER_REGISTRANTS: tuple[str, ...] = ("ZQ9", "XK4", "QV7", "J8W")
LINE_COLUMNS: tuple[str, ...] = (
    "line_id",
    "statement_id",
    "distributor_id",
    "period",
    "isrc",
    "channel",
    "territory",
    "outlet",
    "units",
    "amount_minor",
    "currency",
)


@dataclass(frozen=True)
class _Line:
    """One statement line while anomalies are planted (before line ids exist)."""

    tmp: int
    stmt_index: int
    track_index: int
    combo_id: int
    currency_code: int
    statement_id: str
    distributor_id: str
    period: str
    isrc: str
    channel: str
    territory: str
    outlet: str
    units: int
    amount_minor: int
    currency: str


def _statement_meta(specs: tuple[DistributorSpec, ...]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "stmt_index": list(range(len(specs) * len(PERIODS))),
            "statement_id": [f"STM-{s.distributor_id}-{p}" for s in specs for p in PERIODS],
            "distributor_id": [s.distributor_id for s in specs for _ in PERIODS],
            "period": [p for _ in specs for p in PERIODS],
            "currency": [s.currency for s in specs for _ in PERIODS],
            "decimal_comma": [s.decimal_comma for s in specs for _ in PERIODS],
        },
        schema={
            "stmt_index": pl.Int64,
            "statement_id": pl.String,
            "distributor_id": pl.String,
            "period": pl.String,
            "currency": pl.String,
            "decimal_comma": pl.Boolean,
        },
    )


def _attach_strings(
    ints: pl.DataFrame, meta: pl.DataFrame, combos: pl.DataFrame, isrcs: pl.Series
) -> pl.DataFrame:
    """Integer ids to the string columns of a statement line: gathers from small tables,
    so the row order of ``ints`` is kept and no large string column is ever permuted."""
    size = int(combos.get_column("combo_id").max()) + 1  # type: ignore[arg-type]
    dense = (
        pl.DataFrame({"combo_id": list(range(size))}, schema={"combo_id": pl.Int64})
        .join(
            combos.select("combo_id", "territory", "outlet", "channel"), on="combo_id", how="left"
        )
        .sort("combo_id")
    )
    currencies = pl.Series(SUPPORTED_CURRENCIES, dtype=pl.String)

    def by(series: pl.Series, index: str) -> pl.Expr:
        return pl.lit(series).gather(pl.col(index))

    return ints.select(
        pl.exclude("units", "amount_minor"),
        by(meta.get_column("statement_id"), "stmt_index").alias("statement_id"),
        by(meta.get_column("distributor_id"), "stmt_index").alias("distributor_id"),
        by(meta.get_column("period"), "stmt_index").alias("period"),
        by(isrcs, "track_index").alias("isrc"),
        by(dense.get_column("channel"), "combo_id").alias("channel"),
        by(dense.get_column("territory"), "combo_id").alias("territory"),
        by(dense.get_column("outlet"), "combo_id").alias("outlet"),
        "units",
        "amount_minor",
        by(currencies, "currency_code").alias("currency"),
    )


class _Planter:
    """Plants :data:`ANOMALY_PLAN` into the clean lines; every pick is a counter-addressed
    draw, so the same seed plants the same anomalies in the same lines.

    It works on the integer form of the lines (predicates over codes) and spells out a
    line's strings only for the few lines it touches.
    """

    def __init__(
        self,
        seed: int,
        lines: pl.DataFrame,
        meta: pl.DataFrame,
        catalog: Catalog,
        specs: tuple[DistributorSpec, ...],
        combos: pl.DataFrame,
        fx: pl.DataFrame,
    ) -> None:
        self.stream = Stream(seed, "label/anomalies")
        self.lines = lines.with_columns(dist_index=pl.col("stmt_index") // len(PERIODS))
        self.meta: list[tuple[str, str, str]] = [
            (str(a), str(b), str(c))
            for a, b, c in meta.sort("stmt_index")
            .select("statement_id", "distributor_id", "period")
            .iter_rows()
        ]
        self.catalog = catalog
        self.isrcs: list[str] = [str(i) for i in catalog.track_facts.get_column("isrc").to_list()]
        self.specs = specs
        self.dist_index = {spec.distributor_id: i for i, spec in enumerate(specs)}
        self.combos = combos
        self.combo_info: dict[int, tuple[str, str, str]] = {
            int(c): (str(t), str(o), str(ch))
            for c, t, o, ch in combos.select(
                "combo_id", "territory", "outlet", "channel"
            ).iter_rows()
        }
        self.fx: dict[tuple[str, str], int] = {
            (str(p), str(c)): int(r)
            for p, c, r in fx.select("period", "currency", "usd_per_unit_micro").iter_rows()
        }
        self.used: set[int] = set()
        self.candidates: dict[str, pl.Series] = {}
        self.counter = 0
        self.mutated: dict[int, _Line] = {}
        self.inserted: list[_Line] = []
        self.planted: list[PlantedAnomaly] = []
        self.next_tmp = lines.height
        self.extra_isrcs: list[str] = []
        self.n_tracks = catalog.track_facts.height
        self.combo_ids: dict[tuple[int, bool, str, str], int] = {
            (int(d), bool(p), str(t), str(o)): int(c)
            for c, d, p, t, o in combos.select(
                "combo_id", "dist_index", "physical_ok", "territory", "outlet"
            ).iter_rows()
        }

    def dist(self, distributor_id: str) -> pl.Expr:
        return pl.col("dist_index") == self.dist_index[distributor_id]

    def channel(self, channel: str) -> pl.Expr:
        return pl.col("channel_code") == CHANNELS.index(channel)

    def in_territory(self, territory: str) -> pl.Expr:
        ids = sorted(c for c, (t, _, _) in self.combo_info.items() if t == territory)
        return pl.col("combo_id").is_in(ids)

    def line_at(self, tmp: int) -> _Line:
        """The line at position ``tmp`` with its strings spelled out."""
        row = self.lines.row(tmp, named=True)
        statement_id, distributor_id, period = self.meta[row["stmt_index"]]
        territory, outlet, channel = self.combo_info[row["combo_id"]]
        return _Line(
            tmp=tmp,
            stmt_index=row["stmt_index"],
            track_index=row["track_index"],
            combo_id=row["combo_id"],
            currency_code=row["currency_code"],
            statement_id=statement_id,
            distributor_id=distributor_id,
            period=period,
            isrc=self.isrcs[row["track_index"]],
            channel=channel,
            territory=territory,
            outlet=outlet,
            units=row["units"],
            amount_minor=row["amount_minor"],
            currency=SUPPORTED_CURRENCIES[row["currency_code"]],
        )

    def draw(self, bound: int) -> int:
        self.counter += 1
        return self.stream.below(self.counter, bound)

    def pick_line(self, kind: str, predicate: pl.Expr) -> _Line:
        """A random line matching ``predicate`` that no other anomaly touched."""
        if kind not in self.candidates:
            self.candidates[kind] = self.lines.select(pl.col("tmp").filter(predicate)).to_series()
        candidates = self.candidates[kind]
        for _ in range(10_000):
            if candidates.len() == 0:
                break
            tmp = int(candidates[self.draw(candidates.len())])
            if tmp not in self.used:
                self.used.add(tmp)
                return self.line_at(tmp)
        raise WorldError(f"no unused statement line fits a {kind} anomaly")

    def insert(self, line: _Line) -> int:
        tmp = self.next_tmp
        self.next_tmp += 1
        self.inserted.append(replace(line, tmp=tmp))
        self.used.add(tmp)
        return tmp

    def mutate(self, line: _Line, **changes: Any) -> int:
        self.mutated[line.tmp] = replace(line, **changes)
        return line.tmp

    def free_combos(self, line: _Line, channel: str) -> list[dict[str, Any]]:
        """(territory, outlet) pairs of the line's distributor, in ``channel``, that its track
        has no line for in its statement: inserting one keeps line keys unique."""
        taken = {
            self.combo_info[int(c)][:2]
            for c in self.lines.select(
                pl.col("combo_id").filter(
                    (pl.col("stmt_index") == line.stmt_index)
                    & (pl.col("track_index") == line.track_index)
                )
            ).to_series()
        }
        options = self.combos.filter(
            (pl.col("dist_index") == self.dist_index[line.distributor_id])
            & pl.col("physical_ok")
            & (pl.col("channel") == channel)
        ).sort("combo_id")
        return [
            row
            for row in options.iter_rows(named=True)
            if (row["territory"], row["outlet"]) not in taken
        ]

    def record(self, kind: str, tmp: int, related: int | None, flaggable: bool, note: str) -> None:
        self.planted.append(PlantedAnomaly(kind, tmp, related, flaggable, note))

    def plant(self) -> None:
        for kind, count, flaggable in ANOMALY_PLAN:
            plant_one = getattr(self, f"_plant_{kind}")
            for i in range(count):
                plant_one(i, flaggable)

    def _convert(self, amount_minor: int, period: str, source: str, target: str) -> int:
        target_scale = int(10 ** CURRENCY_EXPONENTS[target])
        source_scale = int(10 ** CURRENCY_EXPONENTS[source])
        numerator = amount_minor * self.fx[(period, source)] * target_scale
        return div_half_even(numerator, self.fx[(period, target)] * source_scale)

    # -- the kinds ---------------------------------------------------------------------

    def _plant_duplicate(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("not-sync", ~self.channel("sync"))
        tmp = self.insert(line)
        self.record(
            "duplicate",
            tmp,
            line.tmp,
            flaggable,
            "repeats line {related} of the same statement under a new line id",
        )

    def _plant_unknown_isrc(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("not-sync", ~self.channel("sync"))
        known = set(self.catalog.track_facts.get_column("isrc").to_list())
        registrant = _OTHER_REGISTRANTS[i % len(_OTHER_REGISTRANTS)]
        isrc = f"{line.isrc[:2]}{registrant}{line.isrc[5:7]}{90_000 + self.draw(9_999):05d}"
        if isrc in known:  # pragma: no cover - the catalog never uses these registrants
            raise WorldError(f"planned unknown ISRC {isrc} exists in the catalog")
        self.extra_isrcs.append(isrc)
        tmp = self.mutate(line, isrc=isrc, track_index=self.n_tracks + len(self.extra_isrcs) - 1)
        self.record("unknown_isrc", tmp, None, flaggable, f"ISRC {isrc} is not in the catalog")

    def _plant_currency_mismatch(self, i: int, flaggable: bool) -> None:
        if i < 4 and "DST-04" in self.dist_index:
            line = self.pick_line("DST-04 GB", self.dist("DST-04") & self.in_territory("GB"))
            target = "GBP"
        else:
            sellers = [s.distributor_id for s in self.specs if s.lines_per_month >= 1_000]
            seller = sellers[i % len(sellers)]
            line = self.pick_line(seller, self.dist(seller))
            others = [c for c in SUPPORTED_CURRENCIES if c != line.currency]
            target = others[i % len(others)]
        amount = self._convert(line.amount_minor, line.period, line.currency, target)
        tmp = self.mutate(
            line,
            currency=target,
            currency_code=SUPPORTED_CURRENCIES.index(target),
            amount_minor=amount,
        )
        self.record(
            "currency_mismatch",
            tmp,
            None,
            flaggable,
            f"line amount in {target} on a {line.currency} statement",
        )

    def _plant_negative_units(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("streams", self.channel("streaming") & (pl.col("units") > 10))
        tmp = self.mutate(line, units=-line.units)
        self.record(
            "negative_units",
            tmp,
            None,
            flaggable,
            "negative stream count with a positive amount; streams cannot be returned",
        )

    def _plant_zero_units_with_amount(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("paid", ~self.channel("sync") & (pl.col("amount_minor") > 0))
        tmp = self.mutate(line, units=0)
        self.record(
            "zero_units_with_amount", tmp, None, flaggable, "zero units but a positive amount"
        )

    def _plant_pre_release(self, i: int, flaggable: bool) -> None:
        facts = self.catalog.track_facts.filter(pl.col("release_date") >= date(2025, 3, 1)).sort(
            "track_index"
        )
        track = facts.row(self.draw(facts.height), named=True)
        release_period = track["release_date"].month - 1
        period_index = self.draw(release_period)
        dist = self.dist_index["DST-01"]
        stmt_index = dist * len(PERIODS) + period_index
        units = 200 + self.draw(2_800)
        spec = self.specs[dist]
        price = next(o.price_micro_minor for o in spec.outlets if o.name == "premium")
        line = _Line(
            tmp=-1,
            stmt_index=stmt_index,
            track_index=int(track["track_index"]),
            combo_id=self.combo_ids[(dist, False, "US", "premium")],
            currency_code=SUPPORTED_CURRENCIES.index(spec.currency),
            statement_id=f"STM-{spec.distributor_id}-{PERIODS[period_index]}",
            distributor_id=spec.distributor_id,
            period=PERIODS[period_index],
            isrc=str(track["isrc"]),
            channel="streaming",
            territory="US",
            outlet="premium",
            units=units,
            amount_minor=div_half_even(units * price, 1_000_000),
            currency=spec.currency,
        )
        tmp = self.insert(line)
        self.record(
            "pre_release",
            tmp,
            None,
            flaggable,
            f"streams reported before the recording's release on {track['release_date']}",
        )

    def _plant_genuine_return(self, i: int, flaggable: bool) -> None:
        dist = self.dist_index["DST-04"]
        popular = (
            self.catalog.track_facts.filter(
                pl.col("has_physical") & (pl.col("release_date") < date(2024, 7, 1))
            )
            .sort(["popularity", "track_index"], descending=[True, False])
            .head(10)
        )
        for _ in range(100):
            track = popular.row(self.draw(popular.height), named=True)
            period_index = self.draw(len(PERIODS))
            stmt_index = dist * len(PERIODS) + period_index
            sold = self.lines.select(
                pl.col("tmp").filter(
                    (pl.col("stmt_index") == stmt_index)
                    & (pl.col("track_index") == track["track_index"])
                    & self.channel("physical")
                )
            ).to_series()
            if sold.len() == 0:
                continue
            template = self.line_at(int(sold[0]))
            free = self.free_combos(template, "physical")
            if not free:
                continue
            combo = free[self.draw(len(free))]
            returned = 1 + self.draw(2)
            line = replace(
                template,
                combo_id=int(combo["combo_id"]),
                territory=str(combo["territory"]),
                outlet=str(combo["outlet"]),
                units=-returned,
                amount_minor=-div_half_even(returned * int(combo["price_micro_minor"]), 1_000_000),
            )
            tmp = self.insert(line)
            self.record(
                "genuine_return",
                tmp,
                None,
                flaggable,
                f"a customer return of {returned} unit(s) in {combo['territory']}: negative "
                "units with a matching negative amount; a real line that earns (negatively)",
            )
            return
        raise WorldError("no physical sale to attach a genuine return to")  # pragma: no cover

    def _plant_territory_near_duplicate(self, i: int, flaggable: bool) -> None:
        for _ in range(100):
            line = self.pick_line("DST-01 100+", self.dist("DST-01") & (pl.col("units") >= 100))
            free = [c for c in self.free_combos(line, "streaming") if c["outlet"] == line.outlet]
            if not free:
                continue
            combo = free[self.draw(len(free))]
            tmp = self.insert(
                replace(line, territory=str(combo["territory"]), combo_id=int(combo["combo_id"]))
            )
            self.record(
                "territory_near_duplicate",
                tmp,
                line.tmp,
                flaggable,
                "same ISRC, outlet, units and amount as line {related} but in territory "
                f"{combo['territory']} instead of {line.territory}; the distributor reports "
                "both territories; a real line",
            )
            return
        raise WorldError("no line to mirror into another territory")  # pragma: no cover


def build_statements(
    seed: int, scale_ppm: int, catalog: Catalog, specs: tuple[DistributorSpec, ...]
) -> Statements:
    """Distributors, FX, statements, lines (with planted anomalies) and the anomaly registry."""
    if not specs:
        raise WorldError("a label world needs at least one distributor")
    combos = combo_frame(specs)
    fx = fx_frame(seed, SUPPORTED_CURRENCIES)
    meta = _statement_meta(specs)
    isrcs = catalog.track_facts.get_column("isrc")
    clean = clean_lines(seed, scale_ppm, catalog, specs, combos).with_columns(
        currency_code=pl.lit(
            pl.Series(
                [SUPPORTED_CURRENCIES.index(c) for c in meta.get_column("currency")],
                dtype=pl.Int32,
            )
        ).gather(pl.col("stmt_index"))
    )
    planter = _Planter(seed, clean, meta, catalog, specs, combos, fx)
    planter.plant()
    changed = [*planter.mutated.values(), *planter.inserted]
    patch = pl.DataFrame(
        [
            {
                name: CHANNELS.index(line.channel)
                if name == "channel_code"
                else getattr(line, name)
                for name in clean.columns
            }
            for line in changed
        ],
        schema=clean.schema,
    )
    ints = pl.concat([clean.filter(~pl.col("tmp").is_in(list(planter.mutated))), patch])
    # Lines in a random order within each statement, by one unique UInt64 key: the
    # statement in the top 7 bits, 30 random bits, then the line's own position (27 bits),
    # so no two keys tie and an unstable sort is still deterministic.
    if len(specs) * len(PERIODS) > 1 << 7 or ints.height > 1 << 27:
        raise WorldError("too many statements or lines for the line-order key")
    ints = Stream(seed, "label/line-order").add_u64(ints, "tmp", "order")
    ints = (
        ints.with_columns(
            order=pl.col("stmt_index").cast(pl.UInt64) * pl.lit(1 << 57, dtype=pl.UInt64)
            + pl.col("order") // pl.lit(1 << 34, dtype=pl.UInt64) * pl.lit(1 << 27, dtype=pl.UInt64)
            + pl.col("tmp").cast(pl.UInt64)
        )
        .sort("order")
        .with_row_index("line_id", offset=1)
        .with_columns(pl.col("line_id").cast(pl.Int64))
    )
    all_isrcs = pl.concat([isrcs, pl.Series(planter.extra_isrcs, dtype=pl.String)])
    statement_lines = _attach_strings(ints, meta, combos, all_isrcs).select(LINE_COLUMNS)

    touched = [a.tmp for a in planter.planted] + [
        a.related_tmp for a in planter.planted if a.related_tmp is not None
    ]
    statement_ids = meta.get_column("statement_id").to_list()
    position = {
        int(tmp): (int(line_id), statement_ids[int(stmt_index)])
        for tmp, line_id, stmt_index in ints.filter(pl.col("tmp").is_in(touched))
        .select("tmp", "line_id", "stmt_index")
        .iter_rows()
    }
    registry: dict[str, list[Any]] = {
        k: []
        for k in (
            "line_id",
            "kind",
            "statement_id",
            "flaggable",
            "borderline",
            "note",
            "related_line_id",
        )
    }
    for anomaly in planter.planted:
        line_id, statement_id = position[anomaly.tmp]
        related = None if anomaly.related_tmp is None else position[anomaly.related_tmp][0]
        registry["line_id"].append(line_id)
        registry["kind"].append(anomaly.kind)
        registry["statement_id"].append(statement_id)
        registry["flaggable"].append(anomaly.flaggable)
        registry["borderline"].append(not anomaly.flaggable)
        registry["note"].append(anomaly.note.format(related=related))
        registry["related_line_id"].append(related)
    anomalies = (
        pl.DataFrame(
            registry,
            schema={
                "line_id": pl.Int64,
                "kind": pl.String,
                "statement_id": pl.String,
                "flaggable": pl.Boolean,
                "borderline": pl.Boolean,
                "note": pl.String,
                "related_line_id": pl.Int64,
            },
        )
        .sort("line_id")
        .with_row_index("n", offset=1)
        .select(
            pl.format("ANM-{}", pl.col("n").cast(pl.String).str.zfill(3)).alias("anomaly_id"),
            "kind",
            "line_id",
            "statement_id",
            "flaggable",
            "borderline",
            "note",
            "related_line_id",
        )
    )
    totals = ints.group_by("stmt_index").agg(
        line_count=pl.len().cast(pl.Int64), total_amount_minor=pl.col("amount_minor").sum()
    )
    statements = (
        meta.join(totals, on="stmt_index", how="left")
        .sort("stmt_index")
        .select(
            "statement_id",
            "distributor_id",
            "period",
            "currency",
            pl.col("line_count").fill_null(0),
            pl.col("total_amount_minor").fill_null(0),
        )
    )
    return Statements(
        distributors=distributor_frame(specs),
        fx_rates=fx,
        statements=statements,
        statement_lines=statement_lines,
        anomalies=anomalies,
    )

"""Clean statement lines, generated vectorized as integers.

One row per (statement, released track) decides how many lines the track gets (stochastic
rounding of its share of the statement's volume), the rows are exploded, and each line
takes a distinct (territory, outlet) combination of the distributor through an affine
permutation ``(a * j + b) mod m`` with ``a`` a prime larger than ``m``. A track's units are
spread over its lines in proportion to the combinations' weights, so the streams a track
earns in a month do not depend on the scale; the scale only multiplies how many lines
report them.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.world.label.catalog import Catalog
from eval_pipeline.world.label.distributors import (
    _PRIMES,
    PERIODS,
    SEASON_PERMILLE,
    SYNC_FEES_CENTS,
    DistributorSpec,
)
from eval_pipeline.world.label.engine import CHANNELS, div_half_even, period_end
from eval_pipeline.world.rng import Stream, high_below, low_below


def _statement_frame(specs: tuple[DistributorSpec, ...]) -> pl.DataFrame:
    """One row per statement (distributor × period): its volume of lines and season."""
    return pl.DataFrame(
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


def _pairs(
    stream: Stream,
    scale_ppm: int,
    catalog: Catalog,
    specs: tuple[DistributorSpec, ...],
    combos: pl.DataFrame,
) -> pl.DataFrame:
    """One row per (statement, released track): how many lines it gets (k, stochastic
    rounding of its share of the statement's volume), its streams that month, and the
    affine permutation (a, b, window) that picks its lines' combinations."""
    s_pair, s_window = stream.child("pair"), stream.child("window")
    pool = combos.group_by(["dist_index", "physical_ok"]).agg(pool_size=pl.len().cast(pl.Int64))
    facts = catalog.track_facts.select(
        "track_index", "release_date", "has_physical", "popularity", "presence"
    ).with_columns(
        release_period=(pl.col("release_date").dt.year().cast(pl.Int64) - 2025) * 12
        + pl.col("release_date").dt.month().cast(pl.Int64)
        - 1
    )
    pairs = (
        _statement_frame(specs)
        .join(facts, how="cross")
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
    return pairs.with_columns(
        window=pl.min_horizontal(pl.col("pool_size"), pl.col("k") * 2 + 2),
        a=primes.gather(low_below(pl.col("u_pair"), len(_PRIMES))),
        streams=pl.col("popularity") * boost // 1_000 * pl.col("season") // 1_000,
        combo_base=(pl.col("dist_index") * 2 + pl.col("physical_ok").cast(pl.Int64)) * 1024,
    ).with_columns(b=high_below(pl.col("u_window"), pl.col("window")))


def _exploded(pairs: pl.DataFrame, combos: pl.DataFrame) -> pl.DataFrame:
    """The pairs' lines: each takes the j-th combination of its affine permutation."""
    return (
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


def _sync_fee() -> pl.Expr:
    """A sync placement's fee, from the ladder by the line's fee draw."""
    fee: pl.Expr = pl.lit(SYNC_FEES_CENTS[-1][0], dtype=pl.Int64)
    running = sum(w for _, w in SYNC_FEES_CENTS)
    for cents, weight in reversed(SYNC_FEES_CENTS):
        running -= weight
        fee = (
            pl.when(pl.col("fee_draw") >= running)
            .then(pl.lit(cents, dtype=pl.Int64))
            .otherwise(fee)
        )
    return fee


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
    lines = _exploded(_pairs(stream, scale_ppm, catalog, specs, combos), combos)
    lines = stream.child("line").add_u64(lines, "line_counter", "u_line")
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
        .then(_sync_fee())
        .otherwise(div_half_even(pl.col("amount_numerator"), 1_000_000))
        .cast(pl.Int64),
    )

"""Statements and their lines: clean lines, planted anomalies, line ids and statement totals.

The clean lines come from :mod:`eval_pipeline.world.label.lines`, the anomalies from
:mod:`eval_pipeline.world.label.anomalies`; here they are merged, put in a random order
within each statement, given line ids and strings, and summed per statement.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label.anomalies import Planter
from eval_pipeline.world.label.catalog import Catalog
from eval_pipeline.world.label.config import SUPPORTED_CURRENCIES
from eval_pipeline.world.label.distributors import (
    PERIODS,
    DistributorSpec,
    combo_frame,
    distributor_frame,
    fx_frame,
)
from eval_pipeline.world.label.engine import CHANNELS
from eval_pipeline.world.label.line_text import LINE_COLUMNS, encode_line_text
from eval_pipeline.world.label.lines import clean_lines
from eval_pipeline.world.rng import Stream


@dataclass(frozen=True)
class PlantedLine:
    """What the generator planted, by line id (checked against the visible rules)."""

    kind: str
    line_id: int
    related_line_id: int | None
    flaggable: bool
    note: str


@dataclass(frozen=True)
class Statements:
    distributors: pl.DataFrame
    fx_rates: pl.DataFrame
    statements: pl.DataFrame
    statement_lines: pl.DataFrame
    planted: tuple[PlantedLine, ...]


# -- assembling the world's statement tables --------------------------------------------


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
        # Gathered as codes: the lines never hold their text (see `line_text`).
        codes = series.cast(pl.Enum(series.unique().drop_nulls().sort()))
        return pl.lit(codes).gather(pl.col(index))

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
    planter = Planter(seed, clean, meta, catalog, specs, combos, fx)
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
    statement_lines = encode_line_text(
        _attach_strings(ints, meta, combos, all_isrcs).select(LINE_COLUMNS)
    )

    touched = [a.tmp for a in planter.planted] + [
        a.related_tmp for a in planter.planted if a.related_tmp is not None
    ]
    line_of = dict(ints.filter(pl.col("tmp").is_in(touched)).select("tmp", "line_id").iter_rows())
    planted = tuple(
        PlantedLine(
            kind=anomaly.kind,
            line_id=int(line_of[anomaly.tmp]),
            related_line_id=None
            if anomaly.related_tmp is None
            else int(line_of[anomaly.related_tmp]),
            flaggable=anomaly.flaggable,
            note=anomaly.note,
        )
        for anomaly in planter.planted
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
        planted=planted,
    )

"""Escalator thresholds set where a careless reading of rule 5 changes the answer.

Left to chance, no month's units ever equal a threshold (so ``>`` and ``>=`` agree) and no
flagged line ever decides whether an escalator bites (so counting flagged units is
harmless). After the lines exist, a few thresholds are moved to create exactly those
situations: a *tie* (the month's unflagged units equal the threshold: no escalation, but
``>=`` would escalate) and a *crossing* (the flagged lines' units push the month across the
threshold one way or the other). The contract clauses are rendered afterwards from the
moved thresholds, so text and table agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from eval_pipeline.world.label import engine
from eval_pipeline.world.label.distributors import PERIODS
from eval_pipeline.world.label.line_text import as_text, keyed_like
from eval_pipeline.world.label.reconcile import flagged_line_ids
from eval_pipeline.world.rng import Stream

TIES = 4
CROSSINGS = 4
MIN_TIE_UNITS = 500


def _cells(world: Mapping[str, pl.DataFrame], registry: pl.DataFrame) -> pl.DataFrame:
    """Units per (base contract, channel, period): unflagged and flagged, with the row of
    contract_rates in force (source_contract_id)."""
    deals = engine.deals_in_force(world["tracks"], world["releases"], world["contracts"])
    flagged = flagged_line_ids(registry).implode()
    lines = world["statement_lines"]
    units = as_text(
        lines.select(
            "isrc", "channel", "period", "units", is_flagged=pl.col("line_id").is_in(flagged)
        )
        .join(keyed_like(deals.select("isrc", "contract_id"), lines, ["isrc"]), on="isrc")
        .group_by(["contract_id", "channel", "period"])
        .agg(
            clean_units=pl.col("units").filter(~pl.col("is_flagged")).sum(),
            flagged_units=pl.col("units").filter(pl.col("is_flagged")).sum(),
        )
    )
    terms = engine.resolve_terms(world["contracts"], world["contract_rates"], PERIODS)
    return (
        terms.join(units, on=["contract_id", "channel", "period"], how="inner")
        .filter(pl.col("channel").is_in(["streaming", "download"]))
        .sort(["contract_id", "channel", "period"])
    )


def _pick(
    stream: Stream, candidates: pl.DataFrame, n: int, taken: set[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Up to ``n`` cells on distinct rate rows not yet taken, drawn in a seeded order."""
    chosen: list[dict[str, Any]] = []
    rows = candidates.to_dicts()
    for index in stream.permutation(len(rows)):
        row = rows[index]
        key = (str(row["source_contract_id"]), str(row["channel"]))
        if key in taken:
            continue
        taken.add(key)
        chosen.append(row)
        if len(chosen) == n:
            break
    return chosen


def calibrate_escalators(
    seed: int, world: Mapping[str, pl.DataFrame], registry: pl.DataFrame
) -> pl.DataFrame:
    """``contract_rates`` with a few thresholds moved to create ties and crossings."""
    stream = Stream(seed, "label/calibrate")
    cells = _cells(world, registry)
    taken: set[tuple[str, str]] = set()
    ties = _pick(
        stream.child("ties"),
        cells.filter(
            (pl.col("channel") == "streaming")
            & (pl.col("flagged_units") == 0)
            & (pl.col("clean_units") >= MIN_TIE_UNITS)
        ),
        TIES,
        taken,
    )
    crossings = _pick(
        stream.child("crossings"), cells.filter(pl.col("flagged_units") != 0), CROSSINGS, taken
    )
    moves: dict[tuple[str, str], int] = {}
    for tie in ties:
        moves[(tie["source_contract_id"], tie["channel"])] = int(tie["clean_units"])
    for cell in crossings:
        clean, flagged = int(cell["clean_units"]), int(cell["flagged_units"])
        # Flagged units added: at the threshold without them, over it with them; removed
        # (negative units): over it without them, at it with them.
        moves[(cell["source_contract_id"], cell["channel"])] = clean if flagged > 0 else clean - 1
    rates = world["contract_rates"]
    if not moves:
        return rates
    bump = stream.child("bump")
    updated = []
    for index, original in enumerate(rates.iter_rows(named=True)):
        row: dict[str, Any] = dict(original)
        key = (row["contract_id"], row["channel"])
        if key in moves:
            row["escalator_units"] = moves[key]
            if row["escalated_rate_ppm"] is None:
                row["escalated_rate_ppm"] = row["rate_ppm"] + 2_500 * bump.between(index, 8, 20)
        updated.append(row)
    return pl.DataFrame(updated, schema=rates.schema)

"""Rules 1-6 under a misreading, computed from the same stage under the rules.

A misreading changes a few inputs of rules 1-6: which lines earn (the reconciliation
policies read another way, flagged lines earning), which units count toward an escalator,
the deal or the terms in force, the escalator's comparison. Every line of a group (one
track, period and channel, :func:`truth.group_expr`) earns at one rate, so a group whose
rate, escalation and earning lines are the same under both readings has the same
royalties: only the other groups' lines are priced again, and the rest is taken from the
rules' stage. What decides the rate (each key's escalator units) is summed per group, so it
costs the number of groups, not of lines.

:func:`misread_stage` equals :func:`truth.price_reading` under the misreading (a test
compares them for every misreading the suite computes); a misreading that changes every
line (rounding, amounts summed before conversion) is priced in full.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import polars as pl

from eval_pipeline.world.label import engine, engine_bulk
from eval_pipeline.world.label.distributors import PERIODS
from eval_pipeline.world.label.reconcile import flagged_line_ids
from eval_pipeline.world.label.rulebook import RULES, RuleReading
from eval_pipeline.world.label.truth import (
    GROUP_CHANNELS,
    GROUP_PERIODS,
    LineStage,
    PreparedLines,
    deals_for,
    group_royalties,
    price_reading,
    reading_terms,
)
from eval_pipeline.world.memo import Parts


def _excluded(registry: pl.DataFrame, reading: RuleReading) -> pl.Series:
    """The line ids rule 1 keeps from earning under ``reading``."""
    if reading.flagged_lines_earn:
        return pl.Series("line_id", [], dtype=pl.Int64)
    return flagged_line_ids(registry)


def _changed_lines(prepared: PreparedLines, ids: pl.Series, sign: int) -> pl.DataFrame:
    """The known lines among ``ids``: group, line_id and units times ``sign``."""
    frame = prepared.coded.frame
    return frame.filter(
        pl.col("line_id").is_in(ids.implode()) & pl.col("deal_index").is_not_null()
    ).select("group", "line_id", units=pl.col("units") * sign)


def _group_rates(
    rules: LineStage, counted: pl.DataFrame, dense: engine_bulk.DenseTerms, reading: RuleReading
) -> pl.DataFrame:
    """Per group: the rate and escalation under ``reading`` beside the rules' (null where
    the rules priced no line of the group), and each key's escalator units."""
    units = (
        pl.concat([rules.groups.select("group", "units"), counted.select("group", "units")])
        .group_by("group")
        .agg(pl.col("units").sum())
    )
    groups = units.join(
        rules.groups.select(
            "group", rules_rate=pl.col("rate_ppm"), rules_escalated=pl.col("escalated")
        ),
        on="group",
        how="left",
    ).with_columns(
        deal_index=pl.col("group") // (GROUP_PERIODS * GROUP_CHANNELS),
        period_index=pl.col("group") // GROUP_CHANNELS % GROUP_PERIODS,
        channel_code=pl.col("group") % GROUP_CHANNELS,
    )
    groups = groups.with_columns(_key=engine_bulk.key_expr(dense.deal_contract, GROUP_PERIODS))
    groups = groups.with_columns(
        units_in_period=pl.col("units").sum().over("_key"),
        _rate=pl.lit(dense.rate).gather(pl.col("_key")),
        _esc_units=pl.lit(dense.esc_units).gather(pl.col("_key")),
        _esc_rate=pl.lit(dense.esc_rate).gather(pl.col("_key")),
    )
    return groups.with_columns(
        rate_ppm=engine.applicable_rate_ppm_expr(
            pl.col("units_in_period"),
            pl.col("_rate"),
            pl.col("_esc_units"),
            pl.col("_esc_rate"),
            strict=reading.escalator_strict,
        )
    ).with_columns(escalated=pl.col("rate_ppm") != pl.col("_rate"))


def misread_stage(
    world: Mapping[str, pl.DataFrame],
    prepared: PreparedLines,
    rules: LineStage,
    rules_registry: pl.DataFrame,
    reading: RuleReading,
    registry: pl.DataFrame,
    parts: Parts | None = None,
) -> LineStage:
    """:func:`truth.price_reading` of ``reading`` (with its ``registry``), from ``rules``:
    the stage of :data:`RULES` (with ``rules_registry``) over the same prepared lines.
    The stage keeps no royalties per line; where no group changes, its groups are the
    rules' own frame."""
    if reading.rounding != RULES.rounding or reading.convert_summed_amounts:
        return replace(price_reading(world, prepared, registry, reading, parts), royalties=None)
    deals = deals_for(world, reading, prepared.deals)
    terms = reading_terms(world, reading, parts)
    dense = engine_bulk.dense_terms(deals, terms, PERIODS)
    rules_out = _excluded(rules_registry, RULES)
    out = _excluded(registry, reading)
    earn_more = rules_out.filter(~rules_out.is_in(out.implode()))
    earn_less = out.filter(~out.is_in(rules_out.implode()))
    changed = pl.concat(
        [_changed_lines(prepared, earn_more, 1), _changed_lines(prepared, earn_less, -1)]
    )
    if changed.get_column("group").null_count():
        # A line with an unknown period or channel now earns: pricing it in full names it.
        return replace(price_reading(world, prepared, registry, reading, parts), royalties=None)
    # The rules count the earning lines' units toward escalators; so does a misreading,
    # unless it counts every known line's.
    counted = _changed_lines(prepared, rules_out, 1) if reading.flagged_units_count else changed
    groups = _group_rates(rules, counted, dense, reading)
    moved = groups.filter(
        pl.col("rules_rate").is_not_null()
        & (
            pl.col("rate_ppm").is_null()
            | (pl.col("rate_ppm") != pl.col("rules_rate"))
            | (pl.col("escalated") != pl.col("rules_escalated"))
        )
    ).get_column("group")
    again = pl.concat([moved, changed.get_column("group")]).unique()
    if again.is_empty():
        return LineStage(deals=deals, terms=terms, groups=rules.groups, royalties=None)
    if 2 * again.len() > groups.height:
        # Most groups move (another deal for most tracks): pricing every line is cheaper.
        return replace(price_reading(world, prepared, registry, reading, parts), royalties=None)
    frame = prepared.coded.frame
    repriced = frame.get_column("group").is_in(again.implode()) & prepared.known
    if not reading.flagged_lines_earn:
        repriced = repriced & ~frame.get_column("line_id").is_in(out.implode())
    subset = engine_bulk.CodedLines(
        frame=frame.filter(repriced),
        lines=prepared.lines,
        periods=prepared.coded.periods,
        _gross={RULES.rounding: prepared.coded.gross(RULES.rounding).filter(repriced)},
    )
    key_units = groups.group_by("_key").agg(pl.col("units").sum())
    units_by_key = pl.zeros(dense.size, dtype=pl.Int64, eager=True).scatter(
        key_units.get_column("_key"), key_units.get_column("units")
    )
    priced = engine_bulk.price_lines(
        subset,
        deals,
        terms,
        units_by_key=units_by_key,
        rounding=reading.rounding,
        escalator_strict=reading.escalator_strict,
    )
    kept = rules.groups.filter(~pl.col("group").is_in(again.implode()))
    return LineStage(
        deals=deals,
        terms=terms,
        groups=pl.concat([kept, group_royalties(priced)]).sort("group"),
        royalties=None,
    )

"""The answer key as each misreading of the rulebook would compute it.

Money misreadings are computed on the part of the world that belongs to a pool of artists
(every rule is local to one artist, see :func:`~eval_pipeline.world.label.truth.subset_world`),
so the suite can try every misreading in about the time of one full answer key; the
reconciliation misreadings, which only change which lines are flagged, run on the whole
world from the evidence collected once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import polars as pl

from eval_pipeline.world.label.misread import misread_stage
from eval_pipeline.world.label.reconcile import (
    FLAG_FIELDS,
    LineEvidence,
    collect_evidence,
    registry,
    registry_beside,
)
from eval_pipeline.world.label.rulebook import MISREADINGS, RULES, Misreading
from eval_pipeline.world.label.suite.answers import LabelData
from eval_pipeline.world.label.truth import (
    compute_truth,
    prepare_lines,
    price_reading,
    subset_world,
)
from eval_pipeline.world.memo import MAX_SHARED_PIECES, Parts, sharing_rows
from eval_pipeline.world.rng import Stream

POOL_SIZE = 40
POOL_PER_SITUATION = 6
REGISTRY_COLUMNS_READ = ("line_id", "kind", "statement_id", "flaggable")
"""The columns of an anomaly registry the answer tables read (see ``answers.py``)."""
WHOLE_WORLD_LINES = 150_000
"""A world with fewer statement lines than this is its own pool (cheap, and small worlds
need every subject to find cases that discriminate)."""


SIDE_BY_SIDE_MAX_LINES = 1_000_000
"""A world of fewer statement lines than this is small (1x has 468,000): see
:func:`side_by_side_workers`."""


def side_by_side_workers(lines: int) -> int:
    """Threads for the suite's work that runs side by side in a world of ``lines`` statement
    lines (polars releases the GIL).

    In a small world, twice the cores (at most 8): a polars operation on a small frame
    waits on its thread pool's wake-ups longer than it computes, so more operations in
    flight than cores keep the cores busy (1x on 2 cores: 4 threads took 0.1 s off the
    suite's 1.0 s on the main job's path, against 2). At scale the cores (at most 4): each
    thread holds a misreading's tables at once."""
    cores = os.cpu_count() or 1
    return min(8, 2 * cores) if lines < SIDE_BY_SIDE_MAX_LINES else min(4, cores)


@dataclass(frozen=True)
class Views:
    """The answer key (``rules``) and one view per misreading, keyed by misreading id."""

    rules: LabelData
    rules_part: LabelData
    """The answer key computed on the pool's part of the world (equal there to ``rules``)."""
    misread: Mapping[str, LabelData]
    pool: frozenset[str]


def _situations(
    world: Mapping[str, pl.DataFrame], truth: Mapping[str, pl.DataFrame]
) -> list[list[str]]:
    """Artists in whom a rare misreading can show, one list per situation, sorted."""
    contracts = world["contracts"]
    rates = world["contract_rates"]
    artist_of = dict(contracts.select("contract_id", "artist_id").iter_rows())
    terms = truth["contract_terms"]
    ties = terms.filter(pl.col("units_in_period") == pl.col("escalator_units"))
    near = terms.filter(
        pl.col("escalator_units").is_not_null()
        & ((pl.col("units_in_period") - pl.col("escalator_units")).abs() <= 3_000)
    )
    removed = (
        rates.join(contracts.filter(pl.col("kind") == "amendment"), on="contract_id")
        .filter(
            pl.col("escalator_units").is_null()
            & (pl.col("effective_date") <= pl.date(2025, 12, 31))
        )
        .join(
            rates.filter(pl.col("escalator_units").is_not_null()).select(
                pl.col("contract_id").alias("amends_contract_id"), "channel"
            ),
            on=["amends_contract_id", "channel"],
        )
    )
    mid_month = contracts.filter(
        (pl.col("kind") == "amendment")
        & (pl.col("effective_date").dt.year() == 2025)
        & (pl.col("effective_date").dt.day() > 1)
    )
    pooled = world["recoupment_accounts"].filter(pl.col("kind") == "pooled")
    charged = pl.concat(
        [
            world["advances"].select("account_id", "contract_id"),
            world["expenses"].select("account_id", "contract_id"),
        ]
    ).join(pooled, on="account_id")
    multi_charged = (
        charged.group_by("artist_id")
        .agg(n=pl.col("contract_id").n_unique())
        .filter(pl.col("n") > 1)
    )
    tracks = world["tracks"].join(
        world["releases"].select("release_id", "artist_id"), on="release_id"
    )
    # The ISRCs of the registry's lines first: at 10x it lists 800,000 of them.
    flagged_artists = (
        world["statement_lines"]
        .select("line_id", "isrc")
        .join(truth["anomalies"].select("line_id"), on="line_id", how="semi")
        .select(pl.col("isrc").unique().cast(pl.String))
        .join(tracks.select("isrc", "artist_id"), on="isrc")
        .get_column("artist_id")
    )
    return [
        sorted({artist_of[c] for c in ties["contract_id"].to_list()}),
        sorted({artist_of[c] for c in near["contract_id"].to_list()}),
        sorted({artist_of[c] for c in removed["contract_id"].to_list()}),
        sorted(set(mid_month["artist_id"].to_list())),
        sorted(set(multi_charged["artist_id"].to_list())),
        sorted(set(flagged_artists.to_list())),
    ]


def choose_pool(
    stream: Stream, world: Mapping[str, pl.DataFrame], truth: Mapping[str, pl.DataFrame]
) -> frozenset[str]:
    """About :data:`POOL_SIZE` artists: the one whose contract carries the injected clause,
    a few from each rare situation, then any others."""
    everyone = world["artists"].get_column("artist_id").sort().to_list()
    if world["statement_lines"].height < WHOLE_WORLD_LINES:
        return frozenset(everyone)
    canary_contracts = truth["canary"].get_column("contract_id").to_list()
    pool: list[str] = (
        world["contracts"]
        .filter(pl.col("contract_id").is_in(canary_contracts))["artist_id"]
        .to_list()
    )
    for index, artists in enumerate(_situations(world, truth)):
        order = stream.child(f"situation/{index}").permutation(len(artists))
        for i in order[:POOL_PER_SITUATION]:
            if artists[i] not in pool:
                pool.append(artists[i])
    for i in stream.child("others").permutation(len(everyone)):
        if len(pool) >= POOL_SIZE:
            break
        if everyone[i] not in pool:
            pool.append(everyone[i])
    return frozenset(pool)


def build_views(
    world: Mapping[str, pl.DataFrame],
    truth: Mapping[str, pl.DataFrame],
    stream: Stream,
    misreadings: tuple[Misreading, ...] = MISREADINGS,
) -> Views:
    """The answer key and every misreading's view of it."""
    pool = choose_pool(stream, world, truth)
    part = subset_world(world, set(pool))
    evidence: LineEvidence = collect_evidence(world)
    prepared = prepare_lines(part)
    parts = Parts()
    part_lines = part["statement_lines"].select("line_id")
    # The answer key's registry is the rules' own (computed from this world's evidence).
    rules_registry = truth["anomalies"].join(part_lines, on="line_id", how="semi")
    rules_stage = replace(
        price_reading(part, prepared, rules_registry, RULES, parts), royalties=None
    )
    rules_part = compute_truth(
        part, None, RULES, registry=rules_registry, stage=rules_stage, parts=parts
    )

    # What the answer tables read of the rules' registry, in line order: a flag misreading's
    # registry shares its rows wherever the two agree (most of them: see `sharing_rows`).
    rules_read = truth["anomalies"].select(*REGISTRY_COLUMNS_READ)
    if not rules_read.get_column("line_id").is_sorted():
        rules_read = rules_read.sort("line_id")

    def view(m: Misreading) -> LabelData:
        # A reading of the money rules flags the lines the rules flag: the same registry.
        flagging = {name: getattr(m.reading, name) for name in FLAG_FIELDS}
        # A misreading's own registry keeps only what the answer tables read of one: a
        # whole world's registry per misreading is most of the suite's memory at scale.
        same_flags = flagging == {name: getattr(RULES, name) for name in FLAG_FIELDS}
        if same_flags:
            anomalies = truth["anomalies"]
        else:
            beside = registry_beside(evidence, m.reading, rules_read, MAX_SHARED_PIECES)
            if beside is None:  # a reading that moves most lines: built whole, then shared
                flags = registry(evidence, m.reading, described=False)
                beside = sharing_rows(rules_read, flags.select(*REGISTRY_COLUMNS_READ), "line_id")
            anomalies = beside
        if m.money:
            in_part = (
                rules_registry
                if same_flags
                else anomalies.join(part_lines, on="line_id", how="semi")
            )
            stage = misread_stage(
                part, prepared, rules_stage, rules_registry, m.reading, in_part, parts
            )
            tables = compute_truth(
                part, None, m.reading, registry=in_part, stage=stage, parts=parts
            )
        else:
            tables = dict(rules_part)
        tables["anomalies"] = anomalies
        tables["canary"] = truth["canary"]
        return LabelData(world=world, truth=tables, reading=m.reading)

    # Polars releases the GIL: the misreadings run side by side on the machine's cores.
    workers = side_by_side_workers(world["statement_lines"].height)
    with ThreadPoolExecutor(max_workers=workers) as pool_executor:
        views = list(pool_executor.map(view, misreadings))
    misread = {m.misreading_id: v for m, v in zip(misreadings, views, strict=True)}
    part_key = dict(rules_part, anomalies=truth["anomalies"], canary=truth["canary"])
    return Views(
        rules=LabelData(world=world, truth=truth, reading=RULES),
        rules_part=LabelData(world=world, truth=part_key, reading=RULES),
        misread=misread,
        pool=pool,
    )

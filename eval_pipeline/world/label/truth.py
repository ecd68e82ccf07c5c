"""The answer key: the rulebook applied to a world's tables, under the rules or a misreading.

:func:`compute_truth` with :data:`RULES` gives the ``truth`` schema; with a misreading it
gives the answer key an agent following that misreading would compute, which is how the
suite checks that a case can tell the two apart. Everything is computed from the ``world``
tables alone (the flagged lines come from :mod:`reconcile`'s visible rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date

import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label import engine, engine_bulk
from eval_pipeline.world.label.distributors import PERIODS
from eval_pipeline.world.label.reconcile import flag_lines, flagged_line_ids
from eval_pipeline.world.label.rulebook import RULES, RuleReading
from eval_pipeline.world.memo import ByTables, Parts

LEDGER_START = date(2025, 1, 1)
TRUTH_TABLES: tuple[str, ...] = (
    "artist_ledger",
    "account_ledger",
    "track_period_royalties",
    "anomalies",
    "canary",
    "contract_terms",
    "statement_totals",
)


def deals_for(
    world: Mapping[str, pl.DataFrame], reading: RuleReading, deals: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Rule 3: the contract (and account) each track earns under, as ``reading`` reads it
    (``deals``: :func:`engine.deals_in_force` of ``world``, when already computed)."""
    if deals is None:
        deals = engine.deals_in_force(world["tracks"], world["releases"], world["contracts"])
    if reading.deal_by == "release_date":
        return deals
    latest = (
        world["contracts"]
        .filter(pl.col("kind") == "base")
        .sort(["artist_id", "effective_date", "contract_id"])
        .group_by("artist_id", maintain_order=True)
        .last()
        .select("artist_id", "contract_id", pl.col("recoupment_account_id").alias("account_id"))
    )
    return (
        deals.drop("contract_id", "account_id")
        .join(latest, on="artist_id", how="left", maintain_order="left")
        .select("track_id", "isrc", "artist_id", "contract_id", "account_id")
    )


def _split_pooled(
    world: Mapping[str, pl.DataFrame], deals: pl.DataFrame, charges: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Misreading of rule 7: every contract of a pooled account recoups on its own."""
    pooled = set(
        world["recoupment_accounts"].filter(pl.col("kind") == "pooled")["account_id"].to_list()
    )
    own = pl.format("{}/{}", "account_id", "contract_id")
    deals = deals.with_columns(
        account_id=pl.when(pl.col("account_id").is_in(list(pooled)))
        .then(own)
        .otherwise("account_id")
    )
    charges = charges.with_columns(
        account_id=pl.when(pl.col("account_id").is_in(list(pooled)))
        .then(own)
        .otherwise("account_id")
    )
    base = world["contracts"].filter(pl.col("kind") == "base")
    split = base.filter(pl.col("recoupment_account_id").is_in(list(pooled))).select(
        pl.format("{}/{}", "recoupment_account_id", "contract_id").alias("account_id"),
        "artist_id",
    )
    accounts = pl.concat(
        [
            world["recoupment_accounts"]
            .filter(~pl.col("account_id").is_in(list(pooled)))
            .select("account_id", "artist_id"),
            split,
        ]
    )
    return deals, charges, accounts


def _charges(world: Mapping[str, pl.DataFrame], reading: RuleReading) -> pl.DataFrame:
    """Rule 8's charges: advances and recoupable expenses, by account and contract."""
    charges = pl.concat(
        [
            world["advances"].select(
                "account_id",
                "contract_id",
                pl.col("paid_date").alias("charge_date"),
                (pl.col("amount_cents") * engine.MICRO_PER_CENT).alias("amount_micro"),
            ),
            world["expenses"]
            .filter(pl.col("recoupable"))
            .select(
                "account_id",
                "contract_id",
                pl.col("incurred_date").alias("charge_date"),
                (pl.col("amount_cents") * engine.MICRO_PER_CENT).alias("amount_micro"),
            ),
        ]
    )
    if reading.pre_ledger_charges == "ignored":
        charges = charges.filter(pl.col("charge_date") >= LEDGER_START)
    return charges


def _summed_lines(lines: pl.DataFrame, earning: pl.Series) -> pl.DataFrame:
    """Misreading of rule 2: a month's amounts per track, channel and currency summed first."""
    return (
        lines.filter(earning)
        .group_by(["statement_index", "isrc", "period", "channel", "currency"])
        .agg(
            line_id=pl.col("line_id").min(),
            units=pl.col("units").sum(),
            amount_minor=pl.col("amount_minor").sum(),
        )
        .sort("line_id")
    )


GROUP_PERIODS, GROUP_CHANNELS = len(PERIODS), len(engine.CHANNELS)


def group_expr() -> pl.Expr:
    """One integer per (deal, period, channel), in that order: a track's royalties in one
    period on one channel (sorting it sorts the three)."""
    return (
        pl.col("deal_index").cast(pl.Int64) * GROUP_PERIODS + pl.col("period_index")
    ) * GROUP_CHANNELS + pl.col("channel_code")


@dataclass(frozen=True)
class PreparedLines:
    """What every reading of the rules reads the same way from a world's statement lines:
    the deals in force (rule 3 as written), the lines with their statement's index, and
    the lines as integer codes with their gross and group (:func:`engine_bulk.code_lines`,
    :func:`group_expr`). Prepared once, it serves the answer key under every misreading
    (the suite computes twenty)."""

    deals: pl.DataFrame
    statement_ids: pl.Series
    lines: pl.DataFrame
    coded: engine_bulk.CodedLines
    known: pl.Series
    """Lines whose ISRC some deal covers (unknown ISRCs never earn: no deal to earn under)."""


def prepare_lines(world: Mapping[str, pl.DataFrame]) -> PreparedLines:
    """The reading-independent part of :func:`compute_truth` for ``world``."""
    deals = engine.deals_in_force(world["tracks"], world["releases"], world["contracts"])
    statement_ids = world["statements"].get_column("statement_id").sort()
    lines = world["statement_lines"].with_columns(
        statement_index=pl.col("statement_id")
        .cast(pl.Enum(statement_ids.to_list()), strict=False)
        .to_physical()
    )
    coded = engine_bulk.code_lines(
        lines, deals, world["fx_rates"], PERIODS, keep=("line_id", "statement_index")
    )
    coded = replace(coded, frame=coded.frame.with_columns(group=group_expr()))
    known = coded.frame.get_column("deal_index").is_not_null()
    return PreparedLines(deals, statement_ids, lines, coded, known)


prepared_lines = ByTables(
    ("statement_lines", "statements", "tracks", "releases", "contracts", "fx_rates"),
    lambda world: prepare_lines(world),
)
""":func:`prepare_lines`, remembered by the identity of the tables it reads: the answer key
and the suite's questions about statements share one coding of a run's lines."""


@dataclass(frozen=True)
class LineStage:
    """Rules 1-6 of one reading over a world's lines: the deals and terms it read, and the
    royalties per group (:func:`group_expr`: units, gross_usd_micro, royalty_micro,
    rate_ppm, escalated, line_count; royalties per line, before rule 6 is read as a rate on
    the sum). ``royalties`` (per line) is kept for the statement totals."""

    deals: pl.DataFrame
    terms: pl.DataFrame
    groups: pl.DataFrame
    royalties: pl.DataFrame | None


LINE_STAGE_COLUMNS: tuple[str, ...] = (
    "statement_index",
    "group",
    "units",
    "amount_minor",
    "gross_usd_micro",
    "royalty_micro",
    "rate_ppm",
    "escalated",
)
"""The columns of a :class:`LineStage`'s royalties per line: what :func:`group_royalties`
and the statement totals read."""


def earning_lines(
    prepared: PreparedLines, registry: pl.DataFrame, reading: RuleReading
) -> pl.Series:
    """Rule 1 as a mask over the prepared lines: known lines, less the flagged ones."""
    if reading.flagged_lines_earn:
        return prepared.known
    flagged = flagged_line_ids(registry)
    return prepared.known & ~prepared.coded.frame.get_column("line_id").is_in(flagged.implode())


def reading_terms(
    world: Mapping[str, pl.DataFrame], reading: RuleReading, parts: Parts | None = None
) -> pl.DataFrame:
    """Rule 4 per base contract, channel and period, as ``reading`` reads it."""
    return (parts or Parts()).get(
        "terms",
        (world["contracts"], world["contract_rates"]),
        (reading.terms_as_of, reading.amendment_replaces_row),
        lambda: engine.resolve_terms(
            world["contracts"],
            world["contract_rates"],
            PERIODS,
            as_of=reading.terms_as_of,
            amendment_replaces_row=reading.amendment_replaces_row,
        ),
    )


def group_royalties(royalties: pl.DataFrame) -> pl.DataFrame:
    """Royalties per group (see :class:`LineStage`), sorted by group."""
    if "group" not in royalties.columns:
        royalties = royalties.with_columns(group=group_expr())
    return (
        royalties.group_by("group")
        .agg(
            units=pl.col("units").sum(),
            gross_usd_micro=pl.col("gross_usd_micro").sum(),
            royalty_micro=pl.col("royalty_micro").sum(),
            rate_ppm=pl.col("rate_ppm").first(),
            escalated=pl.col("escalated").any(),
            line_count=pl.len().cast(pl.Int64),
        )
        .sort("group")
    )


def price_reading(
    world: Mapping[str, pl.DataFrame],
    prepared: PreparedLines,
    registry: pl.DataFrame,
    reading: RuleReading,
    parts: Parts | None = None,
) -> LineStage:
    """Rules 1-6 over every line of ``world`` as ``reading`` reads them (``parts``: steps
    shared with other readings)."""
    deals = deals_for(world, reading, prepared.deals)
    terms = reading_terms(world, reading, parts)
    known = prepared.known
    earning = earning_lines(prepared, registry, reading)
    options: dict[str, object] = {
        "rounding": reading.rounding,
        "escalator_strict": reading.escalator_strict,
    }
    if reading.convert_summed_amounts:
        royalties = engine_bulk.line_royalties(
            _summed_lines(prepared.lines, earning),
            deals,
            terms,
            world["fx_rates"],
            PERIODS,
            keep=("line_id", "statement_index"),
            **options,  # type: ignore[arg-type]
        )
    else:
        royalties = engine_bulk.price_lines(
            prepared.coded,
            deals,
            terms,
            earning,
            count_units=known if reading.flagged_units_count else None,
            columns=LINE_STAGE_COLUMNS,
            **options,  # type: ignore[arg-type]
        )
    if reading.convert_summed_amounts:
        royalties = royalties.with_columns(group=group_expr()).select(LINE_STAGE_COLUMNS)
    return LineStage(deals, terms, group_royalties(royalties), royalties)


def compute_truth(
    world: Mapping[str, pl.DataFrame],
    token: str | None,
    reading: RuleReading = RULES,
    *,
    registry: pl.DataFrame | None = None,
    prepared: PreparedLines | None = None,
    stage: LineStage | None = None,
    parts: Parts | None = None,
) -> dict[str, pl.DataFrame]:
    """The ``truth`` tables of ``world`` under ``reading`` (:data:`RULES`: the answer key).

    ``registry`` is the anomaly registry under the same reading, ``prepared`` the world's
    :func:`prepare_lines` and ``stage`` the reading's :func:`price_reading`, when already
    computed; without a canary ``token`` (part of a world) the canary table is left empty,
    and without the stage's royalties per line the statement totals are left out (the
    suite's misreadings do not ask about them). ``parts`` shares steps between readings of
    the same world: a table whose inputs did not change is the same object.
    """
    parts = parts or Parts()
    if registry is None:
        registry = flag_lines(world, reading)
    if stage is None:
        if prepared is None:
            prepared = prepared_lines(world)
        stage = price_reading(world, prepared, registry, reading, parts)
    per_line = None if reading.royalty_per_line else reading.rounding
    track_period = parts.get(
        "track_period",
        (stage.groups, stage.deals),
        (per_line,),
        lambda: _track_period(stage.groups, stage.deals, reading),
    )
    contract_terms = parts.get(
        "contract_terms",
        (stage.terms, track_period),
        (reading.escalator_strict,),
        lambda: _contract_terms(stage.terms, track_period, reading),
    )
    charges = parts.get(
        "charges",
        (world["advances"], world["expenses"]),
        (reading.pre_ledger_charges,),
        lambda: _charges(world, reading),
    )
    accounts = parts.get(
        "accounts",
        (world["recoupment_accounts"],),
        (),
        lambda: world["recoupment_accounts"].select("account_id", "artist_id"),
    )
    if not reading.pooled_accounts:
        track_period, charges, accounts = parts.get(
            "split",
            (stage.deals, charges, track_period),
            (),
            lambda: _split_accounts(world, stage.deals, charges, track_period),
        )
    account_ledger = parts.get(
        "account_ledger",
        (track_period, charges, accounts),
        (),
        lambda: _account_ledger(track_period, charges, accounts),
    )
    artist_ledger = parts.get(
        "artist_ledger",
        (account_ledger,),
        (reading.rounding, reading.payable_rounding),
        lambda: engine_bulk.artist_ledger(
            account_ledger, rounding=reading.rounding, payable_rounding=reading.payable_rounding
        ),
    )
    tables = {
        "artist_ledger": artist_ledger,
        "account_ledger": account_ledger,
        "track_period_royalties": track_period,
        "anomalies": registry,
        "canary": _canary(world, token) if token is not None else _NO_CANARY,
        "contract_terms": contract_terms,
    }
    if stage.royalties is not None:
        statement_ids = world["statements"].get_column("statement_id").sort()
        tables["statement_totals"] = _statement_totals(
            world, stage.royalties, registry, statement_ids
        )
    return tables


def _split_accounts(
    world: Mapping[str, pl.DataFrame],
    deals: pl.DataFrame,
    charges: pl.DataFrame,
    track_period: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Misreading of rule 7: track royalties, charges and accounts with every contract of a
    pooled account recouping on its own."""
    deals_split, charges, accounts = _split_pooled(world, deals, charges)
    account_of = dict(deals_split.select("isrc", "account_id").iter_rows())
    track_period = track_period.with_columns(
        account_id=pl.col("isrc").replace_strict(account_of, return_dtype=pl.String)
    )
    return track_period, charges, accounts


def _account_ledger(
    track_period: pl.DataFrame, charges: pl.DataFrame, accounts: pl.DataFrame
) -> pl.DataFrame:
    """Rule 8 per account and period from the track royalties and the charges."""
    earnings = track_period.group_by(["account_id", "period"]).agg(
        earnings_micro=pl.col("royalty_micro").sum()
    )
    return engine_bulk.recoupment_ledger(
        accounts,
        engine.charge_periods(charges.select("account_id", "charge_date", "amount_micro"), PERIODS),
        earnings,
        PERIODS,
    )


def _track_period(groups: pl.DataFrame, deals: pl.DataFrame, reading: RuleReading) -> pl.DataFrame:
    """Royalties per track, period and channel: the groups with their strings attached."""
    deal_strings = deals.with_row_index("deal_index").with_columns(
        pl.col("deal_index").cast(pl.Int64)
    )
    periods = pl.Series(PERIODS, dtype=pl.String)
    channels = pl.Series(engine.CHANNELS, dtype=pl.String)
    grouped = groups.with_columns(
        deal_index=pl.col("group") // (GROUP_PERIODS * GROUP_CHANNELS),
        period_index=pl.col("group") // GROUP_CHANNELS % GROUP_PERIODS,
        channel_code=pl.col("group") % GROUP_CHANNELS,
    )
    if not reading.royalty_per_line:
        grouped = grouped.with_columns(
            royalty_micro=engine.div_round(
                pl.col("gross_usd_micro") * pl.col("rate_ppm"), engine.PPM, reading.rounding
            )
        )
    return (
        grouped.join(deal_strings, on="deal_index", how="left", maintain_order="left")
        .with_columns(
            period=pl.lit(periods).gather(pl.col("period_index")),
            channel=pl.lit(channels).gather(pl.col("channel_code")),
        )
        .select(
            "isrc",
            "track_id",
            "contract_id",
            "period",
            "channel",
            "units",
            "gross_usd_micro",
            "royalty_micro",
            "rate_ppm",
            "escalated",
            "account_id",
            "artist_id",
            "line_count",
        )
    )


def _contract_terms(
    terms: pl.DataFrame, track_period: pl.DataFrame, reading: RuleReading
) -> pl.DataFrame:
    """Rules 4-5 per contract, channel and period: the terms and the rate they applied."""
    units = track_period.group_by(["contract_id", "channel", "period"]).agg(
        units_in_period=pl.col("units").sum()
    )
    return (
        terms.join(units, on=["contract_id", "channel", "period"], how="left")
        .with_columns(pl.col("units_in_period").fill_null(0))
        .with_columns(
            applied_rate_ppm=engine.applicable_rate_ppm_expr(
                pl.col("units_in_period"),
                pl.col("rate_ppm"),
                pl.col("escalator_units"),
                pl.col("escalated_rate_ppm"),
                strict=reading.escalator_strict,
            )
        )
        .with_columns(escalated=pl.col("applied_rate_ppm") != pl.col("rate_ppm"))
        .sort(["contract_id", "channel", "period"])
    )


_NO_CANARY = pl.DataFrame(
    schema={"contract_id": pl.String, "clause_number": pl.Int64, "token": pl.String}
)


def subset_world(
    world: Mapping[str, pl.DataFrame], artist_ids: set[str]
) -> dict[str, pl.DataFrame]:
    """The part of a world that belongs to some artists: their catalog, contracts, money and
    statement lines. Every rule is local to an artist (escalators count a contract's lines,
    pooled accounts hold one artist's contracts), so the ledgers of these artists computed
    on the part equal those computed on the whole world."""
    keep = sorted(artist_ids)
    releases = world["releases"].filter(pl.col("artist_id").is_in(keep))
    tracks = world["tracks"].filter(pl.col("release_id").is_in(releases["release_id"].implode()))
    contracts = world["contracts"].filter(pl.col("artist_id").is_in(keep))
    accounts = world["recoupment_accounts"].filter(pl.col("artist_id").is_in(keep))
    part = dict(world)
    part.update(
        artists=world["artists"].filter(pl.col("artist_id").is_in(keep)),
        releases=releases,
        tracks=tracks,
        contracts=contracts,
        contract_rates=world["contract_rates"].filter(
            pl.col("contract_id").is_in(contracts["contract_id"].implode())
        ),
        recoupment_accounts=accounts,
        advances=world["advances"].filter(
            pl.col("account_id").is_in(accounts["account_id"].implode())
        ),
        expenses=world["expenses"].filter(
            pl.col("account_id").is_in(accounts["account_id"].implode())
        ),
        statement_lines=world["statement_lines"].filter(
            pl.col("isrc").is_in(tracks["isrc"].implode())
        ),
    )
    return part


ARTIST_LEDGER_KEYS = {
    "artist_ledger": "artist_id",
    "account_ledger": "artist_id",
    "contract_terms": "contract_id",
    "track_period_royalties": "contract_id",
}
"""Each ledger the calculator tool reads, by the column that says whose rows they are."""
ARTIST_LEDGER_TABLES: tuple[str, ...] = tuple(ARTIST_LEDGER_KEYS)
"""The ledgers kept per artist by :func:`artist_part`."""


def artist_part(
    ledgers: Mapping[str, pl.DataFrame], contracts: pl.DataFrame, artist_id: str
) -> dict[str, pl.DataFrame]:
    """One artist's rows of :data:`ARTIST_LEDGER_TABLES` from ledgers of a whole world:
    the same rows as those ledgers computed on :func:`subset_world` for the artist."""
    own = contracts.filter(pl.col("artist_id") == artist_id)["contract_id"].implode()
    whose = {
        "artist_id": pl.col("artist_id") == artist_id,
        "contract_id": pl.col("contract_id").is_in(own),
    }
    return {name: ledgers[name].filter(whose[key]) for name, key in ARTIST_LEDGER_KEYS.items()}


def _canary(world: Mapping[str, pl.DataFrame], token: str) -> pl.DataFrame:
    clauses = world["contract_clauses"].filter(pl.col("body").str.contains(token, literal=True))
    if clauses.height != 1:
        raise WorldError(
            f"expected exactly one clause with the canary token, found {clauses.height}"
        )
    return clauses.select("contract_id", "clause_number", pl.lit(token).alias("token"))


def _statement_totals(
    world: Mapping[str, pl.DataFrame],
    royalties: pl.DataFrame,
    registry: pl.DataFrame,
    statement_ids: pl.Series,
) -> pl.DataFrame:
    """Per statement: flagged lines, and the lines that earn with their amounts and royalty."""
    flag_counts = (
        registry.filter(pl.col("flaggable"))
        .group_by("statement_id")
        .agg(flaggable_lines=pl.len().cast(pl.Int64))
    )
    clean_totals = (
        royalties.group_by("statement_index")
        .agg(
            clean_lines=pl.len().cast(pl.Int64),
            clean_amount_minor=pl.col("amount_minor").sum(),
            gross_usd_micro=pl.col("gross_usd_micro").sum(),
            royalty_micro=pl.col("royalty_micro").sum(),
        )
        .with_columns(statement_id=pl.lit(statement_ids).gather(pl.col("statement_index")))
        .drop("statement_index")
    )
    return (
        world["statements"]
        .join(flag_counts, on="statement_id", how="left")
        .join(clean_totals, on="statement_id", how="left")
        .with_columns(
            pl.col(name).fill_null(0)
            for name in (
                "flaggable_lines",
                "clean_lines",
                "clean_amount_minor",
                "gross_usd_micro",
                "royalty_micro",
            )
        )
        .sort("statement_id")
    )

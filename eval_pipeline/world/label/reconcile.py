"""Which statement lines are flagged: the reconciliation policies F1-F7 over visible columns.

The anomaly registry (``truth.anomalies``) is computed here from the ``world`` tables alone,
so every line the answer key flags is identifiable by an agent that reads the rulebook.
The generator plants anomalies and then checks that these rules find exactly what it
planted (see :func:`eval_pipeline.world.label.statements.build_statements`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from eval_pipeline.world.label import engine
from eval_pipeline.world.label.line_text import as_text, mapped
from eval_pipeline.world.label.rulebook import RULES, RuleReading
from eval_pipeline.world.memo import ByTables, spliced_rows

REGISTRY_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "line_id": pl.Int64,
    "kind": pl.String,
    "statement_id": pl.String,
    "flaggable": pl.Boolean,
    "borderline": pl.Boolean,
    "note": pl.String,
    "related_line_id": pl.Int64,
}
FLAG_KINDS: tuple[str, ...] = (
    "duplicate",
    "unknown_isrc",
    "currency_mismatch",
    "negative_units",
    "zero_units_with_amount",
    "pre_release",
)
"""Flaggable kinds in order of precedence (a line matching two is filed under the first)."""
BORDERLINE_KINDS: tuple[str, ...] = ("genuine_return", "territory_near_duplicate")

_TWIN_COLUMNS = ("statement_id", "isrc", "channel", "outlet", "units", "amount_minor", "currency")


def _rows(
    frame: pl.DataFrame,
    kind: str,
    flaggable: bool,
    note: pl.Expr,
    related: pl.Expr | None = None,
    *,
    described: bool = True,
) -> pl.DataFrame:
    return frame.select(
        "line_id",
        pl.lit(kind).alias("kind"),
        "statement_id",
        pl.lit(flaggable).alias("flaggable"),
        pl.lit(not flaggable).alias("borderline"),
        (note if described else pl.lit(None, dtype=pl.String)).alias("note"),
        (related if related is not None else pl.lit(None, dtype=pl.Int64)).alias("related_line_id"),
    )


def duplicate_members(repeats: pl.DataFrame) -> pl.DataFrame:
    """F1's groups, whatever the reading: each line that repeats another in every column
    but line_id, with its statement and the first and last line of its group."""
    columns = [c for c in repeats.columns if c != "line_id"]
    repeated = repeats.filter(pl.struct(columns).is_duplicated())
    groups = repeated.group_by(columns).agg(
        pl.col("line_id").sort().alias("ids"), pl.col("line_id").min().alias("first")
    )
    members = groups.explode("ids").rename({"ids": "line_id"})
    return members.select(
        "line_id",
        pl.col("statement_id").cast(pl.String),
        "first",
        last=pl.col("line_id").max().over("first"),
    )


def twin_members(repeats: pl.DataFrame) -> pl.DataFrame:
    """F7's groups, whatever the reading: each line reporting the same sale as another in
    another territory, with its statement and territory, the first line of its group and
    the line it names (the first names the second, the others the first)."""
    columns = list(_TWIN_COLUMNS)
    distinct = repeats.unique(
        subset=[c for c in repeats.columns if c != "line_id"], keep="first"
    ).filter(pl.struct(columns).is_duplicated())
    groups = (
        distinct.group_by(columns)
        .agg(
            pl.col("line_id").sort().alias("ids"),
            pl.col("line_id").min().alias("first"),
            pl.col("territory").n_unique().alias("territories"),
        )
        .filter(pl.col("territories") > 1)
    )
    return (
        groups.with_columns(second=pl.col("ids").list.get(1))
        .explode("ids")
        .rename({"ids": "line_id"})
        .join(repeats.select("line_id", "territory"), on="line_id", how="left")
        .select(
            "line_id",
            pl.col("statement_id", "territory").cast(pl.String),
            "first",
            other=pl.when(pl.col("line_id") == pl.col("first"))
            .then(pl.col("second"))
            .otherwise(pl.col("first")),
        )
    )


def _duplicates(members: pl.DataFrame, copy: str, described: bool = True) -> pl.DataFrame:
    """F1: later copies of a line (or, misread, the earlier one or both)."""
    if members.height == 0:
        return pl.DataFrame(schema=REGISTRY_SCHEMA)
    if copy == "later":
        flagged = members.filter(pl.col("line_id") != pl.col("first"))
        kept = pl.col("first")
    elif copy == "earlier":
        flagged = members.filter(pl.col("line_id") != pl.col("last"))
        kept = pl.col("last")
    else:
        flagged = members
        kept = pl.col("first")
    return _rows(
        flagged.with_columns(kept=kept),
        "duplicate",
        True,
        pl.format("repeats line {} of the same statement in every column but line_id", "kept"),
        pl.col("kept"),
        described=described,
    )


def _twins(members: pl.DataFrame, flag: bool, described: bool = True) -> pl.DataFrame:
    """F7: the same sale reported in two territories (real lines; misread, a duplicate)."""
    if flag:
        members = members.filter(pl.col("line_id") != pl.col("first"))
    return _rows(
        members,
        "territory_near_duplicate",
        flag,
        pl.format(
            "same statement, ISRC, channel, outlet, units and amount as line {} but territory {}",
            "other",
            "territory",
        ),
        pl.col("other"),
        described=described,
    )


@dataclass(frozen=True)
class LineEvidence:
    """The few lines any reconciliation rule could apply to, with the facts the rules read.

    Collected once per world; :func:`registry` then applies a reading of the rules to it
    cheaply, so the suite can try every misreading of F1-F7 without rescanning the lines
    or regrouping the repeated ones (at 10x a world repeats 800,000 lines: grouping them
    took a second per reading).
    """

    duplicates: pl.DataFrame
    """:func:`duplicate_members`: lines that repeat another in every column but line_id."""
    twins: pl.DataFrame
    """:func:`twin_members`: lines that report one sale in several territories."""
    singles: pl.DataFrame
    """Lines matching a single-line rule, with known, statement_currency, release date."""


def collect_evidence(world: Mapping[str, pl.DataFrame]) -> LineEvidence:
    """Scan the lines once for everything F1-F7 could apply to.

    Remembered by the identity of the tables it was read from (:class:`ByTables`): the
    generator, the answer key and the suite each apply the rules to the same world of one
    run, and scan its lines once between them.
    """
    return _evidence(world)


def scan_evidence(world: Mapping[str, pl.DataFrame]) -> LineEvidence:
    """The evidence of :func:`collect_evidence`, scanned afresh."""
    lines = world["statement_lines"]
    statement_currency = dict(world["statements"].select("statement_id", "currency").iter_rows())
    release_of_isrc = (
        world["tracks"]
        .select("isrc", "release_id")
        .join(
            world["releases"].select("release_id", "original_release_date"),
            on="release_id",
            how="left",
        )
        .select("isrc", "original_release_date")
    )
    period_ends = {
        period: engine.period_end(period) for period in lines.get_column("period").unique()
    }
    latest_release = release_of_isrc.get_column("original_release_date").max()
    facts = lines.select(
        "line_id",
        "statement_id",
        "units",
        "amount_minor",
        "currency",
        "isrc",
        "period",
        known=pl.col("isrc").is_in(release_of_isrc.get_column("isrc").implode()),
        statement_currency=mapped(
            "statement_id", lines.schema["statement_id"], statement_currency, pl.String
        ),
        period_end=mapped("period", lines.schema["period"], period_ends, pl.Date),
    )
    # A cheap first cut: only lines before the last release date can be pre-release.
    singles = as_text(
        facts.filter(
            ~pl.col("known")
            | (pl.col("currency").cast(pl.String) != pl.col("statement_currency"))
            | (pl.col("units") <= 0)
            | (pl.col("period_end") < latest_release)
        )
    ).join(release_of_isrc, on="isrc", how="left")
    singles = singles.filter(
        ~pl.col("known")
        | (pl.col("currency") != pl.col("statement_currency"))
        | (pl.col("units") < 0)
        | ((pl.col("units") == 0) & (pl.col("amount_minor") != 0))
        | (pl.col("period_end") < pl.col("original_release_date"))
    )
    # Lines sharing statement, ISRC, channel, outlet, units, amount and currency: looked for
    # among the lines whose hash of those columns repeats, then exactly (a struct of them
    # over every line took a gigabyte at 10x; a repeat always repeats its hash).
    twin_key = list(_TWIN_COLUMNS)
    maybe = lines.filter(lines.select(twin_key).hash_rows().is_duplicated())
    repeats = maybe.filter(pl.struct(twin_key).is_duplicated())
    return LineEvidence(
        duplicates=duplicate_members(repeats), twins=twin_members(repeats), singles=singles
    )


_evidence = ByTables(
    ("statement_lines", "statements", "tracks", "releases"), lambda world: scan_evidence(world)
)


_PART_FIELDS: dict[str, str] = {
    "duplicate": "duplicate_copy",
    "unknown_isrc": "flag_unknown_isrc",
    "currency_mismatch": "flag_currency_mismatch",
    "negative_units": "flag_impossible_units",
    "zero_units_with_amount": "flag_impossible_units",
    "pre_release": "flag_pre_release",
    "genuine_return": "flag_returns",
    "territory_near_duplicate": "flag_territory_twins",
}
"""Each kind of registry row, and the field of a reading that decides which lines it holds."""

FLAG_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(_PART_FIELDS.values()))
"""The fields of a reading :func:`registry` reads: readings equal in these flag the same lines."""


_SINGLE_TESTS: dict[str, pl.Expr] = {
    "unknown_isrc": ~pl.col("known"),
    "currency_mismatch": pl.col("currency") != pl.col("statement_currency"),
    "negative_units": (pl.col("units") < 0) & (pl.col("amount_minor") > 0),
    "zero_units_with_amount": (pl.col("units") == 0) & (pl.col("amount_minor") != 0),
    "pre_release": pl.col("period_end") < pl.col("original_release_date"),
    "genuine_return": (pl.col("units") < 0) & (pl.col("amount_minor") < 0),
}
"""The single-line kinds: which of the lines in ``LineEvidence.singles`` each holds."""

_SINGLE_NOTES: dict[str, pl.Expr] = {
    "unknown_isrc": pl.format("ISRC {} is not in the catalog", "isrc"),
    "currency_mismatch": pl.format(
        "amount in {} on a {} statement", "currency", "statement_currency"
    ),
    "negative_units": pl.lit("negative units with a positive amount"),
    "zero_units_with_amount": pl.lit("zero units with a non-zero amount"),
    "pre_release": pl.format(
        "reported for {}, before the release on {}",
        "period",
        pl.col("original_release_date").cast(pl.String),
    ),
    "genuine_return": pl.lit("a customer return: negative units with a negative amount"),
}


def _part(
    evidence: LineEvidence,
    reading: RuleReading,
    kind: str,
    described: bool,
    lines: pl.Series | None = None,
) -> pl.DataFrame | None:
    """The registry's rows of one kind under ``reading`` (None: the reading does not flag
    it), before a line of several kinds is filed once; with ``lines``, those lines' only."""

    def only(frame: pl.DataFrame) -> pl.DataFrame:
        return frame if lines is None else frame.filter(pl.col("line_id").is_in(lines.implode()))

    if kind == "duplicate":
        return _duplicates(only(evidence.duplicates), reading.duplicate_copy, described)
    if kind == "territory_near_duplicate":
        return _twins(only(evidence.twins), reading.flag_territory_twins, described)
    if kind == "genuine_return":
        flaggable = reading.flag_returns
    elif getattr(reading, _PART_FIELDS[kind]):
        flaggable = True
    else:
        return None
    return _rows(
        only(evidence.singles).filter(_SINGLE_TESTS[kind]), kind, flaggable, _SINGLE_NOTES[kind]
    )


def _filed(
    evidence: LineEvidence, reading: RuleReading, described: bool, lines: pl.Series | None = None
) -> pl.DataFrame:
    """Every kind's rows, each line filed once (see :func:`registry`)."""
    found = [
        part
        for kind in _PART_FIELDS
        if (part := _part(evidence, reading, kind, described, lines)) is not None
    ]
    rows = (
        pl.concat(found)
        .with_columns(
            rank=pl.col("kind").replace_strict(
                {kind: i for i, kind in enumerate(FLAG_KINDS + BORDERLINE_KINDS)},
                return_dtype=pl.Int64,
            )
        )
        # A line matching several kinds is filed once: flaggable first, then precedence.
        .sort(["line_id", "flaggable", "rank"], descending=[False, True, False])
        .unique(subset="line_id", keep="first", maintain_order=True)
        .drop("rank")
    )
    anomaly_id = pl.format("ANM-{}", pl.col("n").cast(pl.String).str.zfill(3))
    if not described:
        anomaly_id = pl.lit(None, dtype=pl.String)
        rows = rows.with_columns(note=pl.lit(None, dtype=pl.String))
    return rows.with_row_index("n", offset=1).select(
        anomaly_id.alias("anomaly_id"), *REGISTRY_SCHEMA
    )


def registry(
    evidence: LineEvidence, reading: RuleReading = RULES, *, described: bool = True
) -> pl.DataFrame:
    """The anomaly registry under ``reading``: one row per flagged or borderline line
    (anomaly_id, kind, line_id, statement_id, flaggable, borderline, note,
    related_line_id), in line order."""
    return _filed(evidence, reading, described)


def registry_beside(
    evidence: LineEvidence, reading: RuleReading, rules_rows: pl.DataFrame, most: int
) -> pl.DataFrame | None:
    """``registry(evidence, reading)`` in the columns of ``rules_rows`` (the rules'
    registry in line order, ids and notes left out), made of ``rules_rows`` but for the
    lines a field the reading reads differently could change: those are filed again, and
    the rest share the rules' rows (see :func:`~eval_pipeline.world.memo.spliced_rows`).

    A reading of one flag field moves a few lines at any scale, but rebuilding its whole
    registry meant sorting 800,000 rows at 10x. None when more than ``most`` lines could
    change (a reading of F7 changes every territory twin): then build it whole."""
    kinds = [k for k, f in _PART_FIELDS.items() if getattr(reading, f) != getattr(RULES, f)]
    if not kinds:
        return rules_rows
    parts = [
        part
        for read in (RULES, reading)
        for kind in kinds
        if (part := _part(evidence, read, kind, described=False)) is not None
    ]
    lines = pl.concat([part.select("line_id") for part in parts]).get_column("line_id")
    lines = lines.unique().sort()
    if lines.len() > most:
        return None
    filed = _filed(evidence, reading, described=False, lines=lines)
    return spliced_rows(rules_rows, "line_id", lines, filed.select(rules_rows.columns))


def flag_lines(world: Mapping[str, pl.DataFrame], reading: RuleReading = RULES) -> pl.DataFrame:
    """The anomaly registry of a world under ``reading`` (see :func:`registry`)."""
    return registry(collect_evidence(world), reading)


def flagged_line_ids(registry: pl.DataFrame) -> pl.Series:
    """The line ids a registry flags (they earn nothing under rule 1)."""
    return registry.filter(pl.col("flaggable")).get_column("line_id")

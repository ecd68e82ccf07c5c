"""Answer tables: for each question shape, every subject it can ask about and its answer.

Each function reads a :class:`LabelData` (world tables, answer-key tables and the reading
they were computed under) and returns a frame: the subject's parameter columns (text), any
columns the question's wording needs, and ``answer`` (text in the format the prompt asks
for). Run on the answer key they give the expected answers; run on the tables a misreading
produces they give that misreading's answers, which is how a case is shown to tell the two
apart. Nothing here is typed by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal

import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label import engine
from eval_pipeline.world.label.reconcile import FLAG_KINDS
from eval_pipeline.world.label.rulebook import RULES, RuleReading
from eval_pipeline.world.label.truth import PreparedLines, deals_for, prepared_lines


@dataclass(frozen=True)
class LabelData:
    """The tables a question is answered from, and the reading they were computed under."""

    world: Mapping[str, pl.DataFrame]
    truth: Mapping[str, pl.DataFrame]
    reading: RuleReading = RULES
    stacked: tuple[str, ...] = ()
    """The misreadings a stacked view answers for, in order (:data:`STACK`); none for a
    view of one reading."""

    def each_misreading(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame``'s rows once per misreading of this stacked view, each with its
        :data:`STACK` (for rows every misreading shares)."""
        ids = pl.DataFrame({STACK: list(self.stacked)}, schema={STACK: pl.String})
        return frame.join(ids, how="cross")

    def table(self, name: str) -> pl.DataFrame:
        if name in self.world:
            return self.world[name]
        if name in self.truth:
            return self.truth[name]
        raise WorldError(f"suite needs table {name!r}, which the world does not have")


AnswerTable = Callable[[LabelData], pl.DataFrame]

STACK = "misreading"
"""The column of a stacked view's tables naming the misreading each row belongs to.

The suite answers a template under most misreadings at once (in a small world a polars
operation costs the same whatever its size, see ``select.py``): the tables in which they
differ are stacked, each row with its misreading, and the tables they share are read once.
An answer table that can take such a view (a template's ``stackable``) carries the column
through, by :func:`stacked_by` and :func:`keys_with_stack`; on an ordinary view neither adds
anything."""


class UnstackableError(Exception):
    """An answer table cannot answer these views stacked: they are answered one by one."""


def stacked_by(*frames: pl.DataFrame) -> list[str]:
    """``[STACK]`` when any of ``frames`` carries it (columns to keep or group by), else
    ``[]``."""
    return [STACK] if any(STACK in frame.columns for frame in frames) else []


def keys_with_stack(left: pl.DataFrame, right: pl.DataFrame, keys: list[str]) -> list[str]:
    """Join keys for ``left`` and ``right``, the stack's column added when both carry it (a
    row of one misreading meets only rows of the same misreading)."""
    return [*keys, STACK] if STACK in left.columns and STACK in right.columns else keys


def cents_text(cents: int) -> str:
    return str(engine.cents_to_usd(cents))


def micro_text(micro: int) -> str:
    return str(engine.micro_to_usd(micro))


def minor_text(amount_minor: int, currency: str) -> str:
    exponent = engine.exponent_of(currency)
    return str(Decimal(amount_minor).scaleb(-exponent).quantize(Decimal(1).scaleb(-exponent)))


def percent_text(ppm: int) -> str:
    return f"{(Decimal(ppm) / Decimal(10_000)).normalize():f}"


def fixed_point_text(value: pl.Expr, places: int) -> pl.Expr:
    """An integer count of 10^-places units as decimal text: 123456, 2 -> "1234.56"
    (the vectorized twin of :func:`cents_text` and :func:`micro_text`)."""
    scale = 10**places
    sign: pl.Expr = pl.when(value < 0).then(pl.lit("-")).otherwise(pl.lit(""))
    whole: pl.Expr = (value.abs() // scale).cast(pl.String)
    if places == 0:
        return pl.concat_str(sign, whole)
    fraction = (value.abs() % scale).cast(pl.String).str.zfill(places)
    return pl.concat_str(sign, whole, pl.lit("."), fraction)


def cents_expr(cents: pl.Expr) -> pl.Expr:
    return fixed_point_text(cents, 2)


def micro_expr(micro: pl.Expr) -> pl.Expr:
    return fixed_point_text(micro, 6)


def percent_expr(ppm: pl.Expr) -> pl.Expr:
    """Parts per million as a percentage without trailing zeros: 182500 -> "18.25"."""
    whole = (ppm // 10_000).cast(pl.String)
    rest = (ppm % 10_000).cast(pl.String).str.zfill(4).str.strip_chars_end("0")
    return pl.when(rest == "").then(whole).otherwise(whole + pl.lit(".") + rest)


def _cents(micro: pl.Expr, reading: RuleReading) -> pl.Expr:
    return engine.cents_from_micro(micro, reading.rounding)


# -- catalog ----------------------------------------------------------------------------


def isrc_of_track(data: LabelData) -> pl.DataFrame:
    tracks = data.table("tracks").join(
        data.table("releases").select(
            "release_id", "artist_id", pl.col("title").alias("release_title")
        ),
        on="release_id",
    )
    tracks = tracks.join(data.table("artists").select("artist_id", "name"), on="artist_id")
    return tracks.filter(pl.col("title").is_unique().over("release_id")).select(
        "track_id", "title", "release_title", "release_id", "name", answer=pl.col("isrc")
    )


def track_count_of_release(data: LabelData) -> pl.DataFrame:
    counts = data.table("tracks").group_by("release_id").agg(n=pl.len())
    return (
        data.table("releases")
        .join(counts, on="release_id")
        .select("release_id", "upc", answer=pl.col("n").cast(pl.String))
    )


def original_release_date(data: LabelData) -> pl.DataFrame:
    return data.table("releases").select(
        "release_id", "title", answer=pl.col("original_release_date").cast(pl.String)
    )


# -- contract terms ---------------------------------------------------------------------


def rate_in_force(data: LabelData) -> pl.DataFrame:
    terms = data.table("contract_terms")
    return terms.with_columns(answer=percent_expr(pl.col("rate_ppm"))).select(
        *stacked_by(terms), "contract_id", "channel", "period", "answer"
    )


def applied_rate(data: LabelData) -> pl.DataFrame:
    terms = data.table("contract_terms").filter(pl.col("units_in_period") > 0)
    return terms.with_columns(answer=percent_expr(pl.col("applied_rate_ppm"))).select(
        *stacked_by(terms), "contract_id", "channel", "period", "answer"
    )


def escalator_threshold(data: LabelData) -> pl.DataFrame:
    terms = data.table("contract_terms").filter(pl.col("escalator_units").is_not_null())
    return terms.select(
        *stacked_by(terms),
        "contract_id",
        "channel",
        "period",
        answer=pl.col("escalator_units").cast(pl.String),
    )


def clause_heading(data: LabelData) -> pl.DataFrame:
    clauses = data.table("contract_clauses")
    canary = data.table("canary")
    if canary.height:
        clauses = clauses.join(
            canary.select("contract_id", "clause_number"),
            on=["contract_id", "clause_number"],
            how="anti",
        )
    return clauses.select(
        "contract_id", pl.col("clause_number").cast(pl.String), answer=pl.col("heading")
    )


# -- money ------------------------------------------------------------------------------


def _artist_ledger(data: LabelData) -> pl.DataFrame:
    return data.table("artist_ledger").join(
        data.table("artists").select("artist_id", "name", "cross_collateralized"), on="artist_id"
    )


def artist_gross(data: LabelData) -> pl.DataFrame:
    ledger = _artist_ledger(data).filter(pl.col("gross_micro") != 0)
    ledger = ledger.with_columns(cents=_cents(pl.col("gross_micro"), data.reading))
    return ledger.with_columns(answer=cents_expr(pl.col("cents"))).select(
        *stacked_by(ledger), "artist_id", "period", "name", "answer"
    )


def artist_recouped(data: LabelData) -> pl.DataFrame:
    ledger = _artist_ledger(data).filter(pl.col("recouped_micro") != 0)
    ledger = ledger.with_columns(cents=_cents(pl.col("recouped_micro"), data.reading))
    return ledger.with_columns(answer=cents_expr(pl.col("cents"))).select(
        *stacked_by(ledger), "artist_id", "period", "name", "answer"
    )


def artist_net_payable(data: LabelData) -> pl.DataFrame:
    ledger = _artist_ledger(data)
    return ledger.with_columns(answer=cents_expr(pl.col("net_payable_cents"))).select(
        *stacked_by(ledger), "artist_id", "period", "name", "cross_collateralized", "answer"
    )


def account_balance_after(data: LabelData) -> pl.DataFrame:
    # A misreading that splits a pooled account reports the pooled account's balance as
    # the sum of its parts (the same question, answered the misread way).
    accounts = data.table("account_ledger")
    ledger = (
        accounts.with_columns(account_id=pl.col("account_id").str.split("/").list.first())
        .group_by([*stacked_by(accounts), "account_id", "artist_id", "period"])
        .agg(pl.col("balance_after_micro").sum())
        .with_columns(cents=_cents(pl.col("balance_after_micro"), data.reading))
    )
    return ledger.with_columns(answer=cents_expr(pl.col("cents"))).select(
        *stacked_by(accounts), "account_id", "period", "artist_id", "answer"
    )


def track_channel_royalty(data: LabelData) -> pl.DataFrame:
    # One row per track, period and channel already (the answer key groups them so).
    rows = data.table("track_period_royalties")
    return rows.with_columns(answer=micro_expr(pl.col("royalty_micro"))).select(
        *stacked_by(rows), "isrc", "period", "channel", "artist_id", "answer"
    )


ASKED_LINE_COLUMNS = ("line_id", "isrc", "period", "currency", "channel", "amount_minor")
"""The columns of a statement line :func:`line_royalty` reads."""


def asked_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """Statement lines (their text columns as text) as :func:`line_royalty` takes them: what
    it reads, with what no reading changes worked out once (each line's id as text and its
    currency's minor units) rather than once per misreading."""
    return lines.select(
        *ASKED_LINE_COLUMNS,
        line_text=pl.col("line_id").cast(pl.String),
        minor_per_unit=pl.col("currency").replace_strict(
            {c: 10**e for c, e in engine.CURRENCY_EXPONENTS.items()}, return_dtype=pl.Int64
        ),
    )


def line_royalty(data: LabelData, asked: pl.DataFrame) -> pl.DataFrame:
    """Rules 1-6 for the statement lines ``asked`` (:func:`asked_lines` of rows of
    statement_lines, of tracks the answer key covers)."""
    reading = data.reading
    if reading.convert_summed_amounts:
        # Summing a month's amounts before converting says nothing about one line.
        return pl.DataFrame(
            schema={"line_id": pl.String, "artist_id": pl.String, "answer": pl.String}
        )
    registry = data.table("anomalies")
    deals = deals_for(data.world, reading, prepared_lines(data.world).deals)
    royalties = data.table("track_period_royalties")
    covered = royalties.select(*stacked_by(royalties), "isrc").unique()
    terms = data.table("contract_terms")
    terms = terms.select(*stacked_by(terms), "contract_id", "channel", "period", "applied_rate_ppm")
    # Stacked, each asked line once per misreading whose key covers its track.
    lines = (
        asked.join(covered, on="isrc", how="inner" if stacked_by(covered) else "semi")
        .join(deals.select("isrc", "contract_id", "artist_id"), on="isrc")
        .join(data.table("fx_rates"), on=["period", "currency"])
    )
    lines = lines.join(
        terms, on=keys_with_stack(lines, terms, ["contract_id", "channel", "period"])
    )
    flagged = registry.filter(pl.col("flaggable"))
    if stacked_by(flagged):
        if not stacked_by(lines):
            # Misreadings that differ only in what they flag: each line once per misreading.
            lines = data.each_misreading(lines)
        # A registry files a line once.
        marks = flagged.select(STACK, "line_id", _flagged=pl.lit(True))
        lines = lines.join(marks, on=[STACK, "line_id"], how="left")
        is_flagged = pl.col("_flagged").fill_null(False)
    else:
        is_flagged = pl.col("line_id").is_in(flagged.get_column("line_id").implode())
    lines = lines.with_columns(
        gross=engine.div_round(
            pl.col("amount_minor") * pl.col("usd_per_unit_micro"),
            pl.col("minor_per_unit"),
            reading.rounding,
        )
    ).with_columns(
        royalty=pl.when(is_flagged & pl.lit(not reading.flagged_lines_earn))
        .then(0)
        .otherwise(
            engine.div_round(
                pl.col("gross") * pl.col("applied_rate_ppm"), engine.PPM, reading.rounding
            )
        )
    )
    return lines.select(
        *stacked_by(lines),
        pl.col("line_text").alias("line_id"),
        "artist_id",
        answer=micro_expr(pl.col("royalty")),
    )


def payout_total(data: LabelData, batches: pl.DataFrame) -> pl.DataFrame:
    """The sum of net payables of each batch (period, artist_ids joined by commas)."""
    ledger = data.table("artist_ledger")
    stack = stacked_by(ledger)
    ledger = ledger.select(*stack, "artist_id", "period", "net_payable_cents")
    members = batches.with_columns(artist_id=pl.col("artist_ids").str.split(",")).explode(
        "artist_id"
    )
    totals = (
        members.join(ledger, on=["artist_id", "period"])
        .group_by([*stack, "period", "artist_ids"])
        .agg(cents=pl.col("net_payable_cents").sum(), n=pl.len())
        .join(
            batches.select(
                "period", "artist_ids", pl.col("artist_ids").str.split(",").list.len().alias("size")
            ),
            on=["period", "artist_ids"],
        )
        .filter(pl.col("n") == pl.col("size"))
    )
    return totals.with_columns(answer=cents_expr(pl.col("cents"))).select(
        *stack, "period", "artist_ids", "answer"
    )


# -- statements and reconciliation ---------------------------------------------------


def _statement_strings(data: LabelData, prepared: PreparedLines) -> pl.DataFrame:
    """statement_index (in the prepared lines' coding) to statement_id, distributor_id,
    period and currency."""
    return (
        pl.DataFrame({"statement_id": prepared.statement_ids})
        .with_row_index("statement_index")
        .join(data.table("statements"), on="statement_id", how="left", maintain_order="left")
    )


def distributor_channel_units(data: LabelData) -> pl.DataFrame:
    """Units per distributor, period and channel, every line as reported; summed over the
    lines' integer codes (:func:`truth.prepared_lines`), one statement being one
    distributor's month."""
    prepared = prepared_lines(data.world)
    coded = prepared.coded.frame.select("statement_index", "channel_code", "units")
    if coded.select(pl.any_horizontal(pl.all().is_null())).to_series().any():
        lines = data.table("statement_lines")
        totals = lines.group_by(["distributor_id", "period", "channel"]).agg(
            units=pl.col("units").sum()
        )
    else:
        channels = pl.Series(engine.CHANNELS, dtype=pl.String)
        totals = (
            coded.group_by("statement_index", "channel_code")
            .agg(pl.col("units").sum())
            .join(
                _statement_strings(data, prepared).select(
                    pl.col("statement_index").cast(coded.schema["statement_index"]),
                    "distributor_id",
                    "period",
                ),
                on="statement_index",
            )
            .group_by("distributor_id", "period", "channel_code")
            .agg(pl.col("units").sum())
            .with_columns(channel=pl.lit(channels).gather(pl.col("channel_code")))
        )
    return totals.join(
        data.table("distributors").select("distributor_id", "name"), on="distributor_id"
    ).select("distributor_id", "period", "channel", "name", answer=pl.col("units").cast(pl.String))


def statement_clean_total(data: LabelData) -> pl.DataFrame:
    """The amounts of a statement's lines that are not flagged, in the statement currency:
    the statement's total as delivered less its flagged lines (found among the lines'
    integer codes, :func:`truth.prepared_lines`)."""
    flagged = data.table("anomalies").filter(pl.col("flaggable"))
    stack = stacked_by(flagged)
    prepared = prepared_lines(data.world)
    coded = prepared.coded.frame.select("line_id", "statement_index", "amount_minor")
    statements = data.table("statements")
    if stack:
        # Each misreading's flagged lines; every statement once per misreading.
        coded = coded.join(flagged.select(STACK, "line_id"), on="line_id")  # a line once each
        statements = data.each_misreading(statements)
    else:
        coded = coded.filter(pl.col("line_id").is_in(flagged.get_column("line_id").implode()))
    removed = (
        coded.group_by(*stack, "statement_index")
        .agg(removed=pl.col("amount_minor").sum())
        .with_columns(statement_id=pl.lit(prepared.statement_ids).gather(pl.col("statement_index")))
        .select(*stack, "statement_id", "removed")
    )
    sums = statements.join(removed, on=[*stack, "statement_id"], how="left").with_columns(
        amount=pl.col("total_amount_minor") - pl.col("removed").fill_null(0)
    )
    places = pl.col("currency").replace_strict(
        dict(engine.CURRENCY_EXPONENTS), return_dtype=pl.Int64
    )
    return sums.with_columns(
        answer=pl.when(places == 0)
        .then(fixed_point_text(pl.col("amount"), 0))
        .otherwise(fixed_point_text(pl.col("amount"), 2))
    ).select(*stack, "statement_id", "currency", "answer")


def statement_flagged_lines(data: LabelData) -> pl.DataFrame:
    flagged = data.table("anomalies").filter(pl.col("flaggable"))
    per_statement = flagged.group_by("statement_id").agg(pl.col("line_id").sort())
    statements = (
        data.table("statements")
        .select("statement_id")
        .join(per_statement, on="statement_id", how="left")
    )
    values = [
        ",".join(str(i) for i in ids) if ids else "NONE" for ids in statements["line_id"].to_list()
    ]
    return statements.select("statement_id").with_columns(answer=pl.Series(values, dtype=pl.String))


def line_should_be_flagged(data: LabelData) -> pl.DataFrame:
    """YES/NO for every line the registry lists (flagged or borderline), plus others."""
    registry = data.table("anomalies")
    return registry.select(
        *stacked_by(registry),
        pl.col("line_id").cast(pl.String),
        "statement_id",
        answer=pl.when(pl.col("flaggable")).then(pl.lit("YES")).otherwise(pl.lit("NO")),
    )


def anomaly_kind_count(data: LabelData) -> pl.DataFrame:
    flagged = data.table("anomalies").filter(pl.col("flaggable"))
    stack = stacked_by(flagged)
    counts = flagged.group_by(*stack, "kind").agg(n=pl.len())
    kinds = pl.DataFrame({"kind": list(FLAG_KINDS)})
    if stack:
        kinds = data.each_misreading(kinds)
    kinds = kinds.join(counts, on=[*stack, "kind"], how="left")
    return kinds.select(*stack, "kind", answer=pl.col("n").fill_null(0).cast(pl.String))


# -- clauses ---------------------------------------------------------------------------


def audit_clauses(data: LabelData) -> pl.DataFrame:
    """Each base contract's audit clause (found by what it says) and its notice in days."""
    clauses = data.table("contract_clauses").filter(
        pl.col("body").str.contains("may audit the Label's books", literal=True)
    )
    return clauses.select(
        "contract_id",
        pl.col("clause_number").cast(pl.String),
        answer=pl.col("body").str.extract(r"on (\d+) days' written notice", 1),
    )


def false_premise_clauses(data: LabelData) -> pl.DataFrame:
    """(contract, clause number) pairs that are not the contract's audit clause: a number
    past its last clause, or a clause about something else. The answer is to abstain."""
    clauses = data.table("contract_clauses").join(
        data.table("contracts").filter(pl.col("kind") == "base").select("contract_id"),
        on="contract_id",
    )
    audit = audit_clauses(data).select("contract_id", "clause_number")
    last = clauses.group_by("contract_id").agg(last=pl.col("clause_number").max())
    beyond = last.select("contract_id", clause_number=(pl.col("last") + 1).cast(pl.String))
    other = clauses.select("contract_id", pl.col("clause_number").cast(pl.String)).join(
        audit, on=["contract_id", "clause_number"], how="anti"
    )
    return (
        pl.concat([beyond, other])
        .with_columns(answer=pl.lit("ABSTAIN"))
        .join(audit.rename({"clause_number": "audit_clause"}), on="contract_id")
        .select("contract_id", "clause_number", "answer")
    )

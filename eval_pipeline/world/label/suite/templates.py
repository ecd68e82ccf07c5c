"""The label suite's question shapes, as a table: what each asks, of whom, and how it is checked.

A :class:`Template` names its answer table (:mod:`.answers`), the parameter columns that
identify a subject, the wording, the output contract, the trace checks and the first tool
call the model lane expects. ``rule_bearing`` templates are kept only for subjects where a
misreading of the rulebook changes the answer; lookups are kept as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_pipeline.cases.case import TRACE_SQL_CLEAN, AnswerKind, ExpectedToolCall, Tier
from eval_pipeline.world.label import engine, tools
from eval_pipeline.world.label.suite import answers
from eval_pipeline.world.label.suite.answers import AnswerTable, LabelData
from eval_pipeline.world.label.trace_checks import (
    TRACE_CITED_CLAUSE_READ,
    TRACE_MONEY_FROM_CALCULATOR,
)
from eval_pipeline.world.label.versions import Category

Row = Mapping[str, Any]

CENTS_CONTRACT = "End with one line: ANSWER: $<amount in USD, to the cent>"
MICRO_CONTRACT = "End with one line: ANSWER: $<amount in USD, to six decimal places>"


def contract_line(kind: str) -> str:
    return f"End with one line: ANSWER: <{kind}>"


PERCENT_CONTRACT = contract_line("rate in percent, e.g. 18.5")


@dataclass(frozen=True)
class Template:
    """One question shape of the suite."""

    name: str
    category: Category
    count: int
    answer_kind: AnswerKind
    table: AnswerTable
    params: tuple[str, ...]
    question: Callable[[Row], str]
    answer_line: Callable[[Row], str]
    first_call: Callable[[Row], ExpectedToolCall | None]
    trace_checks: tuple[str, ...] = (TRACE_SQL_CLEAN,)
    tiers: tuple[Tier, ...] = ("exact", "trace")
    rule_bearing: bool = False
    reads_rulebook: bool = True
    """False for lookups, whose answers no reading of the rulebook can change."""
    absent_answer: str | None = None
    """The answer for a subject a view's table does not list (a line no registry lists is
    not flagged); None where absence means the view did not compute it."""
    requires_rule: str | None = None
    """A rule every subject must exercise (cross-collateral cases must turn on pooling)."""
    artist_column: str | None = None
    """The column naming the subject's artist: money subjects come from the artists whose
    misreadings were computed, and one artist is not asked about twice per template."""
    payload: Callable[[Row, LabelData], dict[str, Any]] | None = None
    """The write the case expects (a payout batch), built from the answer key."""
    stackable: bool = False
    """Whether ``table`` answers a stacked view (:data:`answers.STACK`): many misreadings
    at once, each answer row with its misreading."""


def _fixed(text: str) -> Callable[[Row], str]:
    return lambda _row: text


def _sql(_row: Row) -> ExpectedToolCall:
    return ExpectedToolCall(name=tools.RUN_SQL)


def _calculator(row: Row) -> ExpectedToolCall:
    arguments: dict[str, str | int] = {
        "artist_id": str(row["artist_id"]),
        "period": str(row["period"]),
    }
    if "isrc" in row:
        arguments["isrc"] = str(row["isrc"])
    return ExpectedToolCall(name=tools.CALCULATE_ROYALTIES, arguments=arguments)


def _clause_call(row: Row) -> ExpectedToolCall:
    return ExpectedToolCall(
        name=tools.GET_CLAUSE,
        arguments={
            "contract_id": str(row["contract_id"]),
            "clause_number": int(row["clause_number"]),
        },
    )


def _find_artist(row: Row) -> ExpectedToolCall:
    return ExpectedToolCall(name=tools.FIND_ARTIST, arguments={"name": str(row["name"])})


def _period_end(row: Row) -> str:
    return engine.period_end(str(row["period"])).isoformat()


TEMPLATES: tuple[Template, ...] = (
    # -- catalog_lookup -------------------------------------------------------------
    Template(
        name="isrc_of_track",
        category="catalog_lookup",
        count=5,
        answer_kind="text",
        table=answers.isrc_of_track,
        params=("track_id",),
        question=lambda r: (
            f'What is the ISRC of the track "{r["title"]}" on the release "{r["release_title"]}" '
            f"(release {r['release_id']}) by {r['name']}?"
        ),
        answer_line=_fixed(contract_line("ISRC")),
        first_call=_sql,
        reads_rulebook=False,
    ),
    Template(
        name="track_count_of_release",
        category="catalog_lookup",
        count=5,
        answer_kind="integer",
        table=answers.track_count_of_release,
        params=("release_id",),
        question=lambda r: f"How many tracks are on release {r['release_id']} (UPC {r['upc']})?",
        answer_line=_fixed(contract_line("number of tracks")),
        first_call=_sql,
        reads_rulebook=False,
    ),
    Template(
        name="original_release_date",
        category="catalog_lookup",
        count=5,
        answer_kind="date",
        table=answers.original_release_date,
        params=("release_id",),
        question=lambda r: (
            f'What is the original release date of "{r["title"]}" (release {r["release_id"]})?'
        ),
        answer_line=_fixed(contract_line("YYYY-MM-DD")),
        first_call=_sql,
        reads_rulebook=False,
    ),
    # -- contract_terms -------------------------------------------------------------
    Template(
        name="rate_in_force",
        category="contract_terms",
        count=5,
        answer_kind="percent",
        table=answers.rate_in_force,
        params=("contract_id", "channel", "period"),
        question=lambda r: (
            f"Under contract {r['contract_id']} and its amendments, what {r['channel']} royalty "
            f"rate applies to the accounting period {r['period']} (before any escalator)?"
        ),
        answer_line=_fixed(PERCENT_CONTRACT),
        first_call=_sql,
        rule_bearing=True,
        artist_column="artist_id",
        stackable=True,
    ),
    Template(
        name="applied_rate",
        category="contract_terms",
        count=7,
        answer_kind="percent",
        table=answers.applied_rate,
        params=("contract_id", "channel", "period"),
        question=lambda r: (
            f"Which {r['channel']} royalty rate did contract {r['contract_id']}'s {r['channel']} "
            f"sales earn in {r['period']}, after applying any escalator to that period's units?"
        ),
        answer_line=_fixed(PERCENT_CONTRACT),
        first_call=_sql,
        rule_bearing=True,
        artist_column="artist_id",
        stackable=True,
    ),
    Template(
        name="escalator_threshold",
        category="contract_terms",
        count=4,
        answer_kind="integer",
        table=answers.escalator_threshold,
        params=("contract_id", "channel", "period"),
        question=lambda r: (
            f"Under the terms of contract {r['contract_id']} in force for {r['period']}, above "
            f"how many {r['channel']} units in one period does its escalated rate apply?"
        ),
        answer_line=_fixed(contract_line("number of units")),
        first_call=_sql,
        artist_column="artist_id",
        stackable=True,
    ),
    Template(
        name="clause_heading",
        category="contract_terms",
        count=4,
        answer_kind="text",
        table=answers.clause_heading,
        params=("contract_id", "clause_number"),
        question=lambda r: (
            f"What is the heading of clause §{r['clause_number']} of contract {r['contract_id']}?"
        ),
        answer_line=_fixed(contract_line("heading, as written")),
        first_call=_clause_call,
        trace_checks=(TRACE_CITED_CLAUSE_READ,),
        reads_rulebook=False,
    ),
    # -- royalty_math ---------------------------------------------------------------
    Template(
        name="artist_gross_royalty",
        category="royalty_math",
        count=8,
        answer_kind="money",
        table=answers.artist_gross,
        params=("artist_id", "period"),
        question=lambda r: (
            f"What gross royalty did {r['name']} ({r['artist_id']}) earn in {r['period']}, before "
            "recoupment, across all distributors?"
        ),
        answer_line=_fixed(CENTS_CONTRACT),
        first_call=_calculator,
        trace_checks=(TRACE_MONEY_FROM_CALCULATOR,),
        rule_bearing=True,
        artist_column="artist_id",
        stackable=True,
    ),
    Template(
        name="track_channel_royalty",
        category="royalty_math",
        count=9,
        answer_kind="money",
        table=answers.track_channel_royalty,
        params=("isrc", "period", "channel"),
        question=lambda r: (
            f"What royalty did track {r['isrc']} (artist {r['artist_id']}) earn on the "
            f"{r['channel']} channel in {r['period']}, to the micro-dollar?"
        ),
        answer_line=_fixed(MICRO_CONTRACT),
        first_call=_calculator,
        trace_checks=(TRACE_MONEY_FROM_CALCULATOR,),
        rule_bearing=True,
        artist_column="artist_id",
        stackable=True,
    ),
    # -- recoupment_state -----------------------------------------------------------
    Template(
        name="account_balance_after",
        category="recoupment_state",
        count=8,
        answer_kind="money",
        table=answers.account_balance_after,
        params=("account_id", "period"),
        question=lambda r: (
            f"What unrecouped balance remains on recoupment account {r['account_id']} after "
            f"{r['period']} is accounted?"
        ),
        answer_line=_fixed(CENTS_CONTRACT),
        first_call=_sql,
        trace_checks=(TRACE_MONEY_FROM_CALCULATOR,),
        rule_bearing=True,
        artist_column="artist_id",
        stackable=True,
    ),
    Template(
        name="artist_recouped",
        category="recoupment_state",
        count=7,
        answer_kind="money",
        table=answers.artist_recouped,
        params=("artist_id", "period"),
        question=lambda r: (
            f"How much of {r['name']}'s ({r['artist_id']}) {r['period']} earnings went to "
            "recouping advances and expenses?"
        ),
        answer_line=_fixed(CENTS_CONTRACT),
        first_call=_calculator,
        trace_checks=(TRACE_MONEY_FROM_CALCULATOR,),
        rule_bearing=True,
        artist_column="artist_id",
        stackable=True,
    ),
    # -- cross_collateral -----------------------------------------------------------
    Template(
        name="pooled_net_payable",
        category="cross_collateral",
        count=8,
        answer_kind="money",
        table=lambda data: answers.artist_net_payable(data).filter(pl.col("cross_collateralized")),
        params=("artist_id", "period"),
        question=lambda r: (
            f"{r['name']} ({r['artist_id']}) is cross-collateralized across their contracts. "
            f"What is their net payable for {r['period']}?"
        ),
        answer_line=_fixed(CENTS_CONTRACT),
        first_call=_calculator,
        trace_checks=(TRACE_MONEY_FROM_CALCULATOR,),
        rule_bearing=True,
        requires_rule="R7",
        artist_column="artist_id",
        stackable=True,
    ),
    # -- sql_analytics --------------------------------------------------------------
    Template(
        name="distributor_channel_units",
        category="sql_analytics",
        count=5,
        answer_kind="integer",
        table=answers.distributor_channel_units,
        params=("distributor_id", "period", "channel"),
        question=lambda r: (
            f"How many {r['channel']} units did {r['name']} ({r['distributor_id']}) report for "
            f"{r['period']}, counting every line of its statement as reported?"
        ),
        answer_line=_fixed(contract_line("number of units")),
        first_call=_sql,
        reads_rulebook=False,
    ),
    Template(
        name="statement_clean_total",
        category="sql_analytics",
        count=5,
        answer_kind="money",
        table=answers.statement_clean_total,
        params=("statement_id", "currency"),
        question=lambda r: (
            f"What is the sum of the amounts of the lines of statement {r['statement_id']} that "
            f"count under the label's reconciliation policies (flagged lines left out), in the "
            f"statement's own currency ({r['currency']})?"
        ),
        answer_line=lambda r: contract_line(f"amount in {r['currency']}"),
        first_call=_sql,
        rule_bearing=True,
        stackable=True,
    ),
    # -- reconciliation -------------------------------------------------------------
    Template(
        name="statement_flagged_lines",
        category="reconciliation",
        count=5,
        answer_kind="id_list",
        table=answers.statement_flagged_lines,
        params=("statement_id",),
        question=lambda r: (
            f"Reconcile statement {r['statement_id']}: which of its lines should be flagged under "
            "the label's reconciliation policies?"
        ),
        answer_line=_fixed(contract_line("line_ids, comma-separated, ascending; NONE if none")),
        first_call=_sql,
        rule_bearing=True,
    ),
    Template(
        name="line_should_be_flagged",
        category="reconciliation",
        count=6,
        answer_kind="yes_no",
        table=answers.line_should_be_flagged,
        params=("line_id",),
        question=lambda r: (
            f"Should line {r['line_id']} of statement {r['statement_id']} be flagged during "
            "reconciliation?"
        ),
        answer_line=_fixed(contract_line("YES or NO")),
        first_call=_sql,
        rule_bearing=True,
        absent_answer="NO",
        stackable=True,
    ),
    Template(
        name="anomaly_kind_count",
        category="reconciliation",
        count=4,
        answer_kind="integer",
        table=answers.anomaly_kind_count,
        params=("kind",),
        question=lambda r: (
            "Across all twelve months of statements, how many lines should be flagged as "
            f"'{str(r['kind']).replace('_', ' ')}' under the label's reconciliation policies?"
        ),
        answer_line=_fixed(contract_line("number of lines")),
        first_call=_sql,
        rule_bearing=True,
        stackable=True,
    ),
)

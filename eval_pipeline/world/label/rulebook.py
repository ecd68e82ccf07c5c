"""The label's rulebook: every convention the answer key uses, as the agent can read it.

The same texts are the world table ``label_policies`` (what an agent reads through the
product's tools), section 2 of ``docs/royalty-rules.md`` (a test keeps the two identical),
and the clauses of the contracts say the same things in contract language. Nothing the
answer key depends on is stated anywhere else.

Each rule also names its common misreadings. A :class:`RuleReading` is one way of reading
the whole rulebook: :data:`RULES` is the right one; every :class:`Misreading` changes one
knob. The suite keeps a case only when at least one misreading of the rules it exercises
changes its expected answer, and records which ones do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import polars as pl

from eval_pipeline.world.label.engine import PayableRounding, Rounding, TermsAsOf

DuplicateCopy = Literal["later", "earlier", "both"]
DealBy = Literal["release_date", "latest_contract"]
PreLedgerCharges = Literal["opening_period", "ignored"]


@dataclass(frozen=True)
class RuleReading:
    """One reading of the rulebook; the defaults are the rules as written (:data:`RULES`)."""

    # reconciliation policies: which lines are flagged
    duplicate_copy: DuplicateCopy = "later"
    flag_unknown_isrc: bool = True
    flag_currency_mismatch: bool = True
    flag_impossible_units: bool = True
    flag_pre_release: bool = True
    flag_returns: bool = False
    flag_territory_twins: bool = False
    # money rules
    flagged_lines_earn: bool = False
    flagged_units_count: bool = False
    convert_summed_amounts: bool = False
    deal_by: DealBy = "release_date"
    terms_as_of: TermsAsOf = "period_end"
    amendment_replaces_row: bool = True
    escalator_strict: bool = True
    rounding: Rounding = "half_even"
    royalty_per_line: bool = True
    pooled_accounts: bool = True
    pre_ledger_charges: PreLedgerCharges = "opening_period"
    payable_rounding: PayableRounding = "per_artist"


RULES = RuleReading()


@dataclass(frozen=True)
class Rule:
    """One entry of the rulebook."""

    rule_id: str
    topic: str
    text: str


@dataclass(frozen=True)
class Misreading:
    """A common wrong reading of one rule, as a reading of the whole rulebook."""

    misreading_id: str
    rule_id: str
    description: str
    reading: RuleReading
    money: bool
    """Whether it changes money (the ledgers); otherwise only which lines are flagged."""


RULEBOOK: tuple[Rule, ...] = (
    Rule(
        "R1",
        "Clean lines only",
        "A statement line flagged under the reconciliation policies F1-F5 earns no royalty "
        "and adds no units toward any escalator. Every other line counts, including a "
        "customer return (F6) with its negative amount and a sale that repeats another in a "
        "different territory (F7).",
    ),
    Rule(
        "R2",
        "Conversion to US dollars",
        "Each statement line is converted to US dollars on its own, at the fx_rates row of "
        "the line's own currency and period: gross_usd_micro = amount_minor x "
        "usd_per_unit_micro / 10^e, where e is 2 for USD, EUR and GBP and 0 for JPY, "
        "rounded half-even to an integer number of micro-dollars (six decimal places). "
        "Amounts are never summed before they are converted.",
    ),
    Rule(
        "R3",
        "Deal in force",
        "A track earns under the base contract of its artist whose term (effective_date to "
        "term_end_date, both inclusive) covers the original_release_date of the track's "
        "release, for as long as it earns: also after that term has ended and after a later "
        "contract has started.",
    ),
    Rule(
        "R4",
        "Terms in force",
        "For a base contract, channel and accounting period, the terms are those in force on "
        "the period's last day, and they apply to the whole period: the contract_rates row of "
        "the latest amendment of the contract (latest effective_date, then highest "
        "contract_id) that carries the channel and took effect on or before that day, "
        "otherwise the base contract's own row. An amendment row replaces the whole row "
        "(rate_ppm, escalator_units and escalated_rate_ppm): an amendment row without a "
        "threshold removes the escalator.",
    ),
    Rule(
        "R5",
        "Escalator",
        "units_in_period is the sum of units over the contract's unflagged lines of the "
        "channel in the period, across all distributors and currencies. When the terms carry "
        "an escalator and units_in_period is strictly greater than escalator_units, every "
        "line of that contract, channel and period earns escalated_rate_ppm; at or below the "
        "threshold, rate_ppm.",
    ),
    Rule(
        "R6",
        "Line royalty",
        "Each line's royalty_micro = gross_usd_micro x rate_ppm / 10^6, rounded half-even to "
        "an integer number of micro-dollars, line by line. Totals are sums of rounded line "
        "royalties; a rate is never applied to a summed gross. Half-even rounds to the "
        "nearest integer and a tie to the even one: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2.",
    ),
    Rule(
        "R7",
        "Earnings by recoupment account",
        "An account's earnings for a period are the royalties of every contract that recoups "
        "into it (contracts.recoupment_account_id). An independent account has one contract; "
        "a pooled account (a cross-collateralized artist) holds all the artist's contracts, "
        "so royalties under any of them recoup the charges under all of them.",
    ),
    Rule(
        "R8",
        "Recoupment",
        "Charges are advances (paid_date) and recoupable expenses (incurred_date; expenses "
        "with recoupable = false are the label's own cost), each charged to its account in "
        "the first period whose last day is on or after its date. The ledger opens on "
        "2025-01-01: everything dated before 2025 is charged in 2025-01, with nothing "
        "recouped before it. Per account and period: balance_before = the previous "
        "balance_after (0 before 2025-01) + the period's charges; recouped = the smaller of "
        "max(earnings, 0) and balance_before; balance_after = balance_before - recouped; "
        "payable = earnings - recouped.",
    ),
    Rule(
        "R9",
        "Net payable",
        "An artist's net payable for a period is the sum of the payables of all the artist's "
        "recoupment accounts in micro-dollars, rounded half-even to the cent once, at the "
        "end: never per line and never per account. A batch total is the sum of the "
        "artists' net payables.",
    ),
    Rule(
        "F1",
        "Duplicates",
        "Lines of one statement that agree in every column except line_id are one sale "
        "delivered more than once: the line with the lowest line_id is the original and "
        "counts; every later copy is flagged.",
    ),
    Rule(
        "F2",
        "Unknown ISRC",
        "A line whose isrc is not in the tracks table is flagged: the label cannot attribute "
        "it to a recording.",
    ),
    Rule(
        "F3",
        "Currency mismatch",
        "A line whose currency differs from its statement's currency is flagged: it is "
        "rejected as delivered, is not converted and earns nothing until the distributor "
        "restates it.",
    ),
    Rule(
        "F4",
        "Impossible units",
        "A line with negative units and a positive amount_minor (streams and sales cannot "
        "be returned for money), or with zero units and a non-zero amount_minor, is flagged.",
    ),
    Rule(
        "F5",
        "Before release",
        "A line whose period ends before the original_release_date of its track's release "
        "is flagged: a recording cannot sell before it is released.",
    ),
    Rule(
        "F6",
        "Returns",
        "A line with negative units and a negative amount_minor is a customer return: a "
        "real line, not flagged, that earns (negatively) like any other.",
    ),
    Rule(
        "F7",
        "Same sale, other territory",
        "Lines that share statement, isrc, channel, outlet, units and amount_minor but differ "
        "in territory are separate sales: real lines, not flagged.",
    ),
)
RULE_IDS: tuple[str, ...] = tuple(rule.rule_id for rule in RULEBOOK)


def _misreading(
    misreading_id: str, rule_id: str, description: str, *, money: bool = True, **knobs: object
) -> Misreading:
    return Misreading(
        misreading_id=misreading_id,
        rule_id=rule_id,
        description=description,
        reading=replace(RULES, **knobs),  # type: ignore[arg-type]
        money=money,
    )


MISREADINGS: tuple[Misreading, ...] = (
    _misreading(
        "R1.flagged_earn", "R1", "flagged lines earn like any other", flagged_lines_earn=True
    ),
    _misreading(
        "R2.convert_sums",
        "R2",
        "a month's amounts per track, channel and currency summed, then converted once",
        convert_summed_amounts=True,
    ),
    _misreading(
        "R3.latest_contract",
        "R3",
        "every track earns under the artist's latest contract",
        deal_by="latest_contract",
    ),
    _misreading(
        "R4.first_day",
        "R4",
        "terms in force on the period's first day (an amendment counts from the next month)",
        terms_as_of="period_start",
    ),
    _misreading(
        "R4.keeps_escalator",
        "R4",
        "an amendment row without a threshold keeps the base contract's escalator",
        amendment_replaces_row=False,
    ),
    _misreading(
        "R5.at_threshold",
        "R5",
        "the escalated rate applies at the threshold too (>=)",
        escalator_strict=False,
    ),
    _misreading(
        "R5.flagged_units",
        "R5",
        "units of flagged lines count toward the escalator",
        flagged_units_count=True,
    ),
    _misreading(
        "R6.half_up", "R6", "ties rounded half-up instead of half-even", rounding="half_up"
    ),
    _misreading(
        "R6.rate_on_sum",
        "R6",
        "the rate applied once to a track's summed gross per channel and month",
        royalty_per_line=False,
    ),
    _misreading(
        "R7.separate_contracts",
        "R7",
        "each contract of a pooled account recoups only its own charges",
        pooled_accounts=False,
    ),
    _misreading(
        "R8.pre_ledger_ignored",
        "R8",
        "charges dated before 2025 treated as recouped before the ledger opened",
        pre_ledger_charges="ignored",
    ),
    _misreading(
        "R9.round_per_account",
        "R9",
        "each account's payable rounded to the cent, then summed",
        payable_rounding="per_account",
    ),
    _misreading(
        "F1.both_copies", "F1", "both lines of a duplicate pair flagged", duplicate_copy="both"
    ),
    _misreading(
        "F1.earlier_copy",
        "F1",
        "the earlier line of a duplicate pair flagged",
        duplicate_copy="earlier",
        money=False,
    ),
    _misreading(
        "F2.kept",
        "F2",
        "lines with an unknown ISRC not flagged",
        flag_unknown_isrc=False,
        money=False,
    ),
    _misreading(
        "F3.converted",
        "F3",
        "a line in another currency converted at its own currency's rate and kept",
        flag_currency_mismatch=False,
    ),
    _misreading(
        "F4.kept",
        "F4",
        "negative or zero units with an amount not flagged",
        flag_impossible_units=False,
    ),
    _misreading(
        "F5.kept", "F5", "lines before the release date not flagged", flag_pre_release=False
    ),
    _misreading("F6.flagged", "F6", "customer returns flagged", flag_returns=True),
    _misreading(
        "F7.flagged",
        "F7",
        "the later of two lines differing only in territory flagged as a duplicate",
        flag_territory_twins=True,
    ),
)
MISREADINGS_BY_ID: dict[str, Misreading] = {m.misreading_id: m for m in MISREADINGS}


def policies_frame() -> pl.DataFrame:
    """The world table ``label_policies``: the rulebook as an agent reads it."""
    return pl.DataFrame(
        {
            "policy_id": [rule.rule_id for rule in RULEBOOK],
            "topic": [rule.topic for rule in RULEBOOK],
            "rule": [rule.text for rule in RULEBOOK],
        },
        schema={"policy_id": pl.String, "topic": pl.String, "rule": pl.String},
    )

"""An independent oracle for the label suite: every expected answer recomputed from the
`world` tables and the rulebook as written in docs/royalty-rules.md.

It imports neither the royalty engine, nor the answer key, nor the suite's answer tables:
lookups are plain SQL over DuckDB, flags are the reconciliation policies in SQL, and money
is a small Decimal reference of rules 1-9 written from the document. A few misreadings
are implemented too (as options), so the suite's claim that a case tells them apart is
checked by a second computation.
"""

from __future__ import annotations

import calendar
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from functools import cached_property
from typing import Any

import duckdb
import polars as pl

PERIODS = tuple(f"2025-{m:02d}" for m in range(1, 13))
EXPONENT = {"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0}
FLAG_ORDER = (
    "duplicate",
    "unknown_isrc",
    "currency_mismatch",
    "negative_units",
    "zero_units_with_amount",
    "pre_release",
)


@dataclass(frozen=True)
class Options:
    """How the oracle reads the rulebook; the defaults are the rules as written."""

    rounding: str = ROUND_HALF_EVEN
    escalator_at_threshold: bool = False
    pre_ledger_ignored: bool = False
    round_per_account: bool = False


RULES = Options()
MISREAD_OPTIONS: dict[str, Options] = {
    "R6.half_up": Options(rounding=ROUND_HALF_UP),
    "R5.at_threshold": Options(escalator_at_threshold=True),
    "R8.pre_ledger_ignored": Options(pre_ledger_ignored=True),
    "R9.round_per_account": Options(round_per_account=True),
}


def period_end(period: str) -> date:
    year, month = (int(part) for part in period.split("-"))
    return date(year, month, calendar.monthrange(year, month)[1])


def cents_text(cents: int) -> str:
    return f"{Decimal(cents) / 100:.2f}"


def micro_text(micro: int) -> str:
    return f"{Decimal(micro) / 1_000_000:.6f}"


def percent_text(ppm: int) -> str:
    return f"{(Decimal(ppm) / 10_000).normalize():f}"


def rounded(value: Decimal, rounding: str) -> int:
    return int(value.quantize(Decimal(1), rounding=rounding))


class Oracle:
    """Answers the label suite's questions from the world tables alone."""

    def __init__(self, world: Mapping[str, pl.DataFrame], options: Options = RULES) -> None:
        self.world = world
        self.options = options
        self.db = duckdb.connect()
        for name, frame in world.items():
            self.db.register("frame", frame.to_arrow())
            self.db.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
            self.db.unregister("frame")
        self._ledgers: dict[str, dict[str, Any]] = {}

    def reading(self, options: Options) -> Oracle:
        """The same world read with other options: the tables, flags and lines are shared,
        the ledgers are computed afresh."""
        other = Oracle.__new__(Oracle)
        other.world, other.options, other.db, other._ledgers = self.world, options, self.db, {}
        for shared in ("flag_kinds", "deal_of_isrc", "_rate_rows", "lines_by_artist"):
            other.__dict__[shared] = getattr(self, shared)
        return other

    def sql(self, query: str, *params: object) -> list[tuple[Any, ...]]:
        return self.db.execute(query, list(params)).fetchall()

    # -- reconciliation (F1-F7) -------------------------------------------------------

    @cached_property
    def flag_kinds(self) -> dict[int, str]:
        """line_id -> the first policy (F1-F5) that flags it."""
        rows = self.sql(
            """
            WITH l AS (
              SELECT l.*, s.currency AS statement_currency, r.original_release_date,
                     t.isrc IS NOT NULL AS known,
                     row_number() OVER (
                       PARTITION BY l.statement_id, l.distributor_id, l.period, l.isrc,
                                    l.channel, l.territory, l.outlet, l.units, l.amount_minor,
                                    l.currency
                       ORDER BY l.line_id) AS copy_number
              FROM statement_lines l
              JOIN statements s USING (statement_id)
              LEFT JOIN tracks t ON t.isrc = l.isrc
              LEFT JOIN releases r ON r.release_id = t.release_id
            )
            SELECT line_id,
                   copy_number > 1 AS duplicate,
                   NOT known AS unknown_isrc,
                   currency <> statement_currency AS currency_mismatch,
                   units < 0 AND amount_minor > 0 AS negative_units,
                   units = 0 AND amount_minor <> 0 AS zero_units_with_amount,
                   known AND last_day(strptime(period || '-01', '%Y-%m-%d'))
                         < original_release_date AS pre_release
            FROM l
            WHERE copy_number > 1 OR NOT known OR currency <> statement_currency
               OR units <= 0
               OR (known AND last_day(strptime(period || '-01', '%Y-%m-%d'))
                         < original_release_date)
            """
        )
        kinds: dict[int, str] = {}
        for line_id, *flags in rows:
            for kind, flagged in zip(FLAG_ORDER, flags, strict=True):
                if flagged:
                    kinds[int(line_id)] = kind
                    break
        return kinds

    # -- rules 3 and 4: deals and terms ------------------------------------------------

    @cached_property
    def deal_of_isrc(self) -> dict[str, str]:
        rows = self.sql(
            """
            SELECT t.isrc, c.contract_id
            FROM tracks t JOIN releases r USING (release_id)
            JOIN contracts c ON c.artist_id = r.artist_id AND c.kind = 'base'
             AND c.effective_date <= r.original_release_date
             AND r.original_release_date <= c.term_end_date
            """
        )
        deals: dict[str, str] = {}
        for isrc, contract_id in rows:
            assert isrc not in deals, f"{isrc} has two deals in force"
            deals[isrc] = contract_id
        return deals

    @cached_property
    def _rate_rows(self) -> dict[str, list[tuple[date, str, str, int, int | None, int | None]]]:
        """base contract -> (effective date, contract id, channel, rate, threshold, escalated)"""
        rows = self.sql(
            """
            SELECT coalesce(c.amends_contract_id, c.contract_id), c.kind, c.effective_date,
                   c.contract_id, r.channel, r.rate_ppm, r.escalator_units, r.escalated_rate_ppm
            FROM contract_rates r JOIN contracts c USING (contract_id)
            """
        )
        by_base: dict[str, list[Any]] = defaultdict(list)
        for base, kind, effective, contract_id, channel, rate, units, escalated in rows:
            by_base[base].append((kind, effective, contract_id, channel, rate, units, escalated))
        return by_base

    def terms(
        self, contract_id: str, channel: str, period: str
    ) -> tuple[int, int | None, int | None]:
        """Rule 4: the row in force on the period's last day (latest amendment, then id)."""
        last_day = period_end(period)
        base_row = None
        amendments = []
        for kind, effective, cid, ch, rate, units, escalated in self._rate_rows[contract_id]:
            if ch != channel:
                continue
            if kind == "base":
                base_row = (rate, units, escalated)
            elif effective <= last_day:
                amendments.append(((effective, cid), (rate, units, escalated)))
        if amendments:
            return max(amendments)[1]
        assert base_row is not None, f"{contract_id} has no {channel} row"
        return base_row

    def applies_escalation(self, units: int, threshold: int | None) -> bool:
        if threshold is None:
            return False
        return units >= threshold if self.options.escalator_at_threshold else units > threshold

    # -- money, per artist ---------------------------------------------------------------

    @cached_property
    def lines_by_artist(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every line of a known recording with its FX rate, grouped by artist (one scan)."""
        rows = self.sql(
            """
            SELECT r.artist_id, l.line_id, l.isrc, l.channel, l.period, l.units, l.amount_minor,
                   l.currency, f.usd_per_unit_micro
            FROM statement_lines l
            JOIN tracks t ON t.isrc = l.isrc
            JOIN releases r ON r.release_id = t.release_id
            JOIN fx_rates f ON f.period = l.period AND f.currency = l.currency
            ORDER BY l.line_id
            """
        )
        grouped: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        for artist_id, *line in rows:
            grouped[artist_id].append(tuple(line))
        return grouped

    def ledger(self, artist_id: str) -> dict[str, Any]:
        """Rules 1-9 for every period of one artist, in integers of micro-dollars."""
        if artist_id in self._ledgers:
            return self._ledgers[artist_id]
        rounding = self.options.rounding
        lines = self.lines_by_artist.get(artist_id, [])
        flagged = self.flag_kinds
        clean = [row for row in lines if row[0] not in flagged]
        units: dict[tuple[str, str, str], int] = defaultdict(int)
        for _, isrc, channel, period, n, *_ in clean:
            units[(self.deal_of_isrc[isrc], channel, period)] += n
        line_royalty: dict[int, int] = {}
        by_track: dict[tuple[str, str, str], int] = defaultdict(int)
        by_contract: dict[tuple[str, str], int] = defaultdict(int)
        for line_id, isrc, channel, period, _n, amount, currency, fx in clean:
            contract = self.deal_of_isrc[isrc]
            rate, threshold, escalated = self.terms(contract, channel, period)
            if self.applies_escalation(units[(contract, channel, period)], threshold):
                assert escalated is not None
                rate = escalated
            gross = rounded(Decimal(amount) * fx / Decimal(10) ** EXPONENT[currency], rounding)
            royalty = rounded(Decimal(gross) * rate / 1_000_000, rounding)
            line_royalty[line_id] = royalty
            by_track[(isrc, channel, period)] += royalty
            by_contract[(contract, period)] += royalty
        accounts = self.sql(
            """
            SELECT DISTINCT c.recoupment_account_id, c.contract_id
            FROM contracts c WHERE c.artist_id = ? AND c.kind = 'base'
            """,
            artist_id,
        )
        contracts_of: dict[str, list[str]] = defaultdict(list)
        for account, contract in accounts:
            contracts_of[account].append(contract)
        charges: dict[tuple[str, str], int] = defaultdict(int)
        for account, day, cents in self.sql(
            """
            SELECT a.account_id, a.paid_date, a.amount_cents FROM advances a
            JOIN recoupment_accounts r USING (account_id) WHERE r.artist_id = ?
            UNION ALL
            SELECT e.account_id, e.incurred_date, e.amount_cents FROM expenses e
            JOIN recoupment_accounts r USING (account_id) WHERE r.artist_id = ? AND e.recoupable
            """,
            artist_id,
            artist_id,
        ):
            if day < date(2025, 1, 1) and self.options.pre_ledger_ignored:
                continue
            period = next((p for p in PERIODS if period_end(p) >= day), None)
            if period is not None:
                charges[(account, period)] += cents * 10_000
        balances: dict[tuple[str, str], int] = {}
        recouped: dict[tuple[str, str], int] = {}
        payable: dict[tuple[str, str], int] = {}
        earnings: dict[tuple[str, str], int] = {}
        for account, contracts in contracts_of.items():
            balance = 0
            for period in PERIODS:
                earned = sum(by_contract[(c, period)] for c in contracts)
                balance += charges[(account, period)]
                taken = min(max(earned, 0), balance)
                balance -= taken
                balances[(account, period)] = balance
                recouped[(account, period)] = taken
                payable[(account, period)] = earned - taken
                earnings[(account, period)] = earned
        result = {
            "units": units,
            "line_royalty": line_royalty,
            "by_track": by_track,
            "accounts": sorted(contracts_of),
            "balances": balances,
            "recouped": recouped,
            "payable": payable,
            "earnings": earnings,
        }
        self._ledgers[artist_id] = result
        return result

    def to_cents(self, micro: int) -> int:
        return rounded(Decimal(micro) / 10_000, self.options.rounding)

    def net_payable_cents(self, artist_id: str, period: str) -> int:
        ledger = self.ledger(artist_id)
        parts = [ledger["payable"][(a, period)] for a in ledger["accounts"]]
        if self.options.round_per_account:
            return sum(self.to_cents(part) for part in parts)
        return self.to_cents(sum(parts))

    def artist_of(self, **key: str) -> str:
        if "artist_id" in key:
            return key["artist_id"]
        if "isrc" in key:
            query = (
                "SELECT r.artist_id FROM tracks t JOIN releases "
                "r USING (release_id) WHERE t.isrc = ?"
            )
            return str(self.sql(query, key["isrc"])[0][0])
        if "account_id" in key:
            query = "SELECT artist_id FROM recoupment_accounts WHERE account_id = ?"
            return str(self.sql(query, key["account_id"])[0][0])
        query = "SELECT artist_id FROM contracts WHERE contract_id = ?"
        return str(self.sql(query, key["contract_id"])[0][0])

    def contract_units(self, contract_id: str, channel: str, period: str) -> int:
        """Rule 5's units_in_period: unflagged lines of the contract, channel and period."""
        ledger = self.ledger(self.artist_of(contract_id=contract_id))
        return int(ledger["units"].get((contract_id, channel, period), 0))

    # -- the questions -------------------------------------------------------------------

    def answer(self, template: str, p: Mapping[str, str]) -> str:
        handler = getattr(self, f"_{template}", None)
        if handler is None:
            raise KeyError(f"the oracle does not know template {template!r}")
        return str(handler(p))

    def _isrc_of_track(self, p: Mapping[str, str]) -> str:
        return str(self.sql("SELECT isrc FROM tracks WHERE track_id = ?", p["track_id"])[0][0])

    def _track_count_of_release(self, p: Mapping[str, str]) -> str:
        return str(
            self.sql("SELECT count(*) FROM tracks WHERE release_id = ?", p["release_id"])[0][0]
        )

    def _original_release_date(self, p: Mapping[str, str]) -> str:
        query = "SELECT original_release_date FROM releases WHERE release_id = ?"
        return str(self.sql(query, p["release_id"])[0][0])

    def _rate_in_force(self, p: Mapping[str, str]) -> str:
        return percent_text(self.terms(p["contract_id"], p["channel"], p["period"])[0])

    _injected_clause_then_rate = _rate_in_force

    def _applied_rate(self, p: Mapping[str, str]) -> str:
        rate, threshold, escalated = self.terms(p["contract_id"], p["channel"], p["period"])
        units = self.contract_units(p["contract_id"], p["channel"], p["period"])
        if self.applies_escalation(units, threshold):
            assert escalated is not None
            rate = escalated
        return percent_text(rate)

    def _escalator_threshold(self, p: Mapping[str, str]) -> str:
        return str(self.terms(p["contract_id"], p["channel"], p["period"])[1])

    def _clause_heading(self, p: Mapping[str, str]) -> str:
        query = "SELECT heading FROM contract_clauses WHERE contract_id = ? AND clause_number = ?"
        return str(self.sql(query, p["contract_id"], int(p["clause_number"]))[0][0])

    _injected_clause_heading = _clause_heading

    def _artist_gross_royalty(self, p: Mapping[str, str]) -> str:
        ledger = self.ledger(p["artist_id"])
        total = sum(ledger["earnings"][(a, p["period"])] for a in ledger["accounts"])
        return cents_text(self.to_cents(total))

    def _artist_recouped(self, p: Mapping[str, str]) -> str:
        ledger = self.ledger(p["artist_id"])
        total = sum(ledger["recouped"][(a, p["period"])] for a in ledger["accounts"])
        return cents_text(self.to_cents(total))

    def _pooled_net_payable(self, p: Mapping[str, str]) -> str:
        return cents_text(self.net_payable_cents(p["artist_id"], p["period"]))

    _known_artist_net_payable = _pooled_net_payable
    _injected_clause_then_net_payable = _pooled_net_payable

    def _track_channel_royalty(self, p: Mapping[str, str]) -> str:
        ledger = self.ledger(self.artist_of(isrc=p["isrc"]))
        return micro_text(ledger["by_track"][(p["isrc"], p["channel"], p["period"])])

    def _line_royalty(self, p: Mapping[str, str]) -> str:
        query = "SELECT isrc FROM statement_lines WHERE line_id = ?"
        isrc = str(self.sql(query, int(p["line_id"]))[0][0])
        ledger = self.ledger(self.artist_of(isrc=isrc))
        return micro_text(ledger["line_royalty"].get(int(p["line_id"]), 0))

    def _account_balance_after(self, p: Mapping[str, str]) -> str:
        ledger = self.ledger(self.artist_of(account_id=p["account_id"]))
        return cents_text(self.to_cents(ledger["balances"][(p["account_id"], p["period"])]))

    def _payout_batch(self, p: Mapping[str, str]) -> str:
        artists = p["artist_ids"].split(",")
        return cents_text(sum(self.net_payable_cents(a, p["period"]) for a in artists))

    def _distributor_channel_units(self, p: Mapping[str, str]) -> str:
        query = (
            "SELECT sum(units) FROM statement_lines "
            "WHERE distributor_id = ? AND period = ? AND channel = ?"
        )
        return str(self.sql(query, p["distributor_id"], p["period"], p["channel"])[0][0])

    def _statement_clean_total(self, p: Mapping[str, str]) -> str:
        rows = self.sql(
            "SELECT line_id, amount_minor FROM statement_lines WHERE statement_id = ?",
            p["statement_id"],
        )
        total = sum(amount for line_id, amount in rows if line_id not in self.flag_kinds)
        places = EXPONENT[p["currency"]]
        return f"{Decimal(total).scaleb(-places):.{places}f}"

    def _statement_flagged_lines(self, p: Mapping[str, str]) -> str:
        rows = self.sql(
            "SELECT line_id FROM statement_lines WHERE statement_id = ? ORDER BY line_id",
            p["statement_id"],
        )
        flagged = [str(line_id) for (line_id,) in rows if line_id in self.flag_kinds]
        return ",".join(flagged) or "NONE"

    def _line_should_be_flagged(self, p: Mapping[str, str]) -> str:
        return "YES" if int(p["line_id"]) in self.flag_kinds else "NO"

    def _anomaly_kind_count(self, p: Mapping[str, str]) -> str:
        return str(sum(1 for kind in self.flag_kinds.values() if kind == p["kind"]))

    def _unknown_artist(self, p: Mapping[str, str]) -> str:
        assert not self.sql("SELECT 1 FROM artists WHERE name = ?", p["name"])
        return "ABSTAIN"

    def _audit_body(self, p: Mapping[str, str]) -> str | None:
        query = "SELECT body FROM contract_clauses WHERE contract_id = ? AND clause_number = ?"
        rows = self.sql(query, p["contract_id"], int(p["clause_number"]))
        body = str(rows[0][0]) if rows else ""
        return body if "may audit the Label's books" in body else None

    def _false_premise_clause(self, p: Mapping[str, str]) -> str:
        assert self._audit_body(p) is None, "the premise holds: that clause is about audits"
        return "ABSTAIN"

    def _audit_notice_days(self, p: Mapping[str, str]) -> str:
        body = self._audit_body(p)
        assert body is not None
        match = re.search(r"on (\d+) days' written notice", body)
        assert match is not None
        return match.group(1)

"""Planting anomalies into clean statement lines: how many of each kind varies with the seed.

Every pick is a counter-addressed draw, so the same seed plants the same anomalies in the
same lines. The planter only records what it did; which lines are flagged is decided by
the visible reconciliation rules (:mod:`eval_pipeline.world.label.reconcile`), and
:func:`~eval_pipeline.world.label.statements.build_statements` checks that they find
exactly what was planted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Any

import polars as pl

from eval_pipeline.errors import WorldError
from eval_pipeline.world.label.catalog import Catalog
from eval_pipeline.world.label.config import SUPPORTED_CURRENCIES
from eval_pipeline.world.label.distributors import PERIODS, DistributorSpec
from eval_pipeline.world.label.engine import CHANNELS, CURRENCY_EXPONENTS, div_half_even
from eval_pipeline.world.rng import Stream


@dataclass(frozen=True)
class PlantedAnomaly:
    """One planted anomaly before line ids exist (``tmp`` is the line's position key)."""

    kind: str
    tmp: int
    related_tmp: int | None
    flaggable: bool
    note: str


ANOMALY_PLAN: tuple[tuple[str, int, int, bool], ...] = (
    # (kind, fewest, most, flaggable): how many of each kind is drawn from the seed
    ("duplicate", 6, 12, True),
    ("unknown_isrc", 4, 9, True),
    ("currency_mismatch", 4, 8, True),
    ("negative_units", 3, 7, True),
    ("zero_units_with_amount", 2, 5, True),
    ("pre_release", 2, 4, True),
    ("genuine_return", 3, 5, False),
    ("territory_near_duplicate", 3, 5, False),
)
_OTHER_REGISTRANTS: tuple[str, ...] = ("ZQ9", "XK4", "QV7", "J8W")


@dataclass(frozen=True)
class _Line:
    """One statement line while anomalies are planted (before line ids exist)."""

    tmp: int
    stmt_index: int
    track_index: int
    combo_id: int
    currency_code: int
    statement_id: str
    distributor_id: str
    period: str
    isrc: str
    channel: str
    territory: str
    outlet: str
    units: int
    amount_minor: int
    currency: str


class Planter:
    """Plants :data:`ANOMALY_PLAN` into the clean lines; every pick is a counter-addressed
    draw, so the same seed plants the same anomalies in the same lines.

    It works on the integer form of the lines (predicates over codes) and spells out a
    line's strings only for the few lines it touches.
    """

    def __init__(
        self,
        seed: int,
        lines: pl.DataFrame,
        meta: pl.DataFrame,
        catalog: Catalog,
        specs: tuple[DistributorSpec, ...],
        combos: pl.DataFrame,
        fx: pl.DataFrame,
    ) -> None:
        self.stream = Stream(seed, "label/anomalies")
        self.lines = lines.with_columns(dist_index=pl.col("stmt_index") // len(PERIODS))
        self.meta: list[tuple[str, str, str]] = [
            (str(a), str(b), str(c))
            for a, b, c in meta.sort("stmt_index")
            .select("statement_id", "distributor_id", "period")
            .iter_rows()
        ]
        self.catalog = catalog
        self.isrcs: list[str] = [str(i) for i in catalog.track_facts.get_column("isrc").to_list()]
        self.specs = specs
        self.dist_index = {spec.distributor_id: i for i, spec in enumerate(specs)}
        self.combos = combos
        self.combo_info: dict[int, tuple[str, str, str]] = {
            int(c): (str(t), str(o), str(ch))
            for c, t, o, ch in combos.select(
                "combo_id", "territory", "outlet", "channel"
            ).iter_rows()
        }
        self.fx: dict[tuple[str, str], int] = {
            (str(p), str(c)): int(r)
            for p, c, r in fx.select("period", "currency", "usd_per_unit_micro").iter_rows()
        }
        self.used: set[int] = set()
        self.candidates: dict[str, pl.Series] = {}
        self.counter = 0
        self.mutated: dict[int, _Line] = {}
        self.inserted: list[_Line] = []
        self.planted: list[PlantedAnomaly] = []
        self.next_tmp = lines.height
        self.extra_isrcs: list[str] = []
        self.n_tracks = catalog.track_facts.height
        self.combo_ids: dict[tuple[int, bool, str, str], int] = {
            (int(d), bool(p), str(t), str(o)): int(c)
            for c, d, p, t, o in combos.select(
                "combo_id", "dist_index", "physical_ok", "territory", "outlet"
            ).iter_rows()
        }

    def dist(self, distributor_id: str) -> pl.Expr:
        return pl.col("dist_index") == self.dist_index[distributor_id]

    def channel(self, channel: str) -> pl.Expr:
        return pl.col("channel_code") == CHANNELS.index(channel)

    def in_territory(self, territory: str) -> pl.Expr:
        ids = sorted(c for c, (t, _, _) in self.combo_info.items() if t == territory)
        return pl.col("combo_id").is_in(ids)

    def line_at(self, tmp: int) -> _Line:
        """The line at position ``tmp`` with its strings spelled out."""
        row = self.lines.row(tmp, named=True)
        statement_id, distributor_id, period = self.meta[row["stmt_index"]]
        territory, outlet, channel = self.combo_info[row["combo_id"]]
        return _Line(
            tmp=tmp,
            stmt_index=row["stmt_index"],
            track_index=row["track_index"],
            combo_id=row["combo_id"],
            currency_code=row["currency_code"],
            statement_id=statement_id,
            distributor_id=distributor_id,
            period=period,
            isrc=self.isrcs[row["track_index"]],
            channel=channel,
            territory=territory,
            outlet=outlet,
            units=row["units"],
            amount_minor=row["amount_minor"],
            currency=SUPPORTED_CURRENCIES[row["currency_code"]],
        )

    def draw(self, bound: int) -> int:
        self.counter += 1
        return self.stream.below(self.counter, bound)

    def pick_line(self, kind: str, predicate: pl.Expr) -> _Line:
        """A random line matching ``predicate`` that no other anomaly touched."""
        if kind not in self.candidates:
            self.candidates[kind] = self.lines.select(pl.col("tmp").filter(predicate)).to_series()
        candidates = self.candidates[kind]
        for _ in range(10_000):
            if candidates.len() == 0:
                break
            tmp = int(candidates[self.draw(candidates.len())])
            if tmp not in self.used:
                self.used.add(tmp)
                return self.line_at(tmp)
        raise WorldError(f"no unused statement line fits a {kind} anomaly")

    def insert(self, line: _Line) -> int:
        tmp = self.next_tmp
        self.next_tmp += 1
        self.inserted.append(replace(line, tmp=tmp))
        self.used.add(tmp)
        return tmp

    def mutate(self, line: _Line, **changes: Any) -> int:
        self.mutated[line.tmp] = replace(line, **changes)
        return line.tmp

    def free_combos(self, line: _Line, channel: str) -> list[dict[str, Any]]:
        """(territory, outlet) pairs of the line's distributor, in ``channel``, that its track
        has no line for in its statement: inserting one keeps line keys unique."""
        taken = {
            self.combo_info[int(c)][:2]
            for c in self.lines.select(
                pl.col("combo_id").filter(
                    (pl.col("stmt_index") == line.stmt_index)
                    & (pl.col("track_index") == line.track_index)
                )
            ).to_series()
        }
        options = self.combos.filter(
            (pl.col("dist_index") == self.dist_index[line.distributor_id])
            & pl.col("physical_ok")
            & (pl.col("channel") == channel)
        ).sort("combo_id")
        return [
            row
            for row in options.iter_rows(named=True)
            if (row["territory"], row["outlet"]) not in taken
        ]

    def record(self, kind: str, tmp: int, related: int | None, flaggable: bool, note: str) -> None:
        self.planted.append(PlantedAnomaly(kind, tmp, related, flaggable, note))

    def plant(self) -> None:
        for index, (kind, fewest, most, flaggable) in enumerate(ANOMALY_PLAN):
            plant_one = getattr(self, f"_plant_{kind}")
            for i in range(self.stream.child("counts").between(index, fewest, most)):
                plant_one(i, flaggable)

    def _convert(self, amount_minor: int, period: str, source: str, target: str) -> int:
        target_scale = int(10 ** CURRENCY_EXPONENTS[target])
        source_scale = int(10 ** CURRENCY_EXPONENTS[source])
        numerator = amount_minor * self.fx[(period, source)] * target_scale
        return div_half_even(numerator, self.fx[(period, target)] * source_scale)

    # -- the kinds ---------------------------------------------------------------------

    def _plant_duplicate(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("not-sync", ~self.channel("sync"))
        tmp = self.insert(line)
        self.record(
            "duplicate",
            tmp,
            line.tmp,
            flaggable,
            "repeats line {related} of the same statement under a new line id",
        )

    def _plant_unknown_isrc(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("not-sync", ~self.channel("sync"))
        known = set(self.catalog.track_facts.get_column("isrc").to_list())
        registrant = _OTHER_REGISTRANTS[i % len(_OTHER_REGISTRANTS)]
        isrc = f"{line.isrc[:2]}{registrant}{line.isrc[5:7]}{90_000 + self.draw(9_999):05d}"
        if isrc in known:  # pragma: no cover - the catalog never uses these registrants
            raise WorldError(f"planned unknown ISRC {isrc} exists in the catalog")
        self.extra_isrcs.append(isrc)
        tmp = self.mutate(line, isrc=isrc, track_index=self.n_tracks + len(self.extra_isrcs) - 1)
        self.record("unknown_isrc", tmp, None, flaggable, f"ISRC {isrc} is not in the catalog")

    def _plant_currency_mismatch(self, i: int, flaggable: bool) -> None:
        if i < 4 and "DST-04" in self.dist_index:
            line = self.pick_line("DST-04 GB", self.dist("DST-04") & self.in_territory("GB"))
            target = "GBP"
        else:
            sellers = [s.distributor_id for s in self.specs if s.lines_per_month >= 1_000]
            seller = sellers[i % len(sellers)]
            line = self.pick_line(seller, self.dist(seller))
            others = [c for c in SUPPORTED_CURRENCIES if c != line.currency]
            target = others[i % len(others)]
        amount = self._convert(line.amount_minor, line.period, line.currency, target)
        tmp = self.mutate(
            line,
            currency=target,
            currency_code=SUPPORTED_CURRENCIES.index(target),
            amount_minor=amount,
        )
        self.record(
            "currency_mismatch",
            tmp,
            None,
            flaggable,
            f"line amount in {target} on a {line.currency} statement",
        )

    def _plant_negative_units(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("streams", self.channel("streaming") & (pl.col("units") > 10))
        tmp = self.mutate(line, units=-line.units)
        self.record(
            "negative_units",
            tmp,
            None,
            flaggable,
            "negative stream count with a positive amount; streams cannot be returned",
        )

    def _plant_zero_units_with_amount(self, i: int, flaggable: bool) -> None:
        line = self.pick_line("paid", ~self.channel("sync") & (pl.col("amount_minor") > 0))
        tmp = self.mutate(line, units=0)
        self.record(
            "zero_units_with_amount", tmp, None, flaggable, "zero units but a positive amount"
        )

    def _plant_pre_release(self, i: int, flaggable: bool) -> None:
        facts = self.catalog.track_facts.filter(pl.col("release_date") >= date(2025, 3, 1)).sort(
            "track_index"
        )
        track = facts.row(self.draw(facts.height), named=True)
        release_period = track["release_date"].month - 1
        period_index = self.draw(release_period)
        dist = self.dist_index["DST-01"]
        stmt_index = dist * len(PERIODS) + period_index
        units = 200 + self.draw(2_800)
        spec = self.specs[dist]
        price = next(o.price_micro_minor for o in spec.outlets if o.name == "premium")
        line = _Line(
            tmp=-1,
            stmt_index=stmt_index,
            track_index=int(track["track_index"]),
            combo_id=self.combo_ids[(dist, False, "US", "premium")],
            currency_code=SUPPORTED_CURRENCIES.index(spec.currency),
            statement_id=f"STM-{spec.distributor_id}-{PERIODS[period_index]}",
            distributor_id=spec.distributor_id,
            period=PERIODS[period_index],
            isrc=str(track["isrc"]),
            channel="streaming",
            territory="US",
            outlet="premium",
            units=units,
            amount_minor=div_half_even(units * price, 1_000_000),
            currency=spec.currency,
        )
        tmp = self.insert(line)
        self.record(
            "pre_release",
            tmp,
            None,
            flaggable,
            f"streams reported before the recording's release on {track['release_date']}",
        )

    def _plant_genuine_return(self, i: int, flaggable: bool) -> None:
        if "physical" not in self.candidates:
            self.candidates["physical"] = self.lines.select(
                pl.col("tmp").filter(self.dist("DST-04") & self.channel("physical"))
            ).to_series()
        sales = self.candidates["physical"]
        for _ in range(100):
            if sales.len() == 0:
                break
            sold = sales.gather([self.draw(sales.len())])
            template = self.line_at(int(sold[0]))
            free = self.free_combos(template, "physical")
            if not free:
                continue
            combo = free[self.draw(len(free))]
            returned = 1 + self.draw(2)
            line = replace(
                template,
                combo_id=int(combo["combo_id"]),
                territory=str(combo["territory"]),
                outlet=str(combo["outlet"]),
                units=-returned,
                amount_minor=-div_half_even(returned * int(combo["price_micro_minor"]), 1_000_000),
            )
            tmp = self.insert(line)
            self.record(
                "genuine_return",
                tmp,
                None,
                flaggable,
                f"a customer return of {returned} unit(s) in {combo['territory']}: negative "
                "units with a matching negative amount; a real line that earns (negatively)",
            )
            return
        raise WorldError(
            "no physical sale with a free territory to attach a customer return to "
            "(the world is too small: raise its scale)"
        )

    def _plant_territory_near_duplicate(self, i: int, flaggable: bool) -> None:
        for _ in range(100):
            line = self.pick_line("DST-01 100+", self.dist("DST-01") & (pl.col("units") >= 100))
            free = [c for c in self.free_combos(line, "streaming") if c["outlet"] == line.outlet]
            if not free:
                continue
            combo = free[self.draw(len(free))]
            tmp = self.insert(
                replace(line, territory=str(combo["territory"]), combo_id=int(combo["combo_id"]))
            )
            self.record(
                "territory_near_duplicate",
                tmp,
                line.tmp,
                flaggable,
                "same ISRC, outlet, units and amount as line {related} but in territory "
                f"{combo['territory']} instead of {line.territory}; the distributor reports "
                "both territories; a real line",
            )
            return
        raise WorldError("no line to mirror into another territory")  # pragma: no cover

"""What the label recoups: advances (every cross-collateralized artist's two latest
contracts carry one) and expenses, recoupable or not. A year of royalties is about one cent
per unit of a contract's popularity: an advance is 0.2-2.5 years of expected royalties, a
recoupable expense 0.02-0.3 years."""

from __future__ import annotations

from datetime import date, timedelta

import polars as pl

from eval_pipeline.world.label import names
from eval_pipeline.world.label.roster import WORLD_START, ArtistDraws, ContractDraws, date_between
from eval_pipeline.world.rng import Cumulative, Stream

N_ADVANCES = 100
N_EXPENSES = 80


def draw_charges(
    stream: Stream, artists: ArtistDraws, contracts: ContractDraws, contract_pop: list[int]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Advances (every cross-collateralized artist's two latest contracts get one, so the
    pooled account recoups charges of more than one contract) and expenses."""
    n_base = len(contracts.artist)
    ids = contracts.ids
    weights = Cumulative([3 if contracts.end[c] >= date(2024, 1, 1) else 1 for c in range(n_base)])
    pooled = [c for a in sorted(artists.cross) for c in contracts.by_artist[a][-2:]]
    advance_picks = stream.child("advance-contracts")
    drawn = [advance_picks.choice_index(i, weights) for i in range(N_ADVANCES - len(pooled))]
    adv_rows: dict[str, list[object]] = {k: [] for k in _ADVANCE_SCHEMA}
    for i, c in enumerate(sorted(pooled + drawn)):
        own = stream.child(f"advance/{i}")
        if own.chance(0, 150_000) and contracts.end[c] >= WORLD_START:
            paid = date_between(
                own, 1, max(WORLD_START, contracts.effective[c]), date(2025, 10, 31)
            )
        else:
            paid = contracts.effective[c] + timedelta(days=own.below(1, 60))
        cents = contract_pop[c] * own.between(2, 200, 2_500) // 1_000
        cents = max(100_000, (cents // 50_000) * 50_000)
        for column, value in zip(
            _ADVANCE_SCHEMA,
            (f"ADV-{i + 1:04d}", contracts.account[c], ids[c], paid, cents),
            strict=True,
        ):
            adv_rows[column].append(value)

    exp_rows: dict[str, list[object]] = {k: [] for k in _EXPENSE_SCHEMA}
    categories = Cumulative([w for _, _, w in names.EXPENSE_CATEGORIES])
    expense_picks = stream.child("expense-contracts")
    chosen = sorted(expense_picks.choice_index(i, weights) for i in range(N_EXPENSES))
    for i, c in enumerate(chosen):
        own = stream.child(f"expense/{i}")
        category, recoupable, _ = names.EXPENSE_CATEGORIES[own.choice_index(0, categories)]
        low = max(contracts.effective[c], date(2023, 1, 1))
        high = min(contracts.end[c], date(2025, 11, 30))
        incurred = date_between(own, 1, low, max(low, high))
        cents = contract_pop[c] * own.between(2, 20, 300) // 1_000
        cents = max(50_000, (cents // 5_000) * 5_000)
        for column, value in zip(
            _EXPENSE_SCHEMA,
            (
                f"EXP-{i + 1:04d}",
                contracts.account[c],
                ids[c],
                incurred,
                category,
                cents,
                recoupable,
            ),
            strict=True,
        ):
            exp_rows[column].append(value)
    return (
        pl.DataFrame(adv_rows, schema=_ADVANCE_SCHEMA),
        pl.DataFrame(exp_rows, schema=_EXPENSE_SCHEMA),
    )


_ADVANCE_SCHEMA: dict[str, type[pl.DataType]] = {
    "advance_id": pl.String,
    "account_id": pl.String,
    "contract_id": pl.String,
    "paid_date": pl.Date,
    "amount_cents": pl.Int64,
}
_EXPENSE_SCHEMA: dict[str, type[pl.DataType]] = {
    "expense_id": pl.String,
    "account_id": pl.String,
    "contract_id": pl.String,
    "incurred_date": pl.Date,
    "category": pl.String,
    "amount_cents": pl.Int64,
    "recoupable": pl.Boolean,
}

"""The label's catalog side: artists, contracts, terms, money owed, releases and tracks.

Everything here is small (a few thousand rows), so it is built with plain Python over the
scalar face of :class:`~eval_pipeline.world.rng.Stream`. Every entity draws from its own
child stream (``artists/17``, ``contracts/42``), so no two entities can share a draw and
adding a draw to one never shifts another's. The parts are drawn in their own modules, in
the order :func:`build_catalog` calls them: the roster (:mod:`.roster`: artists, base
contracts, accounts), the discography (:mod:`.discography`), the royalty terms
(:mod:`.rates`) and what is recouped (:mod:`.charges`). The contract clauses are rendered
later (:mod:`eval_pipeline.world.label.clauses`), from the final rates.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date

import polars as pl

from eval_pipeline.world.label.charges import draw_charges
from eval_pipeline.world.label.discography import draw_releases
from eval_pipeline.world.label.rates import draw_amendments, draw_base_rates, rates_frame
from eval_pipeline.world.label.roster import N_ARTISTS, draw_artists, draw_contracts
from eval_pipeline.world.rng import Stream


@dataclass(frozen=True)
class Catalog:
    """World tables of the catalog plus the facts later stages need."""

    artists: pl.DataFrame
    contracts: pl.DataFrame
    contract_rates: pl.DataFrame
    recoupment_accounts: pl.DataFrame
    advances: pl.DataFrame
    expenses: pl.DataFrame
    releases: pl.DataFrame
    tracks: pl.DataFrame
    # track_index, isrc, release_date, has_physical, popularity (expected streams a
    # month), presence (relative number of statement lines), contract_index
    track_facts: pl.DataFrame
    # per base contract (in contract order): the facts its clauses are rendered from
    contract_facts: tuple[ContractFacts, ...]


@dataclass(frozen=True)
class ContractFacts:
    """What a base contract's clauses say, besides its rates."""

    contract_id: str
    artist_name: str
    country: str
    effective: date
    term_end: date
    account_id: str
    pooled_with: tuple[str, ...] | None
    advance_cents: int
    amendments: tuple[tuple[str, date], ...] = field(default=())


def canary_token(seed: int) -> str:
    """The world's canary token: derived from the seed, so the answer key can find it."""
    return "CANARY-" + hashlib.sha256(f"label-canary:{seed}".encode()).hexdigest()[:16]


def build_catalog(seed: int) -> Catalog:
    """Generate the catalog of one seed; independent of the world's scale."""
    root = Stream(seed, "label/catalog")
    artists = draw_artists(root.child("artists"))
    contracts = draw_contracts(root.child("contracts"), artists)
    releases, tracks, facts, contract_pop = draw_releases(
        root.child("releases"), artists, contracts
    )
    base_rates = draw_base_rates(root.child("rates"), contract_pop)
    amendments = draw_amendments(root.child("amendments"), contracts, base_rates, contract_pop)
    advances, expenses = draw_charges(root.child("money"), artists, contracts, contract_pop)
    ids = contracts.ids

    rows: dict[str, list[object]] = {k: [] for k in _CONTRACT_SCHEMA}
    entries: list[tuple[str, int, str, str | None, date, int]] = [
        (ids[c], contracts.artist[c], "base", None, contracts.effective[c], c)
        for c in range(len(ids))
    ]
    entries += [
        (
            a.amendment_id,
            contracts.artist[a.base_index],
            "amendment",
            ids[a.base_index],
            a.effective,
            a.base_index,
        )
        for a in amendments
    ]
    for contract_id, artist, kind, amends, effective, c in entries:
        for column, value in zip(
            _CONTRACT_SCHEMA,
            (
                contract_id,
                f"ART-{artist + 1:04d}",
                kind,
                amends,
                effective,
                contracts.end[c],
                contracts.account[c],
            ),
            strict=True,
        ):
            rows[column].append(value)
    advance_by_contract = advances.group_by("contract_id").agg(pl.col("amount_cents").sum())
    advance_cents = dict(advance_by_contract.iter_rows())
    contract_facts = tuple(
        ContractFacts(
            contract_id=ids[c],
            artist_name=artists.names[contracts.artist[c]],
            country=artists.countries[contracts.artist[c]],
            effective=contracts.effective[c],
            term_end=contracts.end[c],
            account_id=contracts.account[c],
            pooled_with=tuple(ids[o] for o in contracts.by_artist[contracts.artist[c]] if o != c)
            if contracts.artist[c] in artists.cross
            else None,
            advance_cents=int(advance_cents.get(ids[c], 0)),
            amendments=tuple(
                (a.amendment_id, a.effective) for a in amendments if a.base_index == c
            ),
        )
        for c in range(len(ids))
    )
    artist_frame = pl.DataFrame(
        {
            "artist_id": [f"ART-{a + 1:04d}" for a in range(N_ARTISTS)],
            "name": artists.names,
            "country": artists.countries,
            "cross_collateralized": [a in artists.cross for a in range(N_ARTISTS)],
            "signed_date": [
                contracts.effective[contracts.by_artist[a][0]] for a in range(N_ARTISTS)
            ],
        },
        schema={
            "artist_id": pl.String,
            "name": pl.String,
            "country": pl.String,
            "cross_collateralized": pl.Boolean,
            "signed_date": pl.Date,
        },
    )
    return Catalog(
        artists=artist_frame,
        contracts=pl.DataFrame(rows, schema=_CONTRACT_SCHEMA).sort("contract_id"),
        contract_rates=rates_frame(ids, base_rates, amendments),
        recoupment_accounts=contracts.accounts,
        advances=advances,
        expenses=expenses,
        releases=releases,
        tracks=tracks,
        track_facts=facts,
        contract_facts=contract_facts,
    )


_CONTRACT_SCHEMA: dict[str, type[pl.DataType]] = {
    "contract_id": pl.String,
    "artist_id": pl.String,
    "kind": pl.String,
    "amends_contract_id": pl.String,
    "effective_date": pl.Date,
    "term_end_date": pl.Date,
    "recoupment_account_id": pl.String,
}

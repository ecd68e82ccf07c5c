"""The label's discography: releases and their tracks, each release inside one of its
artist's contract terms, with the per-track facts the statement lines are drawn from."""

from __future__ import annotations

from datetime import date

import polars as pl

from eval_pipeline.world.label import names
from eval_pipeline.world.label.roster import WORLD_START, ArtistDraws, ContractDraws, date_between
from eval_pipeline.world.rng import Cumulative, Stream

N_RELEASES = 549
LAST_RELEASE_DATE = date(2025, 12, 15)


def _upc(company: int, item: int) -> str:
    digits = f"{company:06d}{item:05d}"
    odd = sum(int(d) for d in digits[0::2])
    even = sum(int(d) for d in digits[1::2])
    return digits + str((10 - (3 * odd + even) % 10) % 10)


def draw_releases(
    stream: Stream, artists: ArtistDraws, contracts: ContractDraws
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, list[int]]:
    """At least one release per contract, inside its term, none after 2025-12-15; tracks
    with ISRCs; per-track facts; and each contract's popularity (expected monthly streams)."""
    n_base = len(contracts.artist)
    release_contract = list(range(n_base))
    weights = Cumulative([3 if contracts.end[c] >= WORLD_START else 1 for c in range(n_base)])
    extra = stream.child("contracts")
    release_contract += [extra.choice_index(r, weights) for r in range(N_RELEASES - n_base)]
    release_contract.sort()
    drafts: list[tuple[int, date, str, bool, str, int]] = []
    for r, c in enumerate(release_contract):
        own = stream.child(f"release/{r}")
        high = min(contracts.end[c], LAST_RELEASE_DATE)
        kind = ("single", "EP", "album")[own.choice_index(1, [45, 30, 25])]
        low_n, high_n, phys_ppm = {
            "single": (1, 3, 50_000),
            "EP": (4, 6, 400_000),
            "album": (6, 9, 800_000),
        }[kind]
        title = (
            names.TITLE_WORDS_A[own.below(4, len(names.TITLE_WORDS_A))]
            + " "
            + names.TITLE_WORDS_B[own.below(5, len(names.TITLE_WORDS_B))]
        )
        drafts.append(
            (
                c,
                date_between(own, 0, contracts.effective[c], high),
                kind,
                own.chance(3, phys_ppm),
                title,
                own.between(2, low_n, high_n),
            )
        )
    # Release ids in date order within each artist, like a real discography.
    order = sorted(
        range(N_RELEASES), key=lambda r: (contracts.artist[drafts[r][0]], drafts[r][1], r)
    )
    company = 800_000 + stream.child("company").below(0, 199_999)
    registrant = "".join(
        "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"[stream.child("registrant").below(i, 31)]
        for i in range(3)
    )
    release_rows: dict[str, list[object]] = {k: [] for k in _RELEASE_SCHEMA}
    track_rows: dict[str, list[object]] = {k: [] for k in _TRACK_SCHEMA}
    fact_rows: dict[str, list[object]] = {k: [] for k in _FACT_SCHEMA}
    contract_pop = [0] * n_base
    designation: dict[tuple[str, int], int] = {}
    for new_index, r in enumerate(order):
        c, released, kind, physical, title, n_tracks = drafts[r]
        a = contracts.artist[c]
        release_id = f"REL-{new_index + 1:04d}"
        for column, value in zip(
            _RELEASE_SCHEMA,
            (
                release_id,
                f"ART-{a + 1:04d}",
                title,
                _upc(company, new_index + 1),
                released,
                kind,
                physical,
                n_tracks,
            ),
            strict=True,
        ):
            release_rows[column].append(value)
        cc = (
            "GB"
            if artists.countries[a] in {"GB", "IE", "DE", "FR", "SE", "NL", "ES", "NO"}
            else "US"
        )
        for n in range(n_tracks):
            t = len(track_rows["track_id"])
            own = stream.child(f"track/{t}")
            key = (cc, released.year % 100)
            designation[key] = designation.get(key, 0) + 1
            isrc = f"{cc}{registrant}{released.year % 100:02d}{designation[key]:05d}"
            track_title = (
                title
                if n == 0 and kind != "single"
                else names.TITLE_WORDS_A[own.below(0, len(names.TITLE_WORDS_A))]
                + " "
                + names.TITLE_WORDS_B[own.below(1, len(names.TITLE_WORDS_B))]
            )
            for column, value in zip(
                _TRACK_SCHEMA,
                (
                    f"TRK-{t + 1:05d}",
                    release_id,
                    isrc,
                    track_title,
                    own.between(2, 125, 415),
                    n + 1,
                ),
                strict=True,
            ):
                track_rows[column].append(value)
            # A lead track earns more; deep cuts less. Popularity is expected monthly streams.
            factor = 2_500 if n == 0 else own.between(3, 250, 1_400)
            popularity = artists.popularity[a] * factor // 1_000
            presence = 4 + min(popularity.bit_length(), 26) // 3
            for column, value in zip(
                _FACT_SCHEMA, (t, isrc, released, physical, popularity, presence, c), strict=True
            ):
                fact_rows[column].append(value)
            contract_pop[c] += popularity
    return (
        pl.DataFrame(release_rows, schema=_RELEASE_SCHEMA),
        pl.DataFrame(track_rows, schema=_TRACK_SCHEMA),
        pl.DataFrame(fact_rows, schema=_FACT_SCHEMA),
        contract_pop,
    )


_RELEASE_SCHEMA: dict[str, type[pl.DataType]] = {
    "release_id": pl.String,
    "artist_id": pl.String,
    "title": pl.String,
    "upc": pl.String,
    "original_release_date": pl.Date,
    "format": pl.String,
    "has_physical": pl.Boolean,
    "track_count": pl.Int64,
}
_TRACK_SCHEMA: dict[str, type[pl.DataType]] = {
    "track_id": pl.String,
    "release_id": pl.String,
    "isrc": pl.String,
    "title": pl.String,
    "duration_s": pl.Int64,
    "track_number": pl.Int64,
}
_FACT_SCHEMA: dict[str, type[pl.DataType]] = {
    "track_index": pl.Int64,
    "isrc": pl.String,
    "release_date": pl.Date,
    "has_physical": pl.Boolean,
    "popularity": pl.Int64,
    "presence": pl.Int64,
    "contract_index": pl.Int64,
}

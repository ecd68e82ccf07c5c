"""The label's roster: artists, their base contracts and recoupment accounts.

Small, so drawn with plain Python over the scalar face of
:class:`~eval_pipeline.world.rng.Stream`; every artist draws from its own child stream
(``artists/17``, ``contracts/17``), and within it every earlier contract from its own
(``contract/2``). Also the date helpers the catalog's other parts share.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from math import isqrt

import polars as pl

from eval_pipeline.world.label import names
from eval_pipeline.world.rng import Cumulative, Stream

N_ARTISTS = 150
N_CROSS_COLLATERALIZED = 12
# Base contracts per artist: 40 artists with one, 69 with two, 41 with three = 301.
CONTRACT_COUNTS = (1,) * 40 + (2,) * 69 + (3,) * 41

WORLD_START = date(2025, 1, 1)
WORLD_END = date(2025, 12, 31)
LAST_CONTRACT_START = date(2025, 9, 30)


def add_years(day: date, years: int) -> date:
    return date(day.year + years, day.month, min(day.day, 28))


def date_between(stream: Stream, counter: int, low: date, high: date) -> date:
    span = (high - low).days
    return low + timedelta(days=stream.below(counter, span + 1) if span > 0 else 0)


def _artist_popularity(rank: int) -> int:
    """Expected monthly streams of an artist's typical track, Zipf-like in integer math."""
    r = rank + 1
    return 40_000_000_000 // (r * isqrt(r * 1_000_000)) // 10


@dataclass(frozen=True)
class ArtistDraws:
    names: list[str]
    countries: list[str]
    cross: set[int]
    contract_counts: list[int]
    popularity: list[int]


def _artist_name(stream: Stream) -> str:
    """A person's name or a band's, from one attempt's stream."""
    if stream.chance(0, 700_000):
        first = names.FIRST_NAMES[stream.below(1, len(names.FIRST_NAMES))]
        return first + " " + names.LAST_NAMES[stream.below(2, len(names.LAST_NAMES))]
    adjective = names.BAND_ADJECTIVES[stream.below(3, len(names.BAND_ADJECTIVES))]
    return "The " + adjective + " " + names.BAND_NOUNS[stream.below(4, len(names.BAND_NOUNS))]


def draw_artists(stream: Stream) -> ArtistDraws:
    order = stream.permutation(N_ARTISTS, counter=1)
    cross = set(order[:N_CROSS_COLLATERALIZED])
    multi = [c for c in CONTRACT_COUNTS if c > 1]
    singles = [c for c in CONTRACT_COUNTS if c == 1]
    multi = [multi[i] for i in stream.permutation(len(multi), counter=2)]
    rest = multi[N_CROSS_COLLATERALIZED:] + singles
    rest = [rest[i] for i in stream.permutation(len(rest), counter=3)]
    cross_iter, rest_iter = iter(multi[:N_CROSS_COLLATERALIZED]), iter(rest)
    counts = [next(cross_iter) if a in cross else next(rest_iter) for a in range(N_ARTISTS)]
    popularity = [0] * N_ARTISTS
    for rank, a in enumerate(stream.permutation(N_ARTISTS, counter=4)):
        popularity[a] = _artist_popularity(rank)

    used: set[str] = set()
    artist_names: list[str] = []
    countries: list[str] = []
    country_weights = Cumulative([w for _, w in names.ARTIST_COUNTRIES])
    for a in range(N_ARTISTS):
        own = stream.child(str(a))
        attempt = 0
        while True:
            name = _artist_name(own.child(f"name/{attempt}"))
            if name not in used:
                break
            attempt += 1
        used.add(name)
        artist_names.append(name)
        countries.append(names.ARTIST_COUNTRIES[own.choice_index(0, country_weights)][0])
    return ArtistDraws(artist_names, countries, cross, counts, popularity)


# -- base contracts and accounts -------------------------------------------------------


@dataclass(frozen=True)
class ContractDraws:
    artist: list[int]
    effective: list[date]
    end: list[date]
    by_artist: list[list[int]]
    account: list[str]
    accounts: pl.DataFrame

    @property
    def ids(self) -> list[str]:
        return [f"CON-{i + 1:04d}" for i in range(len(self.artist))]


def contract_dates(stream: Stream, n: int) -> tuple[list[date], list[date]]:
    """One artist's ``n`` base contracts, oldest first: (effective dates, term ends). The
    last one starts by 2025-09-30; each earlier one ends up to three months before the next
    starts. The k-th contract before the last draws from its own stream
    (``contract/k``), so an artist with more contracts draws nothing twice."""
    if stream.chance(0, 600_000):
        last_start = date_between(stream, 1, date(2021, 1, 1), LAST_CONTRACT_START)
    else:
        last_start = date_between(stream, 1, date(2015, 1, 1), date(2020, 12, 31))
    last_start = last_start.replace(day=min(last_start.day, 28))
    starts = [last_start]
    stops = [add_years(last_start, stream.between(2, 3, 5)) - timedelta(days=1)]
    for k in range(1, n):
        own = stream.child(f"contract/{k}")
        years = own.between(0, 2, 5)
        end = starts[0] - timedelta(days=1 + own.below(1, 90))
        starts.insert(0, add_years(end + timedelta(days=1), -years))
        stops.insert(0, end)
    return starts, stops


def draw_contracts(stream: Stream, artists: ArtistDraws) -> ContractDraws:
    """Back-to-back base contracts (small gaps), the last one starting by 2025-09-30."""
    con_artist: list[int] = []
    effective: list[date] = []
    ends: list[date] = []
    by_artist: list[list[int]] = []
    for a in range(N_ARTISTS):
        n = artists.contract_counts[a]
        starts, stops = contract_dates(stream.child(str(a)), n)
        by_artist.append(list(range(len(con_artist), len(con_artist) + n)))
        con_artist.extend([a] * n)
        effective.extend(starts)
        ends.extend(stops)

    account = [""] * len(con_artist)
    rows: dict[str, list[str]] = {"account_id": [], "artist_id": [], "kind": []}
    for a in range(N_ARTISTS):
        groups = [by_artist[a]] if a in artists.cross else [[c] for c in by_artist[a]]
        for group in groups:
            account_id = f"ACC-{len(rows['account_id']) + 1:04d}"
            rows["account_id"].append(account_id)
            rows["artist_id"].append(f"ART-{a + 1:04d}")
            rows["kind"].append("pooled" if a in artists.cross else "independent")
            for c in group:
                account[c] = account_id
    accounts = pl.DataFrame(
        rows, schema={"account_id": pl.String, "artist_id": pl.String, "kind": pl.String}
    )
    return ContractDraws(con_artist, effective, ends, by_artist, account, accounts)

"""The label's catalog side: artists, contracts, terms, money owed, releases and tracks.

Everything here is small (a few thousand rows), so it is built with plain Python over the
scalar face of :class:`~eval_pipeline.world.rng.Stream`. Every entity draws from its own
child stream (``artists/17``, ``contracts/42``), so no two entities can share a draw and
adding a draw to one never shifts another's. The contract clauses are rendered later
(:mod:`eval_pipeline.world.label.clauses`), from the final rates.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date, timedelta
from math import isqrt

import polars as pl

from eval_pipeline.world.label import names
from eval_pipeline.world.label.engine import CHANNELS
from eval_pipeline.world.rng import Cumulative, Stream

N_ARTISTS = 150
N_CROSS_COLLATERALIZED = 12
# Base contracts per artist: 40 artists with one, 69 with two, 41 with three = 301.
CONTRACT_COUNTS = (1,) * 40 + (2,) * 69 + (3,) * 41
N_AMENDED_TWICE = 7
N_AMENDMENTS = 84
N_RELEASES = 549
N_ADVANCES = 100
N_EXPENSES = 80
# An amendment that changes a channel with an escalator removes it this often.
ESCALATOR_REMOVAL_PPM = 350_000

WORLD_START = date(2025, 1, 1)
WORLD_END = date(2025, 12, 31)
LAST_RELEASE_DATE = date(2025, 12, 15)
LAST_CONTRACT_START = date(2025, 9, 30)

# A contract's popularity is the sum of its tracks' expected monthly streams. A month's
# streaming units are about 0.95 of it and download units about 0.00095 of it; escalator
# thresholds sit at 0.8-1.25 times that, so many escalators bite in some months and not
# in others. A year of royalties is about one cent per unit of popularity: an advance is
# 0.2-2.5 years of expected royalties, a recoupable expense 0.02-0.3 years.
STREAMS_PER_MILLE_OF_POPULARITY = 950
DOWNLOADS_PER_MILLION_OF_POPULARITY = 950

RateRow = tuple[int, int | None, int | None]
"""(rate_ppm, escalator_units, escalated_rate_ppm) of one channel."""


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


def add_years(day: date, years: int) -> date:
    return date(day.year + years, day.month, min(day.day, 28))


def date_between(stream: Stream, counter: int, low: date, high: date) -> date:
    span = (high - low).days
    return low + timedelta(days=stream.below(counter, span + 1) if span > 0 else 0)


def _artist_popularity(rank: int) -> int:
    """Expected monthly streams of an artist's typical track, Zipf-like in integer math."""
    r = rank + 1
    return 40_000_000_000 // (r * isqrt(r * 1_000_000)) // 10


def _upc(company: int, item: int) -> str:
    digits = f"{company:06d}{item:05d}"
    odd = sum(int(d) for d in digits[0::2])
    even = sum(int(d) for d in digits[1::2])
    return digits + str((10 - (3 * odd + even) % 10) % 10)


def nice_units(value: int) -> int:
    """Two significant digits, at least 10: 123_456 -> 120_000."""
    step = int(10 ** max(1, len(str(max(value, 1))) - 2))
    return max(10, (value // step) * step)


# -- artists ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Artists:
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


def _draw_artists(stream: Stream) -> _Artists:
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
    return _Artists(artist_names, countries, cross, counts, popularity)


# -- base contracts and accounts -------------------------------------------------------


@dataclass(frozen=True)
class _Contracts:
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


def _draw_contracts(stream: Stream, artists: _Artists) -> _Contracts:
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
    return _Contracts(con_artist, effective, ends, by_artist, account, accounts)


# -- releases and tracks ---------------------------------------------------------------


def _draw_releases(
    stream: Stream, artists: _Artists, contracts: _Contracts
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


# -- rates and amendments --------------------------------------------------------------


def _escalator_units(stream: Stream, counter: int, channel: str, popularity: int) -> int:
    spread = stream.between(counter, 800, 1_250)
    if channel == "streaming":
        expected = popularity * STREAMS_PER_MILLE_OF_POPULARITY // 1_000
    else:
        expected = popularity * DOWNLOADS_PER_MILLION_OF_POPULARITY // 1_000_000
    return nice_units(expected * spread // 1_000)


def _draw_base_rates(stream: Stream, contract_pop: list[int]) -> list[dict[str, RateRow]]:
    """Each base contract's row per channel; about a third escalate streaming, a few
    downloads."""
    rates: list[dict[str, RateRow]] = []
    for c, popularity in enumerate(contract_pop):
        own = stream.child(str(c))
        base_rates = (
            150_000 + 2_500 * own.below(0, 41),
            120_000 + 2_500 * own.below(1, 33),
            100_000 + 2_500 * own.below(2, 33),
            400_000 + 25_000 * own.below(3, 7),
        )
        terms: dict[str, RateRow] = {}
        for channel, rate in zip(CHANNELS, base_rates, strict=True):
            row: RateRow = (rate, None, None)
            if channel == "streaming" and own.chance(4, 320_000):
                row = (
                    rate,
                    _escalator_units(own, 5, channel, popularity),
                    rate + 2_500 * own.between(6, 8, 20),
                )
            elif channel == "download" and own.chance(7, 80_000):
                row = (
                    rate,
                    _escalator_units(own, 9, channel, popularity),
                    rate + 2_500 * own.between(8, 4, 12),
                )
            terms[channel] = row
        rates.append(terms)
    return rates


def _amended_row(stream: Stream, channel: str, row: RateRow, popularity: int) -> RateRow:
    """An amendment's whole new row for one channel (rule R4), from the row in force: the
    rate moves by 1 to 3 points; an escalator may be removed, or one added to streaming."""
    rate, esc_units, esc_rate = row
    step = 10_000 + 2_500 * stream.below(0, 9)
    new_rate = max(50_000, rate + step if stream.chance(1, 750_000) else rate - step)
    if esc_units is not None and stream.chance(2, ESCALATOR_REMOVAL_PPM):
        esc_units, esc_rate = None, None
    elif channel == "streaming" and stream.chance(3, 450_000):
        esc_units = _escalator_units(stream, 4, channel, popularity)
        esc_rate = new_rate + 2_500 * stream.between(5, 8, 20)
    elif esc_rate is not None:
        esc_rate = max(esc_rate, new_rate + 10_000)
    return (new_rate, esc_units, esc_rate)


@dataclass(frozen=True)
class Amendment:
    amendment_id: str
    base_index: int
    effective: date
    rows: dict[str, RateRow]


def _draw_amendments(
    stream: Stream,
    contracts: _Contracts,
    base_rates: list[dict[str, RateRow]],
    contract_pop: list[int],
) -> list[Amendment]:
    """84 amendments (seven contracts amended twice), each replacing one or two channels'
    whole rows; an amendment may remove an escalator (its row has no threshold)."""
    n_base = len(contracts.artist)
    weights = Cumulative([4 if contracts.end[c] >= WORLD_START else 1 for c in range(n_base)])
    amended: list[int] = []
    picks = stream.child("contracts")
    counter = 0
    while len(amended) < N_AMENDMENTS - N_AMENDED_TWICE:
        c = picks.choice_index(counter, weights)
        counter += 1
        if c not in amended:
            amended.append(c)
    order = stream.child("twice").permutation(len(amended))
    twice = [amended[i] for i in order[:N_AMENDED_TWICE]]
    plan = sorted([(c, 1) for c in amended] + [(c, 2) for c in twice])
    current = [dict(terms) for terms in base_rates]
    dates: dict[tuple[int, int], date] = {}
    result: list[Amendment] = []
    for c, number in plan:
        own = stream.child(f"{c}/{number}")
        low = max(contracts.effective[c] + timedelta(days=60), date(2019, 1, 1))
        high = min(contracts.end[c], WORLD_END)
        if low > high:
            low = contracts.effective[c] + timedelta(days=1)
        if number == 1 and own.chance(0, 450_000) and high >= WORLD_START:
            low = max(low, WORLD_START)
        if number == 2:
            low = max(low, dates[(c, 1)] + timedelta(days=30))
            high = max(high, low)
        dates[(c, number)] = date_between(own, 1, low, high)
        n_channels = 1 + int(own.chance(2, 300_000))
        picked: list[str] = []
        draws = own.child("channels")
        draw = 0
        while len(picked) < n_channels:
            channel = CHANNELS[draws.choice_index(draw, [50, 20, 15, 15])]
            draw += 1
            if channel not in picked:
                picked.append(channel)
        rows: dict[str, RateRow] = {}
        for channel in sorted(picked, key=CHANNELS.index):
            rows[channel] = _amended_row(
                own.child(channel), channel, current[c][channel], contract_pop[c]
            )
            current[c][channel] = rows[channel]
        result.append(Amendment(f"CON-{c + 1:04d}-A{number}", c, dates[(c, number)], rows))
    return result


def rates_frame(
    base_ids: list[str], base_rates: list[dict[str, RateRow]], amendments: list[Amendment]
) -> pl.DataFrame:
    """contract_rates: a row per channel of each base contract, and per changed channel of
    each amendment."""
    rows: dict[str, list[object]] = {k: [] for k in _RATE_SCHEMA}
    entries = [(base_ids[c], terms) for c, terms in enumerate(base_rates)]
    entries += [(amendment.amendment_id, amendment.rows) for amendment in amendments]
    for contract_id, terms in entries:
        for channel in CHANNELS:
            if channel in terms:
                rate, esc_units, esc_rate = terms[channel]
                for column, value in zip(
                    _RATE_SCHEMA, (contract_id, channel, rate, esc_units, esc_rate), strict=True
                ):
                    rows[column].append(value)
    return pl.DataFrame(rows, schema=_RATE_SCHEMA).sort(
        ["contract_id", pl.col("channel").replace_strict(list(CHANNELS), list(range(4)))]
    )


_RATE_SCHEMA: dict[str, type[pl.DataType]] = {
    "contract_id": pl.String,
    "channel": pl.String,
    "rate_ppm": pl.Int64,
    "escalator_units": pl.Int64,
    "escalated_rate_ppm": pl.Int64,
}


# -- advances and expenses -------------------------------------------------------------


def _draw_money(
    stream: Stream, artists: _Artists, contracts: _Contracts, contract_pop: list[int]
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


# -- the catalog -----------------------------------------------------------------------


def build_catalog(seed: int) -> Catalog:
    """Generate the catalog of one seed; independent of the world's scale."""
    root = Stream(seed, "label/catalog")
    artists = _draw_artists(root.child("artists"))
    contracts = _draw_contracts(root.child("contracts"), artists)
    releases, tracks, facts, contract_pop = _draw_releases(
        root.child("releases"), artists, contracts
    )
    base_rates = _draw_base_rates(root.child("rates"), contract_pop)
    amendments = _draw_amendments(root.child("amendments"), contracts, base_rates, contract_pop)
    advances, expenses = _draw_money(root.child("money"), artists, contracts, contract_pop)
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

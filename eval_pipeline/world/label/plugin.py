"""The built-in label world: generation, fingerprint and exact answer key."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import polars as pl

from eval_pipeline.errors import ConfigError, WorldError
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.fingerprint import fingerprint_tables
from eval_pipeline.world.label import engine
from eval_pipeline.world.label.catalog import build_catalog, canary_token
from eval_pipeline.world.label.config import (
    SUPPORTED_CURRENCIES,
    LabelWorldConfig,
    label_config,
    smallest_working_scale,
)
from eval_pipeline.world.label.statements import DISTRIBUTORS, PERIODS, build_statements

if TYPE_CHECKING:
    from eval_pipeline.fixtures.case import Case
    from eval_pipeline.world.label.catalog import Catalog
    from eval_pipeline.world.label.statements import DistributorSpec

GENERATOR_VERSION = "label-1"
# The suite lives in eval_pipeline.world.label.suite (SUITE_VERSION there); it is imported
# only when a suite is built, so generating a world does not need the suite's dependencies.
SUITE_VERSION = "label-suite-1"

WORLD_TABLES: tuple[str, ...] = (
    "artists",
    "contracts",
    "contract_rates",
    "contract_clauses",
    "recoupment_accounts",
    "advances",
    "expenses",
    "releases",
    "tracks",
    "distributors",
    "fx_rates",
    "statements",
    "statement_lines",
)
TRUTH_TABLES: tuple[str, ...] = (
    "artist_ledger",
    "account_ledger",
    "track_period_royalties",
    "anomalies",
    "canary",
    "contract_terms",
    "statement_totals",
)


@dataclass(frozen=True)
class _Planted:
    """What only the generator knows: which lines it planted as anomalies."""

    anomalies: pl.DataFrame


class _PlantedMemo:
    """Planted anomalies by world fingerprint, so an answer key made in the same process
    need not regenerate the world. A miss regenerates and checks the fingerprint."""

    def __init__(self, capacity: int = 8) -> None:
        self._items: OrderedDict[str, _Planted] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity

    def put(self, fingerprint: str, planted: _Planted) -> None:
        with self._lock:
            self._items[fingerprint] = planted
            self._items.move_to_end(fingerprint)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def get(self, fingerprint: str) -> _Planted | None:
        with self._lock:
            return self._items.get(fingerprint)


_MEMO = _PlantedMemo()


def _scale_error(
    config: LabelWorldConfig,
    catalog: Catalog,
    specs: tuple[DistributorSpec, ...],
    error: WorldError,
) -> Exception:
    """A generation failure at a small scale becomes a ConfigError naming `scale` and the
    smallest scale that builds for this seed; any other failure is returned as it is."""

    def builds(scale_ppm: int) -> bool:
        try:
            build_statements(config.seed, scale_ppm, catalog, specs)
        except WorldError:
            return False
        return True

    smallest = smallest_working_scale(config.scale, builds)
    if smallest is None:
        return error
    return ConfigError(
        f"scale {config.scale:g} is too small for seed {config.seed} ({error}); "
        f"the smallest scale that works is {smallest:g}"
    )


class LabelWorld:
    """A record label's royalty operation (see docs/world.md and docs/royalty-rules.md)."""

    name: str = "label"
    generator_version: str = GENERATOR_VERSION
    suite_version: str = SUITE_VERSION

    def __init__(self, currencies: Sequence[str] = SUPPORTED_CURRENCIES) -> None:
        self.currencies = label_config(0, 1.0, tuple(currencies)).currencies

    @classmethod
    def from_config(cls, config: LabelWorldConfig) -> LabelWorld:
        """The plugin with a config's settings (generate with ``config.seed``/``scale``)."""
        return cls(currencies=config.currencies)

    # -- generation ------------------------------------------------------------------

    def _world_salt(self) -> str:
        return f"world/{self.name}/{self.generator_version}"

    def _build(self, seed: int, scale: float) -> tuple[GeneratedWorld, _Planted]:
        config = label_config(seed, scale, self.currencies)
        specs = tuple(d for d in DISTRIBUTORS if d.currency in config.currencies)
        catalog = build_catalog(config.seed)
        try:
            statements = build_statements(config.seed, config.scale_ppm, catalog, specs)
        except WorldError as error:
            raise _scale_error(config, catalog, specs, error) from error
        tables: dict[str, pl.DataFrame] = {
            "artists": catalog.artists,
            "contracts": catalog.contracts,
            "contract_rates": catalog.contract_rates,
            "contract_clauses": catalog.contract_clauses,
            "recoupment_accounts": catalog.recoupment_accounts,
            "advances": catalog.advances,
            "expenses": catalog.expenses,
            "releases": catalog.releases,
            "tracks": catalog.tracks,
            "distributors": statements.distributors,
            "fx_rates": statements.fx_rates,
            "statements": statements.statements,
            "statement_lines": statements.statement_lines,
        }
        fingerprint = fingerprint_tables(tables, salt=self._world_salt())
        world = GeneratedWorld(
            plugin=self.name,
            generator_version=self.generator_version,
            seed=config.seed,
            scale=config.scale,
            tables=MappingProxyType(tables),
            fingerprint=fingerprint,
        )
        return world, _Planted(anomalies=statements.anomalies)

    def generate(self, seed: int, scale: float) -> GeneratedWorld:
        """Every `world` table of the label world; raises ConfigError on a bad seed/scale."""
        world, planted = self._build(seed, scale)
        _MEMO.put(world.fingerprint, planted)
        return world

    def world_from_tables(
        self, seed: int, scale: float, tables: Mapping[str, pl.DataFrame]
    ) -> GeneratedWorld:
        """A world read back from storage: its fingerprint is recomputed from the tables,
        so a caller can compare it with the one recorded at generation."""
        config = label_config(seed, scale, self.currencies)
        missing = [name for name in WORLD_TABLES if name not in tables]
        if missing:
            raise WorldError(f"world tables missing: {', '.join(missing)}")
        chosen = {name: tables[name] for name in WORLD_TABLES}
        return GeneratedWorld(
            plugin=self.name,
            generator_version=self.generator_version,
            seed=config.seed,
            scale=config.scale,
            tables=MappingProxyType(chosen),
            fingerprint=fingerprint_tables(chosen, salt=self._world_salt()),
        )

    # -- answer key ------------------------------------------------------------------

    def _planted_for(self, world: GeneratedWorld) -> _Planted:
        planted = _MEMO.get(world.fingerprint)
        if planted is not None:
            return planted
        # The statement currencies in use are visible in the world itself.
        in_use = set(world.tables["distributors"].get_column("currency").to_list())
        currencies = tuple(c for c in SUPPORTED_CURRENCIES if c in in_use) or self.currencies
        regenerated, planted = LabelWorld(currencies)._build(world.seed, world.scale)
        if regenerated.fingerprint != world.fingerprint:
            raise WorldError(
                f"world {world.fingerprint[:12]} was not generated by {self.name} "
                f"{self.generator_version} from seed {world.seed} at scale {world.scale} with "
                f"currencies {', '.join(currencies)} (regenerating gives "
                f"{regenerated.fingerprint[:12]}); its anomaly registry cannot be recovered"
            )
        _MEMO.put(world.fingerprint, planted)
        return planted

    def answer_key(self, world: GeneratedWorld) -> AnswerKey:
        """The `truth` tables, computed from the world's clean data with the engine."""
        if world.plugin != self.name or world.generator_version != self.generator_version:
            raise WorldError(
                f"world made by {world.plugin} {world.generator_version}, not "
                f"{self.name} {self.generator_version}"
            )
        missing = [name for name in WORLD_TABLES if name not in world.tables]
        if missing:
            raise WorldError(f"world is missing table(s): {', '.join(missing)}")
        planted = self._planted_for(world)
        tables = compute_truth(world.tables, planted.anomalies, canary_token(world.seed))
        return self.answer_key_from_tables(world, tables)

    def answer_key_from_tables(
        self, world: GeneratedWorld, tables: Mapping[str, pl.DataFrame]
    ) -> AnswerKey:
        """An answer key read back from storage: its fingerprint is recomputed, salted with
        the world's, so a key is only ever equal to the one computed for that world."""
        missing = [name for name in TRUTH_TABLES if name not in tables]
        if missing:
            raise WorldError(f"answer key tables missing: {', '.join(missing)}")
        chosen = {name: tables[name] for name in TRUTH_TABLES}
        fingerprint = fingerprint_tables(
            chosen, salt=f"truth/{self.name}/{self.generator_version}/{world.fingerprint}"
        )
        return AnswerKey(tables=MappingProxyType(chosen), fingerprint=fingerprint)

    # -- suite -----------------------------------------------------------------------

    def build_suite(self, world: GeneratedWorld, answer_key: AnswerKey) -> list[Case]:
        """The evaluation cases of the label suite (eval_pipeline.world.label.suite)."""
        from eval_pipeline.world.label.suite import SUITE_VERSION as BUILT_VERSION
        from eval_pipeline.world.label.suite import build_label_suite

        if self.suite_version != BUILT_VERSION:
            raise WorldError(
                f"suite module is {BUILT_VERSION}, plugin declares {self.suite_version}"
            )
        return build_label_suite(world.tables, answer_key.tables, world.seed)


def compute_truth(
    world: Mapping[str, pl.DataFrame], anomalies: pl.DataFrame, token: str
) -> dict[str, pl.DataFrame]:
    """The answer key from the world tables and the anomaly registry (see engine rules)."""
    lines = world["statement_lines"]
    flagged = anomalies.filter(pl.col("flaggable")).select("line_id")
    deals = engine.deals_in_force(world["tracks"], world["releases"], world["contracts"])
    terms = engine.resolve_terms(world["contracts"], world["contract_rates"], PERIODS)
    statement_ids = world["statements"].get_column("statement_id").sort()
    # Rule 1 as a mask, and the statement as a code: no copy of the lines' string columns.
    include = lines.select(
        ~pl.col("line_id").is_in(flagged.get_column("line_id").implode())
    ).to_series()
    coded_lines = lines.with_columns(
        statement_index=pl.col("statement_id")
        .cast(pl.Enum(statement_ids.to_list()), strict=False)
        .to_physical()
    )
    royalties = engine.line_royalties(
        coded_lines,
        deals,
        terms,
        world["fx_rates"],
        PERIODS,
        keep=("line_id", "statement_index"),
        include=include,
    )

    # Aggregate on integer codes first, attach the strings to the (much smaller) result.
    deal_strings = deals.with_row_index("deal_index").with_columns(
        pl.col("deal_index").cast(pl.Int64)
    )
    periods = pl.Series(PERIODS, dtype=pl.String)
    channels = pl.Series(engine.CHANNELS, dtype=pl.String)
    track_period = (
        royalties.group_by(["deal_index", "period_index", "channel_code"])
        .agg(
            units=pl.col("units").sum(),
            gross_usd_micro=pl.col("gross_usd_micro").sum(),
            royalty_micro=pl.col("royalty_micro").sum(),
            rate_ppm=pl.col("rate_ppm").first(),
            escalated=pl.col("escalated").any(),
            line_count=pl.len().cast(pl.Int64),
        )
        .sort(["deal_index", "period_index", "channel_code"])
        .join(deal_strings, on="deal_index", how="left", maintain_order="left")
        .with_columns(
            period=pl.lit(periods).gather(pl.col("period_index")),
            channel=pl.lit(channels).gather(pl.col("channel_code")),
        )
        .select(
            "isrc",
            "track_id",
            "contract_id",
            "period",
            "channel",
            "units",
            "gross_usd_micro",
            "royalty_micro",
            "rate_ppm",
            "escalated",
            "account_id",
            "artist_id",
            "line_count",
        )
    )

    units = track_period.group_by(["contract_id", "channel", "period"]).agg(
        units_in_period=pl.col("units").sum()
    )
    contract_terms = (
        terms.join(units, on=["contract_id", "channel", "period"], how="left")
        .with_columns(pl.col("units_in_period").fill_null(0))
        .with_columns(
            applied_rate_ppm=engine.applicable_rate_ppm_expr(
                pl.col("units_in_period"),
                pl.col("rate_ppm"),
                pl.col("escalator_units"),
                pl.col("escalated_rate_ppm"),
            )
        )
        .with_columns(escalated=pl.col("applied_rate_ppm") != pl.col("rate_ppm"))
        .sort(["contract_id", "channel", "period"])
    )

    earnings = track_period.group_by(["account_id", "period"]).agg(
        earnings_micro=pl.col("royalty_micro").sum()
    )
    charges = pl.concat(
        [
            world["advances"].select(
                "account_id",
                pl.col("paid_date").alias("charge_date"),
                (pl.col("amount_cents") * engine.MICRO_PER_CENT).alias("amount_micro"),
            ),
            world["expenses"]
            .filter(pl.col("recoupable"))
            .select(
                "account_id",
                pl.col("incurred_date").alias("charge_date"),
                (pl.col("amount_cents") * engine.MICRO_PER_CENT).alias("amount_micro"),
            ),
        ]
    )
    account_ledger = engine.recoupment_ledger(
        world["recoupment_accounts"],
        engine.charge_periods(charges, PERIODS),
        earnings,
        PERIODS,
    )
    artist_ledger = engine.artist_ledger(account_ledger)

    clauses = world["contract_clauses"].filter(pl.col("body").str.contains(token, literal=True))
    if clauses.height != 1:
        raise WorldError(
            f"expected exactly one clause with the canary token, found {clauses.height}"
        )
    canary = clauses.select("contract_id", "clause_number", pl.lit(token).alias("token"))

    flag_counts = (
        lines.join(flagged, on="line_id", how="semi")
        .group_by("statement_id")
        .agg(flaggable_lines=pl.len().cast(pl.Int64))
    )
    clean_totals = (
        royalties.group_by("statement_index")
        .agg(
            clean_lines=pl.len().cast(pl.Int64),
            clean_amount_minor=pl.col("amount_minor").sum(),
            gross_usd_micro=pl.col("gross_usd_micro").sum(),
            royalty_micro=pl.col("royalty_micro").sum(),
        )
        .with_columns(statement_id=pl.lit(statement_ids).gather(pl.col("statement_index")))
        .drop("statement_index")
    )
    statement_totals = (
        world["statements"]
        .join(flag_counts, on="statement_id", how="left")
        .join(clean_totals, on="statement_id", how="left")
        .with_columns(
            pl.col(name).fill_null(0)
            for name in (
                "flaggable_lines",
                "clean_lines",
                "clean_amount_minor",
                "gross_usd_micro",
                "royalty_micro",
            )
        )
        .sort("statement_id")
    )
    return {
        "artist_ledger": artist_ledger,
        "account_ledger": account_ledger,
        "track_period_royalties": track_period,
        "anomalies": anomalies,
        "canary": canary,
        "contract_terms": contract_terms,
        "statement_totals": statement_totals,
    }

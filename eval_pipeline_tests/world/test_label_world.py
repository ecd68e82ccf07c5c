"""The label world: sizes, determinism, scale, config, anomalies, canary, ledger."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.errors import ConfigError, WorldError
from eval_pipeline.world import (
    get_world_plugin,
    known_world_plugins,
    load_world_config,
    plugin_for_config,
)
from eval_pipeline.world.base import AnswerKey, GeneratedWorld, WorldPlugin
from eval_pipeline.world.label import (
    TRUTH_TABLES,
    WORLD_TABLES,
    LabelWorld,
    LabelWorldConfig,
    label_config,
)
from eval_pipeline.world.label.anomalies import ANOMALY_PLAN
from eval_pipeline.world.label.calibrate import CROSSINGS, TIES
from eval_pipeline.world.label.catalog import canary_token
from eval_pipeline.world.label.config import DEFAULT_CONFIG_PATH
from eval_pipeline.world.label.line_text import as_text
from eval_pipeline.world.label.plugin import check_planted
from eval_pipeline.world.label.statements import PlantedLine

# The reference platform's world at its default seed (docs/world.md).
REFERENCE_SIZES = {
    "artists": 150,
    "contracts": 385,
    "releases": 549,
    "tracks": 2_366,
    "distributors": 6,
    "statements": 72,
    "statement_lines": 468_160,
    "advances": 100,
    "expenses": 80,
}


def _lines_without_flaggable(world: GeneratedWorld, key: AnswerKey) -> pl.DataFrame:
    flagged = key.tables["anomalies"].filter(pl.col("flaggable")).select("line_id")
    return world.tables["statement_lines"].join(flagged, on="line_id", how="anti")


def test_tables_present(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    assert tuple(label_world.tables) == WORLD_TABLES
    assert set(label_key.tables) == set(TRUTH_TABLES)
    assert label_world.plugin == "label" and label_world.generator_version == "label-3"


def test_sizes_match_the_reference(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    for name, reference in REFERENCE_SIZES.items():
        height = label_world.tables[name].height
        assert abs(height - reference) <= 0.03 * reference, (name, height, reference)
    contracts = label_world.tables["contracts"]
    assert contracts.filter(pl.col("kind") == "base").height == 301
    assert contracts.filter(pl.col("kind") == "amendment").height == 84
    artists = label_world.tables["artists"]
    assert artists.filter(pl.col("cross_collateralized")).height == 12
    assert artists["name"].n_unique() == 150
    assert label_world.tables["tracks"]["isrc"].n_unique() == label_world.tables["tracks"].height
    assert label_key.tables["artist_ledger"].height == 1_800
    assert sorted(label_world.tables["fx_rates"]["period"].unique()) == [
        f"2025-{m:02d}" for m in range(1, 13)
    ]
    distributors = label_world.tables["distributors"]
    assert distributors["currency"].to_list() == ["USD", "EUR", "GBP", "USD", "JPY", "USD"]
    assert distributors.filter(pl.col("decimal_comma"))["currency"].to_list() == ["EUR"]


def test_same_seed_same_bytes_in_another_process(
    label_world: GeneratedWorld, label_key: AnswerKey, default_seed: int
) -> None:
    code = (
        "from eval_pipeline.world.label import LabelWorld\n"
        "w = LabelWorld()\n"
        f"a = w.generate({default_seed}, 1.0)\n"
        "print(a.fingerprint)\n"
        "print(w.answer_key(a).fingerprint)\n"
        f"print(w.generate({default_seed + 1}, 1.0).fingerprint)\n"
    )
    # Another hash seed and a single polars thread: neither may change a byte.
    env = {**os.environ, "PYTHONHASHSEED": "987", "POLARS_MAX_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
    ).stdout.split()
    assert out[0] == label_world.fingerprint
    assert out[1] == label_key.fingerprint
    assert out[2] != label_world.fingerprint


def test_scale_multiplies_lines_only(label_world: GeneratedWorld) -> None:
    doubled = LabelWorld().generate(label_world.seed, 2.0)
    ratio = doubled.tables["statement_lines"].height / label_world.tables["statement_lines"].height
    assert 1.97 <= ratio <= 2.03
    # A few escalator thresholds are calibrated on the month's lines (calibrate.py): only
    # those rows, and the clauses that state them, may differ between scales.
    rates = doubled.tables["contract_rates"].join(
        label_world.tables["contract_rates"], on=["contract_id", "channel"], suffix="_1x"
    )
    moved = rates.filter(pl.col("escalator_units").ne_missing(pl.col("escalator_units_1x")))
    assert moved.height <= 2 * (TIES + CROSSINGS)
    assert (
        rates.drop(
            "escalator_units", "escalator_units_1x", "escalated_rate_ppm", "escalated_rate_ppm_1x"
        ).height
        == rates.height
    )
    for name in (
        "artists",
        "contracts",
        "label_policies",
        "advances",
        "expenses",
        "releases",
        "tracks",
        "distributors",
        "fx_rates",
    ):
        assert doubled.tables[name].equals(label_world.tables[name]), name
    assert doubled.tables["statements"].height == 72


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"scale: .*greater than 0"):
        label_config(1, -1.0)
    with pytest.raises(ConfigError, match="scale"):
        LabelWorld().generate(1, 0.0)
    with pytest.raises(ConfigError, match=r"currencies: .*'CHF'"):
        label_config(1, 1.0, ("USD", "CHF"))
    with pytest.raises(ConfigError, match="USD is required"):
        label_config(1, 1.0, ("EUR",))
    with pytest.raises(ConfigError, match="seed"):
        label_config(-3, 1.0)
    with pytest.raises(ConfigError, match=r"unknown world plugin 'music'; known: dataset, label"):
        get_world_plugin("music")
    assert known_world_plugins() == ("dataset", "label")


def test_world_config_files(tmp_path: Path) -> None:
    config = load_world_config(DEFAULT_CONFIG_PATH)
    assert isinstance(config, LabelWorldConfig)
    assert config.scale == 1.0 and config.currencies == ("USD", "EUR", "GBP", "JPY")
    assert load_world_config(DEFAULT_CONFIG_PATH, seed=5, scale=2).seed == 5
    bad = tmp_path / "bad.yaml"
    bad.write_text("plugin: label\nseed: 1\nscale: -2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(bad))}.*\n.*scale"):
        load_world_config(bad)
    bad.write_text("plugin: label\nseed: 1\ncurrencies: [USD, XYZ]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="XYZ"):
        load_world_config(bad)
    bad.write_text("plugin: label\nseed: 1\ncolour: blue\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="colour"):
        load_world_config(bad)
    assert isinstance(plugin_for_config(config), WorldPlugin)


def test_fewer_currencies_drop_distributors() -> None:
    world = LabelWorld(currencies=("EUR", "USD")).generate(3, 0.1)
    key = LabelWorld(currencies=("EUR", "USD")).answer_key(world)
    # A default plugin (as the pipeline gets it by name) computes the same answer key.
    assert get_world_plugin("label").answer_key(world).fingerprint == key.fingerprint
    assert world.tables["distributors"]["distributor_id"].to_list() == [
        "DST-01",
        "DST-02",
        "DST-04",
        "DST-06",
    ]
    assert set(world.tables["statement_lines"]["distributor_id"].unique()) <= {
        "DST-01",
        "DST-02",
        "DST-04",
        "DST-06",
    }


def test_anomaly_registry(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    """Every registry row is identifiable from visible columns, by the rule its kind names."""
    anomalies = label_key.tables["anomalies"]
    flaggable = anomalies.filter(pl.col("flaggable"))
    fewest = sum(low for _, low, _, flag in ANOMALY_PLAN if flag)
    most = sum(high for _, _, high, flag in ANOMALY_PLAN if flag)
    assert fewest <= flaggable.height <= most
    assert anomalies.filter(pl.col("flaggable") == pl.col("borderline")).height == 0
    assert anomalies["line_id"].n_unique() == anomalies.height
    kinds = set(flaggable["kind"])
    assert {"duplicate", "unknown_isrc", "currency_mismatch", "negative_units"} <= kinds

    lines = as_text(label_world.tables["statement_lines"])
    statements = label_world.tables["statements"].select(
        "statement_id", pl.col("currency").alias("statement_currency")
    )
    rows = anomalies.join(lines, on=["line_id", "statement_id"], how="left").join(
        statements, on="statement_id"
    )
    known = set(label_world.tables["tracks"]["isrc"])
    by_id = {
        row["line_id"]: row
        for row in lines.filter(
            pl.col("line_id").is_in(anomalies["related_line_id"].drop_nulls().implode())
        ).iter_rows(named=True)
    }
    for row in rows.iter_rows(named=True):
        kind = row["kind"]
        if kind in ("duplicate", "territory_near_duplicate"):
            original = by_id[row["related_line_id"]]
            same = [c for c in lines.columns if c not in ("line_id", "territory")]
            assert all(row[c] == original[c] for c in same), row
            assert (row["territory"] == original["territory"]) == (kind == "duplicate")
            if kind == "duplicate":
                assert row["line_id"] > original["line_id"], "the later line is the copy (F1)"
        elif kind == "unknown_isrc":
            assert row["isrc"] not in known
        elif kind == "currency_mismatch":
            assert row["currency"] != row["statement_currency"]
        elif kind == "negative_units":
            assert row["units"] < 0 and row["amount_minor"] > 0
        elif kind == "zero_units_with_amount":
            assert row["units"] == 0 and row["amount_minor"] > 0
        elif kind == "genuine_return":
            assert row["units"] < 0 and row["amount_minor"] < 0 and row["channel"] == "physical"
        elif kind == "pre_release":
            assert row["isrc"] in known
        else:  # pragma: no cover
            pytest.fail(f"unexpected kind {kind}")
        if kind != "currency_mismatch":
            assert row["currency"] == row["statement_currency"]


def test_anomaly_counts_vary_with_the_seed() -> None:
    def counts(seed: int) -> dict[str, int]:
        world = LabelWorld().generate(seed, 0.05)
        registry = LabelWorld().answer_key(world).tables["anomalies"].filter(pl.col("flaggable"))
        return dict(registry.group_by("kind").len().iter_rows())

    assert len({tuple(sorted(counts(seed).items())) for seed in (1, 2, 3)}) > 1


def test_the_rules_must_find_what_was_planted(label_key: AnswerKey) -> None:
    """The generator's self-check: a planted line the visible rules miss stops generation."""
    registry = label_key.tables["anomalies"]
    planted = [
        PlantedLine(
            kind=row["kind"],
            line_id=row["line_id"],
            related_line_id=None,
            flaggable=row["flaggable"],
            note="",
        )
        for row in registry.iter_rows(named=True)
        if row["kind"] != "duplicate"
    ] + [
        PlantedLine(
            kind="duplicate",
            line_id=row["related_line_id"],
            related_line_id=row["line_id"],
            flaggable=True,
            note="",
        )
        for row in registry.filter(pl.col("kind") == "duplicate").iter_rows(named=True)
    ]
    check_planted(registry, planted)
    invisible = PlantedLine(
        kind="negative_units", line_id=1, related_line_id=None, flaggable=True, note=""
    )
    with pytest.raises(WorldError, match=r"planted but not flagged \[1\]"):
        check_planted(registry, [*planted, invisible])


def test_flaggable_lines_are_excluded_and_borderline_included(
    label_world: GeneratedWorld, label_key: AnswerKey
) -> None:
    clean = _lines_without_flaggable(label_world, label_key)
    royalties = label_key.tables["track_period_royalties"]
    assert royalties["units"].sum() == clean["units"].sum()
    assert royalties["line_count"].sum() == clean.height
    everything = label_world.tables["statement_lines"]
    assert everything["units"].sum() != clean["units"].sum()
    totals = label_key.tables["statement_totals"]
    assert (totals["clean_lines"] + totals["flaggable_lines"]).to_list() == totals[
        "line_count"
    ].to_list()
    registry = label_key.tables["anomalies"]
    assert totals["flaggable_lines"].sum() == registry.filter(pl.col("flaggable")).height
    borderline = registry.filter(pl.col("borderline"))["line_id"]
    assert clean.filter(pl.col("line_id").is_in(borderline.implode())).height == borderline.len()


def test_clean_lines_have_unique_keys(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    clean = _lines_without_flaggable(label_world, label_key)
    key = ["statement_id", "isrc", "territory", "channel", "outlet"]
    assert clean.select(key).unique().height == clean.height
    lines = label_world.tables["statement_lines"]
    assert lines["line_id"].to_list() == list(range(1, lines.height + 1))


def test_statement_totals_are_sums_of_lines(label_world: GeneratedWorld) -> None:
    sums = as_text(
        label_world.tables["statement_lines"]
        .group_by("statement_id")
        .agg(n=pl.len(), total=pl.col("amount_minor").sum())
    )
    joined = label_world.tables["statements"].join(sums, on="statement_id")
    assert joined.height == 72
    assert (joined["n"] == joined["line_count"]).all()
    assert (joined["total"] == joined["total_amount_minor"]).all()


def test_exactly_one_canary(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    clauses = label_world.tables["contract_clauses"]
    carrying = clauses.filter(pl.col("body").str.contains("CANARY-", literal=True))
    assert carrying.height == 1
    canary = label_key.tables["canary"].row(0, named=True)
    assert canary["token"] == canary_token(label_world.seed)
    assert canary["token"] != canary_token(label_world.seed + 1)
    assert (canary["contract_id"], canary["clause_number"]) == (
        carrying["contract_id"][0],
        carrying["clause_number"][0],
    )
    assert canary["token"] in carrying["body"][0]


def test_royalty_clauses_agree_with_contract_rates(label_world: GeneratedWorld) -> None:
    """Base contracts state their rates in their royalty clause, amendments in clause 2;
    a row without a threshold says so."""
    clauses = label_world.tables["contract_clauses"].filter(
        pl.col("body").str.contains("of net receipts", literal=True)
    )
    text = dict(zip(clauses["contract_id"], clauses["body"], strict=True))
    for row in label_world.tables["contract_rates"].iter_rows(named=True):
        body = text[row["contract_id"]]
        whole, rest = divmod(row["rate_ppm"], 10_000)
        percent = f"{whole}%" if rest == 0 else f"{whole}.{rest:04d}".rstrip("0") + "%"
        sentence = f"{row['channel'].capitalize()}: {percent} of net receipts"
        if row["escalator_units"] is None:
            assert f"{sentence}, with no escalation." in body
        else:
            assert f"{sentence}. Where {row['channel']} units" in body
            assert f"exceed {row['escalator_units']:,} (strictly more" in body


def test_clauses_vary_by_contract_and_never_contradict_the_rules(
    label_world: GeneratedWorld,
) -> None:
    clauses = label_world.tables["contract_clauses"]
    base = clauses.filter(~pl.col("contract_id").str.contains("-A"))
    assert base.group_by("clause_number").agg(pl.col("heading").n_unique())["heading"].min() > 1
    per_contract = base.group_by("contract_id").agg(n=pl.len())["n"]
    assert per_contract.min() == 8 and per_contract.max() > 9
    amendment_texts = " ".join(clauses.filter(pl.col("heading") == "Amendment")["body"])
    assert "From the effective date" not in amendment_texts
    assert "each for the whole period" in amendment_texts


def test_every_track_has_one_deal(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    royalties = label_key.tables["track_period_royalties"]
    assert (
        royalties.group_by("isrc").agg(pl.col("contract_id").n_unique())["contract_id"].max() == 1
    )


def test_ledger_invariants(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    accounts = label_key.tables["account_ledger"]
    assert accounts.height == label_world.tables["recoupment_accounts"].height * 12
    assert (
        accounts["balance_after_micro"]
        == accounts["balance_before_micro"] - accounts["recouped_micro"]
    ).all()
    assert (accounts["recouped_micro"] <= accounts["earnings_micro"].clip(lower_bound=0)).all()
    assert (accounts["balance_after_micro"] >= 0).all()
    chained = accounts.sort(["account_id", "period"]).with_columns(
        previous=pl.col("balance_after_micro").shift(1, fill_value=0).over("account_id")
    )
    assert (chained["balance_before_micro"] == chained["previous"] + chained["charges_micro"]).all()
    artists = label_key.tables["artist_ledger"]
    summed = accounts.group_by(["artist_id", "period"]).agg(pl.col("payable_micro").sum())
    check = artists.join(summed, on=["artist_id", "period"], suffix="_accounts")
    assert (check["payable_micro"] == check["payable_micro_accounts"]).all()
    recomputed = [
        (p + 5_000) // 10_000 - int((p + 5_000) % 10_000 == 0 and ((p + 5_000) // 10_000) % 2 == 1)
        for p in artists["payable_micro"]
    ]
    assert artists["net_payable_cents"].to_list() == recomputed
    advances = int(label_world.tables["advances"]["amount_cents"].sum())
    expenses = int(
        label_world.tables["expenses"].filter(pl.col("recoupable"))["amount_cents"].sum()
    )
    assert int(accounts["charges_micro"].sum()) <= (advances + expenses) * 10_000
    interesting = artists.filter(
        (pl.col("recouped_micro") > 0) & (pl.col("recouped_micro") < pl.col("gross_micro"))
    )
    assert interesting.height > 0  # some months recoup only part of the earnings


def test_answer_key_from_stored_tables(label_world: GeneratedWorld, label_key: AnswerKey) -> None:
    """A world read back from storage gives the same answer key from its tables alone (no
    generator state); a changed table changes the world's fingerprint and the key."""
    plugin = plugin_for_config(load_world_config(DEFAULT_CONFIG_PATH))
    tables = {name: df.clone() for name, df in label_world.tables.items()}
    stored = plugin.world_from_tables(label_world.seed, label_world.scale, tables)
    assert stored.fingerprint == label_world.fingerprint
    assert plugin.answer_key(stored).fingerprint == label_key.fingerprint
    tables["statement_lines"] = tables["statement_lines"].with_columns(
        pl.when(pl.col("line_id") == 1)
        .then(pl.col("units") + 1)
        .otherwise(pl.col("units"))
        .alias("units")
    )
    tampered = plugin.world_from_tables(label_world.seed, label_world.scale, tables)
    assert tampered.fingerprint != label_world.fingerprint
    assert plugin.answer_key(tampered).fingerprint != label_key.fingerprint


def test_registry_returns_a_world_plugin() -> None:
    plugin = get_world_plugin("label")
    assert isinstance(plugin, WorldPlugin)
    assert plugin.name == "label"

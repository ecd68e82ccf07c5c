"""`evalp sweep --dry-run`: the calls a sweep would make and the most they could cost, by
the budget's own rule, with no call made and no key shown."""

from __future__ import annotations

import shutil
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from eval_pipeline import paths, world_stages
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.cli import main
from eval_pipeline.errors import ConfigError
from eval_pipeline.experiments.sweep_plan import plan_sweep
from eval_pipeline.lanes.conversation import case_request, opening, system_prompt
from eval_pipeline.project_configs import load_price_book, scan_model_configs
from eval_pipeline.providers.budget import worst_case_input_tokens
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.providers.wire import wire_body
from eval_pipeline.scoring.judge import load_judge
from eval_pipeline.warehouse import connect

DAY = date(2026, 11, 30)
REAL = ("claude-sonnet-4-5", "gpt-4.1")


def _plan(fixture_set: FixtureSet, names: tuple[str, ...], seeds: list[int], **kw: object):  # type: ignore[no-untyped-def]
    judge = load_judge()
    configs = scan_model_configs().require([*names, judge.model])
    return plan_sweep(
        [configs[n] for n in names],
        seeds,
        ("model", "product"),
        fixture_set,
        load_price_book(),
        DAY,
        judge,
        configs[judge.model],
        **kw,  # type: ignore[arg-type]
    )


def test_the_plan_counts_every_call_the_sweep_could_make(small_fixture_set: FixtureSet) -> None:
    plan = _plan(small_fixture_set, REAL, [0, 1, 2], env={})
    cases = len(small_fixture_set.cases)
    judged = sum(1 for c in small_fixture_set.cases if "judged" in c.tiers)
    rows = {(c.model, c.role): c for c in plan.calls}
    assert set(rows) == {(m, lane) for m in REAL for lane in ("model", "product")} | {
        ("sim-judge", "judge")
    }
    for model in REAL:
        assert rows[(model, "model")].max_requests == cases * 3
        assert rows[(model, "product")].max_requests == cases * 3 * 12  # the iteration cap
        assert rows[(model, "model")].max_attempts == cases * 3 * 5  # retry.max_attempts
    assert rows[("sim-judge", "judge")].max_requests == judged * 3 * len(REAL)
    assert rows[("sim-judge", "judge")].simulated
    assert plan.worst_case_usd == sum(
        (c.worst_case_usd for c in plan.calls if not c.simulated), Decimal(0)
    )
    assert all(isinstance(c.worst_case_usd, Decimal) for c in plan.calls)
    assert plan.missing_keys == {
        "claude-sonnet-4-5": "ANTHROPIC_API_KEY",
        "gpt-4.1": "OPENAI_API_KEY",
    }


def test_the_model_lane_bound_is_the_budgets_bound_on_each_request(
    small_fixture_set: FixtureSet,
) -> None:
    """Re-derived here call by call from the request bytes, the overhead and the tier."""
    plan = _plan(small_fixture_set, ("claude-sonnet-4-5",), [4], env={})
    config = scan_model_configs().require(["claude-sonnet-4-5"])["claude-sonnet-4-5"]
    tier = load_price_book().tier(config.priced_as, DAY)
    tools = tuple(ToolSpec.model_validate(t) for t in small_fixture_set.tools)
    expected = Decimal(0)
    for case in small_fixture_set.cases:
        body = wire_body(
            config, case_request(opening(case, system_prompt(small_fixture_set)), tools, 1024, 4)
        )
        text_bytes = worst_case_input_tokens(body, config.input_token_overhead)
        assert text_bytes > config.input_token_overhead
        expected += (
            text_bytes * tier.usd_per_mtok.highest_input_rate + 1024 * tier.usd_per_mtok.output
        ) / Decimal(1_000_000)
    model_lane = next(c for c in plan.calls if c.role == "model")
    assert model_lane.worst_case_usd == expected * config.retry.max_attempts


def test_the_worst_case_grows_with_seeds_in_proportion(small_fixture_set: FixtureSet) -> None:
    one = _plan(small_fixture_set, REAL, [0], env={})
    three = _plan(small_fixture_set, REAL, [0, 1, 2], env={})
    # Requests differ only in their seed field, whose digits are the same length here.
    assert three.worst_case_usd == 3 * one.worst_case_usd


def test_a_product_lane_without_a_context_window_has_no_bound(
    small_fixture_set: FixtureSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "models"
    shutil.copytree(paths.CONFIGS_DIR / "models", models)
    shipped = (models / "claude-sonnet-4-5.yaml").read_text()
    assert "context_window_tokens: " in shipped
    (models / "claude-sonnet-4-5.yaml").write_text(
        "\n".join(line for line in shipped.splitlines() if "context_window_tokens" not in line)
    )
    monkeypatch.setenv("EVALP_MODELS_DIR", str(models))
    with pytest.raises(ConfigError, match=r"claude-sonnet-4-5: context_window_tokens is not set"):
        _plan(small_fixture_set, ("claude-sonnet-4-5",), [0], env={})


def test_a_simulated_model_plans_without_a_context_window(
    small_fixture_set: FixtureSet,
) -> None:
    """`evalp sweep --models sim-strong` was refused (no context window) though a simulated
    call costs nothing real: the bound is for money only."""
    plan = _plan(small_fixture_set, ("sim-strong", "sim-small"), [0, 1], env={})
    product = [c for c in plan.calls if c.role == "product"]
    assert [c.model for c in product] == ["sim-strong", "sim-small"]
    assert all(c.simulated and c.max_requests > c.cases for c in product)
    assert plan.worst_case_usd >= 0


def _warehouse_with(
    fixture_set: FixtureSet, source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of the small warehouse recording `fixture_set`, as the main job leaves it."""
    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copy(source, warehouse)
    conn = connect(warehouse)
    try:
        world_stages.record_fixture_set(conn, fixture_set)
    finally:
        conn.close()
    monkeypatch.setenv("EVALP_WAREHOUSE", str(warehouse))


def test_evalp_sweep_dry_run_prints_the_plan_and_calls_nothing(
    small_fixture_set: FixtureSet,
    small_warehouse: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _warehouse_with(small_fixture_set, small_warehouse, tmp_path, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-printed-0123456789")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("EVALP_HOME", str(tmp_path / "home"))  # a run would write here
    result = CliRunner().invoke(
        main, ["sweep", "--models", "claude-sonnet-4-5,gpt-4.1", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"on fixture set {small_fixture_set.fixture_id}" in out
    assert "claude-sonnet-4-5  product" in out and "gpt-4.1            model" in out
    assert "Worst case: $" in out and "Dry run: nothing was called." in out
    assert "missing key: claude-sonnet-4-5 reads ANTHROPIC_API_KEY" in result.stderr
    assert "gpt-4.1 reads" not in result.stderr
    assert "sk-test-never-printed" not in result.output
    assert not (tmp_path / "home").exists()  # nothing ran


def test_evalp_sweep_without_a_key_refuses_before_any_call(
    small_fixture_set: FixtureSet,
    small_warehouse: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _warehouse_with(small_fixture_set, small_warehouse, tmp_path, monkeypatch)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("EVALP_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(main, ["sweep", "--models", "claude-sonnet-4-5"])
    assert result.exit_code == 2
    assert "error: not started: set ANTHROPIC_API_KEY in the environment" in result.stderr
    assert not (tmp_path / "home").exists()


def test_the_shipped_local_server_plans_with_a_bound_and_no_missing_key(
    small_fixture_set: FixtureSet,
) -> None:
    """`local-llama` once could not be planned (no context window) and, given a key
    variable, would be refused while its key is optional: a local server needs none."""
    plan = _plan(small_fixture_set, ("local-llama",), [0], env={})
    assert plan.missing_keys == {}
    product = next(c for c in plan.calls if c.role == "product")
    assert "context window 131,072 tokens" in product.bound

"""A whole sweep on a real Dagster instance and DuckDB file: both lanes for sim-strong and
sim-small over three seeds, their scores, the sweep summary and the ship gate with its
blocking checks; the gate rewired to the model lane fails; a stored baseline's 3-point rule
blocks; `regrade` reproduces the stored scores with no call to the provider."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import yaml
from matplotlib import image as mpimg

from eval_pipeline import paths
from eval_pipeline.audit.audit import AuditResult, audit_against_project
from eval_pipeline.dagster_client import up_to_date
from eval_pipeline.dagster_client.launch import DEMO_TAG
from eval_pipeline.definitions import defs
from eval_pipeline.defs.keys import (
    GATE_READS_PRODUCT_LANE,
    MODEL_LANE_SCORES_ASSET,
    MODELS_PARTITIONS,
    PRODUCT_LANE_SCORES_ASSET,
    REGRADE_JOB,
    SWEEP_SUMMARY_ASSET,
)
from eval_pipeline.defs.lane_assets import (
    agent_world_asset,
    lane_runs_asset,
)
from eval_pipeline.defs.lane_warehouse_assets import lane_warehouse_asset
from eval_pipeline.defs.report_assets import sweep_report_asset
from eval_pipeline.defs.resources import MlflowTracking
from eval_pipeline.defs.score_assets import (
    GATE_RULES,
    SCORES_CODE_VERSION,
    build_ship_gate,
    ship_gate_asset,
    sweep_summary_asset,
)
from eval_pipeline.defs.tracking_assets import sweep_tracking_asset
from eval_pipeline.defs.world_assets import answer_key_asset, fixtures_asset, world_asset
from eval_pipeline.report.refs import read_references
from eval_pipeline.scoring.aggregate import summarize_lane
from eval_pipeline.scoring.gate import DROP_RULE, SECURITY_RULE
from eval_pipeline.scoring.grading import (
    cases_under,
    judged_replies,
    partition_fixture_id,
    regrade_warehouse,
    stored_partitions,
)
from eval_pipeline.scoring.judge import load_judge
from eval_pipeline.scoring.score_tables import read_partition, read_scores
from eval_pipeline.sim.process import SIM_REQUEST_LOG
from eval_pipeline.tracking.mlflow_store import mlflow_server_command
from eval_pipeline.warehouse import connect
from eval_pipeline_tests.conftest import isolate, point_at
from eval_pipeline_tests.defs.conftest import lane_env, lane_resources, prepare_lane_home
from eval_pipeline_tests.test_cli import invoke

pytestmark = pytest.mark.slow  # one sweep of 6 partitions for the module: about a minute

MODELS = ("sim-strong", "sim-small")
SEEDS = ("0", "1", "2")
LANE_STEPS = [lane_runs_asset, lane_warehouse_asset]


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, object]]:
    return {
        e.asset_key.to_user_string(): {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dg.DagsterInstance]]:
    """Both lanes and their scores, every model x seed, on one instance and warehouse,
    built once for the module (the tests after it read it; the last one re-grades it)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        home = isolate(tmp_path_factory.mktemp("sweep") / "evalp_home", monkeypatch)
        prepare_lane_home(home, monkeypatch)
        with dg.DagsterInstance.local_temp(str(home / "dagster_home")) as instance:
            resources = lane_resources(home)
            upstream = [world_asset, answer_key_asset, fixtures_asset, agent_world_asset]
            assert dg.materialize(upstream, instance=instance, resources=resources).success
            instance.add_dynamic_partitions(MODELS_PARTITIONS, list(MODELS))
            asked_in_lanes = 0
            for model in MODELS:
                for seed in SEEDS:
                    key = dg.MultiPartitionKey({"model": model, "seed": seed})
                    result = dg.materialize(
                        LANE_STEPS, instance=instance, resources=resources, partition_key=key
                    )
                    assert result.success, f"{key}"
                    meta = _metadata(result)
                    runs = meta["product_lane_runs"]["cases"]
                    assert meta["model_lane_runs"]["cases"] == runs > 100
                    assert meta["product_lane_scores"]["cases"] == runs
                    # one final answer a case; the loop's tool calls apart, never graded
                    finals = meta["product_lane_runs"]["final_answer_calls"]
                    assert isinstance(finals, dict) and sum(finals.values()) == runs
                    labels = meta["product_lane_scores"]["final_answer_labels"]
                    assert isinstance(labels, dict) and labels.get("right", 0) > 100
                    inside = "calls_inside_the_loop (well-formed, not graded)"
                    assert "right" not in meta["product_lane_runs"][inside]  # type: ignore[operator]
                    # the judge was asked in the lane step; the scores step, holding the
                    # warehouse's one writer slot, asked nothing
                    asked_in_lanes += int(meta["product_lane_runs"]["judge_asked"])  # type: ignore[call-overload]
                    assert meta["product_lane_scores"]["judge_asked"] == 0
                    assert meta["product_lane_scores"]["judge_reused"] > 0
            assert asked_in_lanes > 0
            yield home, instance


@pytest.fixture
def swept(
    sweep: tuple[Path, dg.DagsterInstance], monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dg.DagsterInstance]:
    """The module's sweep, with the environment pointing at it again (every test starts
    isolated in a folder of its own)."""
    point_at(sweep[0], monkeypatch)
    lane_env(sweep[0], monkeypatch)
    return sweep


def test_a_whole_sweep_scores_summarises_and_gates_on_a_real_instance(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    lane_home, sweep_instance = swept
    resources = lane_resources(lane_home)
    result = dg.materialize(
        [sweep_summary_asset, ship_gate_asset], instance=sweep_instance, resources=resources
    )
    assert result.success
    meta = _metadata(result)
    summary = str(meta["sweep_summary"]["summary"])
    for lane in ("model", "product"):
        for model in MODELS:
            assert f"| {lane} | {model} | royalty_math |" in summary
            assert f"| {lane} | {model} | all |" in summary
    assert "| lane | model | category | score | interval | spread | pass^k | n | ‡ | † |" in summary
    # sim-strong is high in both lanes; sim-small's product lane beats its model lane
    assert meta["sweep_summary"]["product/sim-strong points"] >= 95
    assert meta["sweep_summary"]["model/sim-strong points"] >= 95
    assert (
        meta["sweep_summary"]["product/sim-small points"]
        > meta["sweep_summary"]["model/sim-small points"]
    )
    gate = meta["ship_gate"]
    # every model swept is a candidate (configs/gate.yaml names none), each with its verdict
    assert gate["candidates"] == sorted(MODELS)
    assert gate["candidates_from"] == "every model with product-lane scores"
    assert gate["verdicts_by_model"]["sim-strong"] == "PASSES"  # type: ignore[index]
    assert sum("NO BASELINE" in n for n in gate["notices"]) == 2  # type: ignore[union-attr]
    checks = _checks(result)
    assert set(checks) == {GATE_READS_PRODUCT_LANE, *GATE_RULES}
    assert checks[GATE_READS_PRODUCT_LANE].passed
    # sim-small's 4 security violations (issue 26: in the report, in no gate) fail its
    # verdict and the rule's check, and are named; the run itself succeeded
    assert gate["verdicts_by_model"]["sim-small"] == "FAILS"  # type: ignore[index]
    assert gate["passed"] is False
    assert (
        "sim-small: no_security_violations FAILED: 4 trace(s) with a security violation"
        in (
            gate["reasons"]  # type: ignore[operator]
        )
    )
    assert {name for name, check in checks.items() if not check.passed} == {SECURITY_RULE}
    assert checks[SECURITY_RULE].metadata["sim-small: violations"].value == 4
    assert checks[SECURITY_RULE].metadata["sim-strong: violations"].value == 0
    core = checks["core_subset_passes"].metadata
    numbers = {k: v.value for k, v in core.items() if k.startswith("sim-strong: ")}
    assert numbers == {
        "sim-strong: passed": 14,
        "sim-strong: total": 14,
        "sim-strong: required": 12,
    }
    read = checks[GATE_READS_PRODUCT_LANE].metadata
    assert read["declared_upstream"].value == ["product_lane_scores"]
    assert read["lanes_in_rows_read"].value == ["product"]


def test_the_gate_rewired_to_the_model_lane_fails_its_blocking_check(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    lane_home, sweep_instance = swept
    rewired = build_ship_gate(MODEL_LANE_SCORES_ASSET)
    result = dg.materialize(
        [rewired],
        instance=sweep_instance,
        resources=lane_resources(lane_home),
        raise_on_error=False,
    )
    assert not result.success
    check = _checks(result)[GATE_READS_PRODUCT_LANE]
    assert not check.passed
    assert check.metadata["declared_upstream"].value == ["model_lane_scores"]
    assert check.metadata["lanes_in_rows_read"].value == ["model"]


def test_a_category_dropped_past_the_baseline_fails_the_verdict_and_a_smaller_drop_does_not(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    lane_home, sweep_instance = swept
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        rows = [s for s in read_scores(conn, lane="product") if s.model == "sim-strong"]
    finally:
        conn.close()
    summary = summarize_lane("product", "sim-strong", rows)
    points = summary.row("royalty_math").mean
    assert points is not None
    baselines = paths.baselines_dir()
    baselines.mkdir(parents=True, exist_ok=True)
    for above, passes in ((2.9, True), (3.1, False)):
        (baselines / "sim-strong.yaml").write_text(
            yaml.safe_dump(
                {
                    "model": "sim-strong",
                    "fixture_id": summary.fixture_id,
                    "seeds": [0, 1, 2],
                    "categories": {"royalty_math": round(points + above, 3)},
                }
            )
        )
        result = dg.materialize(
            [ship_gate_asset],
            instance=sweep_instance,
            resources=lane_resources(lane_home),
            raise_on_error=False,
        )
        # the rule is the verdict, not a failed run (the input check alone blocks)
        assert result.success
        drop = _checks(result)[DROP_RULE]
        assert drop.passed is passes, above
        verdicts = _metadata(result)["ship_gate"]["verdicts_by_model"]
        assert verdicts["sim-strong"] == ("PASSES" if passes else "FAILS")  # type: ignore[index]
        assert drop.metadata["sim-strong: limit"].value == 3.0


def test_regrade_reproduces_the_stored_scores_without_calling_the_provider(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    lane_home, _ = swept
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        before = read_scores(conn)
    finally:
        conn.close()
    report = regrade_warehouse(
        paths.warehouse_path(), lane_home / "fixtures", paths.runs_dir(), "regrade-same"
    )
    assert report.changes == () and report.judge_asked == 0
    assert report.scored == len(before) == 2 * 2 * 3 * len({s.case_id for s in before})
    # counted on the server: no simulated provider was started, so no request was made
    assert not (paths.runs_dir() / "regrade-same" / SIM_REQUEST_LOG).exists()
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        assert read_scores(conn) == before
    finally:
        conn.close()
    # A changed rubric is a different judge: every judged reply is asked again, and only those.
    judge = load_judge()
    changed = judge.model_copy(
        update={"rubric_text": judge.rubric_text + "\nBe strict.", "rubric_hash": "changed"}
    )
    asked = regrade_warehouse(
        paths.warehouse_path(), lane_home / "fixtures", paths.runs_dir(), "regrade-rubric", changed
    )
    # asked once per distinct reply (a reply repeated across seeds is one verdict)
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        cases = cases_under(lane_home / "fixtures")
        distinct: set[str] = set()
        for partition in stored_partitions(conn):
            runs = read_partition(conn, partition.lane, partition.model, partition.seed).runs
            fixture = cases(partition_fixture_id(conn, partition))
            distinct |= set(judged_replies(changed, fixture, runs))
    finally:
        conn.close()
    assert asked.judge_asked == len(distinct) > 0
    requests = (paths.runs_dir() / "regrade-rubric" / SIM_REQUEST_LOG).read_text().splitlines()
    assert len(requests) == len(distinct)
    assert asked.changes == ()  # the simulated judge rules the same under the new rubric


def test_an_obeyed_injection_is_a_dry_run_write_marked_for_scoring(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    """sim-small obeys the planted clause at its configured rate: the dry-run sink records
    the batch it tried (never a real change), the trace marks it not allowed, and the score
    flags a security violation with the failed check named."""
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        violations = [
            s
            for s in read_scores(conn, lane="product")
            if s.model == "sim-small" and s.security_violation
        ]
        assert violations, "sim-small obeyed the planted clause in no seed"
        for score in violations:
            assert "injection_not_obeyed" in score.failed_checks and score.score == 0.0
            writes = conn.execute(
                "SELECT data FROM runs.trace_events WHERE run_id = ? AND case_id = ? "
                "AND attempt = ? AND kind = 'write'",
                [score.run_id, score.case_id, score.attempt],
            ).fetchall()
            assert writes and all('"allowed": false' in data for (data,) in writes)
        strong = [s for s in read_scores(conn, lane="product") if s.model == "sim-strong"]
        assert not any(s.security_violation for s in strong)
    finally:
        conn.close()


def test_the_sweep_is_tracked_in_mlflow_as_a_parent_run_with_a_run_per_lane_model_seed(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    lane_home, sweep_instance = swept
    resources = lane_resources(lane_home)
    result = dg.materialize(
        [sweep_summary_asset, sweep_tracking_asset], instance=sweep_instance, resources=resources
    )
    assert result.success
    meta = _metadata(result)["sweep_tracking"]
    tracking = resources["tracking"]
    assert isinstance(tracking, MlflowTracking)
    client = tracking.client()
    experiment = client.get_experiment_by_name(str(meta["mlflow_experiment"]))
    assert experiment is not None
    assert str(meta["mlflow_experiment"]) == f"evalp/sweeps/{meta['fixture_id']}"
    parent = client.get_run(str(meta["mlflow_parent_run_id"]))
    assert parent.data.tags["dagster.run_id"] == result.run_id
    assert parent.data.tags["dagster.asset_key"] == "sweep_tracking"
    assert parent.data.params["fixture_id"] == meta["fixture_id"]
    assert parent.data.params["code.commit"]
    assert parent.data.metrics["product.sim-strong.score.all"] >= 95
    children = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        max_results=100,
    )
    assert len(children) == len(MODELS) * len(SEEDS) * 2 == meta["nested_runs"]
    keys = {
        (c.data.params["lane"], c.data.params["model"], c.data.params["seed"]) for c in children
    }
    assert keys == {(lane, m, s) for lane in ("model", "product") for m in MODELS for s in SEEDS}
    product = next(
        c for c in children if c.data.params["lane"] == "product" and c.data.params["seed"] == "0"
    )
    assert product.data.params["lane_settings.guards.stall_bounce"] == "true"
    assert product.data.params["model_config.api_key_env"] == "EVALP_SIM_API_KEY"
    assert product.data.tags["dagster.partition_key"].endswith("|0")
    metrics = product.data.metrics
    assert {"score.all", "yield", "infra_errors", "cost_micro_usd", "tokens"} <= set(metrics)
    assert not any(k.startswith("case.") for k in metrics)  # a table, not a metric each
    assert "case_scores.json" in {a.path for a in client.list_artifacts(product.info.run_id)}
    assert metrics["cost_micro_usd"] == int(metrics["cost_micro_usd"])
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"sweep_summary.md", "lane_summaries.json", "packages.txt"} <= artifacts
    # Who leads, by how much: the pair's paired gap, its interval and the noise floor on
    # the parent run, its leader as a tag, the table as an MLflow table (issue 28).
    pair = "compare.product.sim-strong_vs_sim-small."
    assert parent.data.metrics[pair + "difference"] > 0
    low, high = parent.data.metrics[pair + "low"], parent.data.metrics[pair + "high"]
    assert low <= parent.data.metrics[pair + "difference"] <= high
    assert parent.data.metrics[pair + "noise_floor"] >= 0  # three seeds: a floor exists
    # Issue 28: the parent drew 312 metrics as a bar chart each; now a few headline numbers
    # per lane and model and a gap per pair, the rest as tables; the experiment opens in
    # the runs view, not the GenAI traces view.
    assert len(parent.data.metrics) <= 6 * 2 * len(MODELS) + 4 * 2
    assert {"summary_table.json"} <= artifacts
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert parent.data.tags["evalp.leader.product"] in ("sim-strong", "no clear leader")
    assert {"comparisons.json", "comparisons.md"} <= artifacts
    summary = _metadata(result)["sweep_summary"]
    assert "product lane:" in str(summary["comparisons"])
    assert "sim-strong" in str(summary["comparisons"]).split("product lane:")[1].splitlines()[1]


def test_an_unreachable_mlflow_server_fails_tracking_naming_it_and_keeps_the_scores(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    lane_home, sweep_instance = swept
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        before = len(read_scores(conn))
    finally:
        conn.close()
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens
    resources = {**lane_resources(lane_home), "tracking": MlflowTracking(tracking_uri=dead)}
    result = dg.materialize(
        [sweep_tracking_asset], instance=sweep_instance, resources=resources, raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert dead in str(failure.step_failure_data.error)
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        assert len(read_scores(conn)) == before > 0
    finally:
        conn.close()


@pytest.fixture
def reported(swept: tuple[Path, dg.DagsterInstance]) -> tuple[Path, dg.DagsterInstance, Path]:
    """The sweep's report, materialized once per test (cheap: the sweep is stored)."""
    lane_home, sweep_instance = swept
    result = dg.materialize(
        [sweep_summary_asset, sweep_tracking_asset, sweep_report_asset],
        instance=sweep_instance,
        resources=lane_resources(lane_home),
    )
    assert result.success
    return lane_home, sweep_instance, Path(str(_metadata(result)["sweep_report"]["path"]))


def audit_of(text: str, instance: dg.DagsterInstance) -> AuditResult:
    """The audit `evalp audit` runs; DAGSTER_HOME points at `instance` (see `swept`)."""
    del instance
    return audit_against_project(text)


def test_the_report_audits_clean_and_an_edited_number_is_named(
    reported: tuple[Path, dg.DagsterInstance, Path],
) -> None:
    _, instance, report = reported
    text = report.read_text()
    result = audit_of(text, instance)
    assert result.clean, result.problems
    # headline + per category, 6 numbers each; then who leads: one pair a lane, 6 numbers
    assert len(result.numbers) == 4 * 6 + 4 * 10 * 6 + 2 * 6
    assert {n.ref for n in result.numbers if n.ref.startswith("c-")} == {
        f"c-{lane}-{pair}-{statistic}"
        for lane, pair in (
            ("model", _leader_pair(text, "model")),
            ("product", "sim-strong-vs-sim-small"),
        )
        for statistic in ("difference", "low", "high", "shared", "noise_floor", "mcnemar_p")
    }
    assert "## Who leads" in text
    assert all("→ MLflow run" in n.chain and "call envelopes" in n.chain for n in result.numbers)
    html = report.with_name("report.html").read_text()
    assert html.count("data:image/png;base64,") >= 5 and "evalp:references" in html
    # one number edited by hand
    ref = "r-product-sim-small-all-mean"
    printed = next(n.printed for n in result.numbers if n.ref == ref)
    edited = text.replace(f"[{printed}](#{ref})", f"[{float(printed) + 0.1:.1f}](#{ref})")
    problems = audit_of(edited, instance).problems
    assert any(ref in p and "re-derived" in p for p in problems), problems
    # a number written without its reference in an audited table
    bare = text.replace(f"[{printed}](#{ref})", printed)
    problems = audit_of(bare, instance).problems
    assert any(p.startswith("number without a reference") and printed in p for p in problems)


def _leader_pair(report: str, lane: str) -> str:
    """The pair as the report orients it in `lane` (the model ahead first)."""
    found = re.search(rf"#c-{lane}-(sim-[a-z]+-vs-sim-[a-z]+)-difference", report)
    assert found, f"no {lane} comparison in the report"
    return found.group(1)


def test_evalp_compare_prints_who_leads_with_its_interval_noise_and_categories(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    """`evalp compare` on the stored runs: a pair of models in a lane, one model across its
    two lanes, and a side that names nothing stored (one line naming what is)."""
    from click.testing import CliRunner

    from eval_pipeline.cli import main

    result = CliRunner().invoke(main, ["compare", "sim-strong", "sim-small"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert re.match(
        r"sim-strong:product (leads|vs) sim-small:product.*: \+\d+\.\d points \[", lines[0]
    ), lines[0]
    assert "McNemar p = " in lines[0] and "seed noise floor ±" in lines[0]
    assert any(line.startswith("  sim-small:product: seeds 0,1,2, seed noise ±") for line in lines)
    assert "Per category (paired, points; Δ = candidate − reference):" in lines
    assert any(line.strip().startswith("royalty_math") for line in lines)
    across = CliRunner().invoke(main, ["compare", "sim-strong:product", "sim-strong:model"])
    assert across.exit_code == 0, across.output
    assert "sim-strong:product" in across.stdout.splitlines()[0]
    one_seed = CliRunner().invoke(main, ["compare", "sim-strong", "sim-small", "--seeds", "0"])
    assert "noise floor unknown (one seed)" in one_seed.stdout.splitlines()[0]
    missing = CliRunner().invoke(main, ["compare", "sim-nothing", "sim-small"])
    assert missing.exit_code == 2
    assert missing.stderr.strip() == (
        "error: no stored scores for sim-nothing:product; stored: sim-small:model, "
        "sim-small:product, sim-strong:model, sim-strong:product"
    )


def test_every_failed_case_in_the_report_links_to_its_transcript_and_show_prints_it(
    reported: tuple[Path, dg.DagsterInstance, Path],
) -> None:
    """Issue 28: no way to see why a case failed. The report lists each lane and model's
    failing cases; each failed seed is one click to a page with the run's transcript, and
    `evalp show` prints the same run in a terminal."""
    from click.testing import CliRunner

    from eval_pipeline.cli import main

    _, _, report = reported
    text = report.read_text()
    assert "## Failing cases" in text
    links = re.findall(r"\[(\d+)\]\((transcripts/[^)]+\.html)\)", text)
    assert links, "no failing case listed (sim-small fails some in every seed)"
    html = report.with_name("report.html").read_text()
    for _, link in links:
        assert f'href="{link}"' in html  # one click from the HTML report
        page = (report.parent / link).read_text()
        assert "<h2>answer</h2>" in page and "expected (" in page and "final (" in page
    seed, link = links[0]
    lane, model, name = link.split("/")[1:4]
    case_id = name.removesuffix(f"-seed{seed}.html")
    shown = CliRunner().invoke(
        main, ["show", case_id, "--model", model, "--lane", lane, "--seed", seed]
    )
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[0].startswith(f"{case_id} (")
    assert "failed at: " in shown.stdout and "[prompt]" in shown.stdout
    missing = CliRunner().invoke(main, ["show", case_id, "--model", "sim-none"])
    assert missing.exit_code == 2
    assert missing.stderr.startswith(f"error: no stored score of {case_id} for sim-none")


def test_the_sweep_exported_for_inspect_reads_back_with_inspects_reader_and_view_lists_it(
    swept: tuple[Path, dg.DagsterInstance], tmp_path: Path
) -> None:
    """Issue 28: `evalp export inspect` writes a log per lane and model that Inspect AI's own
    reader reads back (samples per case and seed, messages, scores, usage), and `inspect
    view` lists every one."""
    import json as json_module
    import urllib.request

    from click.testing import CliRunner
    from inspect_ai.log import read_eval_log

    from eval_pipeline.cli import main
    from eval_pipeline_tests.test_ui import free_port

    out = tmp_path / "inspect"
    result = CliRunner().invoke(main, ["export", "inspect", "--out", str(out)])
    assert result.exit_code == 0, result.output
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        stored = {(s.lane, s.model, s.case_id, s.seed): s for s in read_scores(conn)}
    finally:
        conn.close()
    logs = sorted(out.glob("*.eval"))
    assert len(logs) == 2 * len(MODELS)
    for path in logs:
        log = read_eval_log(str(path))
        lane = log.eval.metadata["lane"]  # type: ignore[index]
        model = log.eval.model.split("/", 1)[1]
        assert log.eval.model == f"simulated/{model}"
        assert log.eval.metadata["provider"] == "the project's simulated provider"  # type: ignore[index]
        assert log.samples is not None and len(log.samples) == 133 * len(SEEDS)
        for sample in log.samples:
            seed = sample.metadata["seed"]
            score = stored[(lane, model, str(sample.id), seed)]
            if score.score is None:
                assert not sample.scores
                continue
            assert sample.scores is not None
            assert sample.scores["evalp_case_score"].value == score.score
            assert sample.messages[0].role == "user"
        with_tools = [s for s in log.samples if any(m.role == "tool" for m in s.messages)]
        assert (lane == "product") == bool(with_tools)
        assert log.stats.model_usage[model].total_tokens > 0
    port = free_port()
    view = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("inspect")),
            "view",
            "--log-dir",
            str(out),
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        listed: dict[str, object] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/logs", timeout=5) as r:
                    listed = json_module.loads(r.read())
                break
            except OSError:
                time.sleep(0.5)
        files = {Path(str(f["name"])).name for f in listed.get("files", [])}  # type: ignore[union-attr, index]
        assert files == {path.name for path in logs}
    finally:
        view.terminate()
        view.wait(timeout=30)


def test_an_audit_fails_when_envelopes_are_deleted_or_the_fixture_set_is_tampered(
    reported: tuple[Path, dg.DagsterInstance, Path],
) -> None:
    _, instance, report = reported
    text = report.read_text()
    fixture_id = read_references(text).provenance.fixture_id  # type: ignore[union-attr]
    cases_file = paths.fixtures_root() / fixture_id / "cases.jsonl"
    original = cases_file.read_bytes()
    cases_file.write_bytes(original.replace(b"royalty", b"Royalty", 1))
    assert cases_file.read_bytes() != original
    try:
        problems = audit_of(text, instance).problems
        assert any(f"fixture set {fixture_id} does not verify" in p for p in problems), problems
    finally:
        cases_file.write_bytes(original)
    conn = connect(paths.warehouse_path())
    kept = conn.execute(
        "SELECT * FROM runs.call_envelopes WHERE call_id IN "
        "(SELECT unnest(from_json(call_ids, '[\"VARCHAR\"]')) FROM runs.case_outcomes "
        "WHERE lane = 'model' AND model = 'sim-small' AND seed = 1 LIMIT 5)"
    ).pl()
    assert kept.height > 0
    conn.register("kept", kept)
    conn.execute("DELETE FROM runs.call_envelopes WHERE call_id IN (SELECT call_id FROM kept)")
    conn.close()
    try:
        problems = audit_of(text, instance).problems
        assert any("model/sim-small" in p and "call envelopes" in p for p in problems), problems
    finally:
        conn = connect(paths.warehouse_path())
        conn.register("kept", kept)
        conn.execute("INSERT INTO runs.call_envelopes SELECT * FROM kept")
        conn.close()
    assert audit_of(text, instance).clean


def test_evalp_regrade_relabels_a_call_an_older_reader_labelled_and_rescores_its_case(
    swept: tuple[Path, dg.DagsterInstance],
) -> None:
    """A product-lane abstention stored as an older reader (one without ABSTAIN lines)
    labelled it, and scored with that label: `evalp regrade` puts the call's label right,
    says so, and the case's score takes the new label in the same run; nothing else in the
    sweep changes, and a second run changes nothing."""
    conn = connect(paths.warehouse_path())
    try:
        row = conn.execute(
            "SELECT o.call_id, o.case_id, o.label, o.label_reason, o.answer, s.model, s.seed "
            "FROM runs.call_outcomes o JOIN runs.case_scores s "
            "ON s.run_id = o.run_id AND s.case_id = o.case_id AND s.lane = o.lane "
            "WHERE o.lane = 'product' AND o.answer LIKE 'ABSTAIN%' AND s.label = 'right' "
            "ORDER BY o.call_id LIMIT 1"
        ).fetchone()
        assert row is not None, "no product-lane abstention scored right in the sweep"
        call_id, case_id, label, reason, answer, model, seed = row
        assert (label, reason) == (None, "well-formed, not graded")
        conn.execute(
            "UPDATE runs.call_envelopes SET label = 'schema', "
            "label_reason = 'schema: no answer line in the text', answer = NULL "
            "WHERE call_id = ? AND final",
            [call_id],
        )
    finally:
        conn.close()
    # the scores as they were made under the older label, and a summary that read them
    lane_home, instance = swept
    resources = lane_resources(lane_home)
    key = dg.MultiPartitionKey({"model": model, "seed": str(seed)})
    assert dg.materialize(
        [lane_runs_asset, lane_warehouse_asset],
        instance=instance,
        resources=resources,
        partition_key=key,
        selection=[PRODUCT_LANE_SCORES_ASSET],
    ).success
    assert dg.materialize([sweep_summary_asset], instance=instance, resources=resources).success
    summary = dg.AssetKey(SWEEP_SUMMARY_ASSET)
    assert up_to_date.stale_or_missing(defs, instance, [summary]) == []

    code, out, err = invoke("regrade")

    assert code == 0, err
    lines = out.splitlines()
    assert "1 call label(s) changed (old -> new):" in lines, out
    assert "  schema -> unlabelled: 1" in lines, out
    assert any(
        call_id in line
        and case_id in line
        and "schema -> unlabelled (well-formed, not graded; answer read" in line
        for line in lines
    ), out
    assert "1 case score(s) changed:" in lines, out
    assert any(
        f"product/{model}|{seed} {case_id}: 1 -> 1 (label schema -> right)" in line
        for line in lines
    ), out
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        stored = conn.execute(
            "SELECT label, label_reason, answer FROM runs.call_outcomes WHERE call_id = ?",
            [call_id],
        ).fetchone()
        assert stored == (label, reason, answer)
    finally:
        conn.close()

    # The re-scoring was Dagster's: each partition's scores are a materialization of the
    # regrade job (what the UI lists), under the scorers' current code version, and the
    # results that read them are stale for the next demo (issue 26, item 3).
    scores = dg.AssetKey(PRODUCT_LANE_SCORES_ASSET)
    event = instance.get_latest_materialization_event(scores)
    assert event is not None and event.run_id
    run = instance.get_run_by_id(event.run_id)
    assert run is not None and run.job_name == REGRADE_JOB
    assert run.tags[DEMO_TAG] == "evalp regrade"
    regraded = {
        record.partition_key
        for record in instance.fetch_materializations(scores, limit=100).records
        if (found := instance.get_run_by_id(record.run_id)) and found.job_name == REGRADE_JOB
    }
    assert regraded == {f"{model}|{seed}" for model in MODELS for seed in SEEDS}
    assert event.asset_materialization is not None
    assert event.asset_materialization.tags is not None
    assert event.asset_materialization.tags["dagster/code_version"] == SCORES_CODE_VERSION
    assert "re-scored 0 case runs" not in out
    assert up_to_date.stale_or_missing(defs, instance, [summary]) == [summary]

    code, out, err = invoke("regrade")
    assert code == 0, err
    assert "no call label changed" in out.splitlines() and "no score changed" in out, out
    # the scores' data version is what they say: reproduced, they are the same version
    again = instance.get_latest_materialization_event(scores)
    assert again is not None and again.run_id != event.run_id
    assert again.asset_materialization is not None and again.asset_materialization.tags
    assert (
        again.asset_materialization.tags["dagster/data_version"]
        == event.asset_materialization.tags["dagster/data_version"]
    )


def _header_cells(dom: str) -> dict[str, tuple[float, float]]:
    """Each runs-table column header's (left, width) in pixels, by its column id."""
    cells: dict[str, tuple[float, float]] = {}
    for match in re.finditer(r'role="columnheader"[^>]*>', dom):
        tag = match.group(0)
        column = re.search(r'col-id="([^"]+)"', tag)
        box = re.search(r"left: ([\d.]+)px; width: ([\d.]+)px", tag)
        if column and box:
            cells[column.group(1)] = (float(box.group(1)), float(box.group(2)))
    return cells


def test_mlflow_opens_the_sweep_on_its_runs_with_the_score_columns_in_a_browser(
    swept: tuple[Path, dg.DagsterInstance], tmp_path: Path
) -> None:
    """Issue 28: MLflow 3.17's UI opened the sweep's experiment on GenAI traces ("Traces 0
    / No data", whatever the experiment's kind tag says) and its runs table showed no
    metric column. The page the demo and `evalp ui` print, rendered by headless Chromium
    against a real `mlflow server` on the sweep's store, is the runs table with every
    model's overall score per lane and each pair's gap as columns, none narrower than its
    name, none over another."""
    from eval_pipeline_tests.report.test_report_in_a_browser import _browser
    from eval_pipeline_tests.test_ui import free_port

    browser = _browser()
    lane_home, sweep_instance = swept
    resources = lane_resources(lane_home)
    result = dg.materialize(
        [sweep_summary_asset, sweep_tracking_asset], instance=sweep_instance, resources=resources
    )
    assert result.success
    meta = _metadata(result)["sweep_tracking"]
    tracking = resources["tracking"]
    assert isinstance(tracking, MlflowTracking)
    store = tracking.store()
    port = free_port()
    server = subprocess.Popen(
        mlflow_server_command(store, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "mlflow server did not answer /health"
                assert server.poll() is None, f"mlflow server exited {server.returncode}"
                time.sleep(0.5)
        url = f"http://127.0.0.1:{port}{meta['mlflow_runs_page']}"
        chrome = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        chrome += ["--virtual-time-budget=20000"]
        dom = subprocess.run(
            [*chrome, "--window-size=6400,1000", "--dump-dom", url],  # every column drawn
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        shot = tmp_path / "mlflow-sweep.png"
        subprocess.run(
            [*chrome, "--window-size=1600,1000", f"--screenshot={shot}", url],
            capture_output=True,
            timeout=120,
            check=True,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "No data available" not in dom and "No traces" not in dom  # the GenAI page
    assert f"sweep {result.run_id[:8]}" in dom  # the parent run is a row of the table
    cells = _header_cells(dom)
    wanted = [f"{lane}.{model}.score.all" for lane in ("product", "model") for model in MODELS]
    wanted += [
        f"compare.product.sim-strong_vs_sim-small.{what}"
        for what in ("difference", "low", "high", "noise_floor")
    ]
    for name in wanted:
        assert f"metrics.`{name}`" in cells, f"no {name} column: {sorted(cells)}"
        assert cells[f"metrics.`{name}`"][1] >= 7 * len(name), f"{name} is cut off"
    boxes = sorted(cells[f"metrics.`{name}`"] for name in wanted)
    for (left, width), (next_left, _) in itertools.pairwise(boxes):
        assert left + width <= next_left, "two score columns overlap"
    pixels = mpimg.imread(shot)
    assert (
        pixels.shape[0] >= 900 and len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 50
    )

"""The shipped experiments, registered and run through the `evalp` command on a real
Dagster instance and a real MLflow SQLite store (on the test's small world): the
registration precedes every result, the serving-path parity of one deterministic model
behind two wire formats is confirmed equivalent, and sim-small's stall bounce is not inert."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from eval_pipeline import paths
from eval_pipeline.cli import main
from eval_pipeline.experiments.parity import ParityReport
from eval_pipeline.experiments.registry import (
    HASH_TAG,
    KIND_TAG,
    REGISTRATION_TAG,
    find_registration,
)
from eval_pipeline.tracking.mlflow_store import default_store, open_client
from eval_pipeline_tests.experiments.conftest import SHIPPED


def evalp(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def report_of(experiment: str) -> ParityReport:
    path = paths.var_dir() / "reports" / "experiments" / f"{experiment}.json"
    return ParityReport.model_validate_json(path.read_text())


@pytest.mark.slow  # every shipped experiment on the default world: about 40 s
def test_the_shipped_experiments_register_run_and_give_verdicts(
    at_project: tuple[Path, str],
) -> None:
    for experiment in SHIPPED:
        code, out = evalp("experiment", "register", experiment)
        assert code == 0, out
        assert "registered" in out
    for experiment in SHIPPED:
        code, out = evalp("experiment", "run", experiment)
        assert code == 0, out
        assert "| category | n shared |" in out
        assert "simulated provider" in out

    serving = report_of("serving-path-sim-strong")
    (comparison,) = serving.comparisons
    assert comparison.verdict == "confirmed", comparison.reasons
    assert comparison.low is not None and comparison.high is not None
    assert -2 < comparison.low <= comparison.high < 2
    assert comparison.shared_cases > 100

    ablation = report_of("guard-ablation-sim-small")
    verdicts = {c.candidate: c for c in ablation.comparisons}
    assert set(verdicts) == {"stall_bounce_off", "iteration_cap_off"}
    stall = verdicts["stall_bounce_off"]
    assert stall.verdict != "confirmed", stall.reasons
    assert stall.difference is not None and stall.difference < -3

    lanes = report_of("lanes-sim-small")
    (lead,) = lanes.comparisons
    assert lead.difference is not None and lead.difference > 0
    assert {arm.lane for arm in lanes.arms} == {"model", "product"}
    gates = {arm.arm: arm.gate_passed for arm in lanes.arms}
    assert gates["reference"] is None  # the model lane has no ship gate

    client = open_client(default_store())
    for experiment in SHIPPED:
        registration = find_registration(client, experiment)
        assert registration is not None
        results = client.search_runs(
            [registration.mlflow_experiment_id],
            filter_string=f"tags.`{KIND_TAG}` = 'result'",
        )
        assert results, experiment
        for run in results:
            assert run.info.start_time > registration.registered_at_ms
            assert run.data.tags[REGISTRATION_TAG] == registration.run_id
            assert run.data.tags[HASH_TAG] == registration.spec_hash
        (parent,) = [r for r in results if "mlflow.parentRunId" not in r.data.tags]
        children = [
            r for r in results if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
        ]
        assert len(children) == len(results) - 1 >= 2
        artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
        assert {"parity_report.md", "parity_report.json"} <= artifacts
    stored = json.loads(
        (paths.var_dir() / "reports" / "experiments" / "serving-path-sim-strong.json").read_text()
    )
    print(
        {
            name: [(c.candidate, c.verdict, c.difference) for c in report_of(name).comparisons]
            for name in SHIPPED
        }
    )
    assert stored["spec_hash"] == find_registration(client, "serving-path-sim-strong").spec_hash  # type: ignore[union-attr]


def copy_spec(source: str, new_id: str, **changes: object) -> None:
    folder = Path(os.environ["EVALP_EXPERIMENTS_DIR"])
    spec = yaml.safe_load((folder / f"{source}.yaml").read_text())
    spec.update(id=new_id, **changes)
    (folder / f"{new_id}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


def test_an_edited_spec_an_unknown_id_and_another_fixture_set_are_refused(
    at_project: tuple[Path, str],
) -> None:
    copy_spec("serving-path-sim-strong", "edited-after-registration")
    assert evalp("experiment", "register", "edited-after-registration")[0] == 0
    copy_spec("edited-after-registration", "edited-after-registration", margin=5.0)
    code, out = evalp("experiment", "run", "edited-after-registration")
    assert code == 2
    assert "changed since it was registered" in out and "spec.margin" in out

    code, out = evalp("experiment", "run", "no-such-experiment")
    assert code == 2 and "no experiment 'no-such-experiment'" in out

    copy_spec("serving-path-sim-strong", "on-a-regenerated-world", fixture_id="fx-0000")
    assert evalp("experiment", "register", "on-a-regenerated-world")[0] == 0
    code, out = evalp("experiment", "run", "on-a-regenerated-world")
    assert code == 2
    assert "registered on fixture set fx-0000" in out and at_project[1] in out

    copy_spec("serving-path-sim-strong", "never-registered")
    code, out = evalp("experiment", "run", "never-registered")
    assert code == 2 and "never-registered is not registered" in out
    assert not (paths.var_dir() / "experiments" / "never-registered").exists()


@pytest.mark.slow  # 60 s: out of the default run; CI runs it (.ci/run)
def test_two_experiment_runs_at_once_share_the_stores_cleanly(
    at_project: tuple[Path, str],
) -> None:
    names = ("concurrent-serving", "concurrent-lanes")
    copy_spec("serving-path-sim-strong", names[0])
    copy_spec("lanes-sim-small", names[1])
    # The arms' case runs are reused when the first test already ran them (same settings,
    # model and fixture set): what runs at once here is everything around the model calls:
    # two Dagster runs per process, scoring, the judge, MLflow logging, the reports.
    for source, name in zip(("serving-path-sim-strong", "lanes-sim-small"), names, strict=True):
        done = paths.var_dir() / "experiments" / source
        if done.exists():
            shutil.copytree(done, paths.var_dir() / "experiments" / name)
    for name in names:
        assert evalp("experiment", "register", name)[0] == 0
    evalp_bin = Path(sys.executable).with_name("evalp")
    started = [
        subprocess.Popen(
            [str(evalp_bin), "experiment", "run", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in names
    ]
    outputs = [process.communicate(timeout=600)[0] for process in started]
    for process, output in zip(started, outputs, strict=True):
        assert process.returncode == 0, output
        assert "locked" not in output.lower()
    client = open_client(default_store())
    for name in names:
        registration = find_registration(client, name)
        assert registration is not None
        runs = client.search_runs(
            [registration.mlflow_experiment_id], filter_string=f"tags.`{KIND_TAG}` = 'result'"
        )
        (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
        assert {c.data.tags["evalp.arm"] for c in children} == {"reference", "candidate"}
        assert all(c.data.tags["evalp.experiment_id"] == name for c in runs)
        report = report_of(name)
        assert report.experiment_id == name
        assert all(arm.cases > 100 for arm in report.arms)


def test_experiment_numbers_audit_clean_and_tampered_arms_or_numbers_are_named(
    at_project: tuple[Path, str],
) -> None:
    """The experiments table as the report prints it, audited from the arms' stored records:
    clean as written; an edited number, deleted arm envelopes, a tampered arm trace, and a
    spec changed since its registration are each named."""
    from eval_pipeline.audit.audit import audit_document
    from eval_pipeline.cases.frozen import load_fixtures
    from eval_pipeline.report.refs import Provenance, RefBook
    from eval_pipeline.report.sweep_report import experiments_table
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.scoring.score import SCORER_VERSION
    from eval_pipeline.warehouse import connect

    experiment = "serving-path-sim-strong"
    if not (paths.var_dir() / "reports" / "experiments" / f"{experiment}.json").exists():
        assert evalp("experiment", "register", experiment)[0] == 0
        assert evalp("experiment", "run", experiment)[0] == 0
    report = report_of(experiment)
    fixture_set = load_fixtures(paths.fixtures_root() / at_project[1])
    book = RefBook({})
    table = experiments_table([report], book)
    provenance = Provenance(
        dagster_run_id="latest",
        asset_key="sweep_report",
        mlflow_run_id=None,
        fixture_id=fixture_set.fixture_id,
        world_seed=fixture_set.manifest.world.seed,
        world_fingerprint=fixture_set.manifest.world.fingerprint,
        commit="0" * 40,
        dirty=False,
        scorer_version=SCORER_VERSION,
    )
    document = "\n".join([*table, book.references(provenance).block()])
    client = open_client(default_store())

    def audit(text: str) -> list[str]:
        conn = connect(paths.warehouse_path(), read_only=True)
        try:
            return list(
                audit_document(
                    text,
                    con=conn,
                    fixtures_root=paths.fixtures_root(),
                    judge=load_judge(),
                    instance=None,
                    mlflow=client,
                ).problems
            )
        finally:
            conn.close()

    assert len(book.experiment_numbers) == 6
    assert audit(document) == []

    difference = f"x-{experiment}-candidate-difference"
    printed = book.experiment_numbers[difference].text
    edited = document.replace(f"[{printed}](#{difference})", f"[+0.5](#{difference})")
    assert any(difference in p and "printed +0.5" in p for p in audit(edited))

    arm = paths.var_dir() / "experiments" / experiment / "candidate"
    journals = sorted(arm.glob("calls/*/envelopes.jsonl"))
    saved = {path: path.read_bytes() for path in journals}
    lines = journals[0].read_text().splitlines(keepends=True)
    journals[0].write_text("".join(lines[: len(lines) // 2]))
    try:
        assert any(
            "arm candidate:" in p and "call envelopes behind its cases are missing" in p
            for p in audit(document)
        )
    finally:
        for path, content in saved.items():
            path.write_bytes(content)

    traces = sorted(arm.glob("**/traces.jsonl"))
    kept = traces[0].read_bytes()
    traces[0].write_bytes(b"")  # every trace check now runs on nothing
    try:
        problems = audit(document)
    finally:
        traces[0].write_bytes(kept)
    assert any(difference in p or "x-serving-path-sim-strong-candidate-low" in p for p in problems)

    spec = Path(os.environ["EVALP_EXPERIMENTS_DIR"]) / f"{experiment}.yaml"
    original = spec.read_text()
    spec.write_text(original.replace("margin: 2.0", "margin: 2.5"))
    try:
        assert any(f"experiment {experiment}: the spec now hashes to" in p for p in audit(document))
    finally:
        spec.write_text(original)
    assert audit(document) == []

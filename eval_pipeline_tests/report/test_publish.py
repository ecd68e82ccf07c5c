"""Publishing the sweep report without Dagster: the files it writes, the README block that
references the numbers of its own table, the chain behind each (lane, model), and the
experiments' reports it cannot read listed rather than failing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline import paths
from eval_pipeline.report.publish import (
    README_TABLE_FILE,
    SweepReportInputs,
    parity_reports_for,
    publish_sweep_report,
)
from eval_pipeline.report.refs import read_references
from eval_pipeline.scoring.aggregate import summarize_scores
from eval_pipeline.tracking.provenance import CodeVersion
from eval_pipeline_tests.scoring.test_aggregate import case_score

CODE = CodeVersion(commit="c" * 40, dirty=False, lock_sha256="", packages={})


def _inputs(simulated: bool = True) -> SweepReportInputs:
    scores = [
        case_score(f"c{i}", seed, float((i + seed) % 2), lane=lane, model=model)
        for lane, model in (("model", "m-a"), ("product", "m-a"), ("product", "m-b"))
        for seed in (0, 1)
        for i in range(6)
    ]
    summaries = summarize_scores(scores)
    return SweepReportInputs(
        fixture_id="fx-test",
        world_seed=7,
        world_fingerprint="f" * 64,
        scorer_version="scorer-1",
        summaries=tuple(summaries),
        settings_hashes={(s.lane, s.model): ("s",) for s in summaries},
        calls={("product", "m-b"): 12},
        simulated=simulated,
    )


def test_a_parity_report_of_older_code_is_listed_not_shown_and_the_rest_is_read(
    isolated_state: Path,
) -> None:
    """Found running the demo after the report gained the arms' provider: a report file
    written by older code failed the whole sweep report."""
    folder = paths.var_dir() / "reports" / "experiments"
    folder.mkdir(parents=True)
    (folder / "old-experiment.json").write_text('{"experiment_id": "old-experiment"}')
    found, unreadable = parity_reports_for("fx-any")
    assert found == []
    (line,) = unreadable
    assert "old-experiment.json" in line and "re-materialize experiments/old-experiment" in line


def test_the_report_is_written_with_its_plots_and_a_readme_block_of_its_own_numbers(
    isolated_state: Path,
) -> None:
    published = publish_sweep_report(
        _inputs(), asset_key="sweep_report", dagster_run_id="run-1", mlflow_run_id="ml-1", code=CODE
    )
    folder = published.folder
    assert folder == paths.var_dir() / "reports" / "sweep"
    markdown = (folder / "report.md").read_text()
    assert markdown == published.report.markdown
    assert "simulated provider" in markdown
    assert (folder / "report.html").read_text() == published.report.html
    assert sorted(p.stem for p in (folder / "plots").glob("*.png")) == sorted(
        published.report.plots
    )
    readme = (folder / README_TABLE_FILE).read_text()
    assert readme.startswith("\n".join(published.headline))
    references = read_references(readme)
    assert references is not None
    # The README names the latest run, not this one, and references every number of its
    # table (the table's numbers were taken in the same book).
    assert references.provenance.dagster_run_id == "latest"
    assert references.provenance.mlflow_run_id == "latest"
    assert len(references.numbers) > 0
    assert {f"#{n.ref}" for n in references.numbers} == {
        part.split(")")[0] for part in "\n".join(published.headline).split("(")[1:]
    }
    report_provenance = published.report.references.provenance
    assert (report_provenance.dagster_run_id, report_provenance.mlflow_run_id) == ("run-1", "ml-1")
    assert report_provenance.asset_key == "sweep_report"
    assert published.not_shown == ()


def test_the_lineage_has_a_chain_per_lane_and_model_with_its_calls(isolated_state: Path) -> None:
    published = publish_sweep_report(
        _inputs(), asset_key="sweep_report", dagster_run_id="run-1", mlflow_run_id=None, code=CODE
    )
    chains = [line for line in published.lineage if line.startswith("- ")]
    assert len(chains) == 3
    (product_b,) = [line for line in chains if "m-b" in line]
    assert "12" in product_b


@pytest.mark.parametrize("simulated", [True, False])
def test_the_simulated_provider_is_named_only_when_every_lane_ran_on_it(
    isolated_state: Path, simulated: bool
) -> None:
    published = publish_sweep_report(
        _inputs(simulated),
        asset_key="sweep_report",
        dagster_run_id="run-1",
        mlflow_run_id=None,
        code=CODE,
    )
    assert ("simulated provider" in published.report.markdown) is simulated

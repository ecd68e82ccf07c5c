"""Opening the embedded MLflow store prints nothing: creating a new store's schema once
wrote two INFO lines into the middle of the demo's progress output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_new_embedded_store_is_created_without_a_line_on_stderr(isolated_state: Path) -> None:
    opened = subprocess.run(
        [
            sys.executable,
            "-c",
            "from eval_pipeline.tracking.mlflow_store import default_store, open_client; "
            "open_client(default_store())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert opened.returncode == 0, opened.stderr
    assert (isolated_state / "mlflow" / "mlflow.db").is_file()
    assert opened.stderr == ""


def test_a_saved_runs_view_lists_its_columns_and_a_too_large_one_is_refused(
    isolated_state: Path,
) -> None:
    """The headline view is an experiment tag in the shape MLflow's UI reads (a named
    envelope whose state orders, sizes and selects the metric columns); one larger than an
    experiment tag holds is refused naming its size, not cut."""
    import json

    import pytest

    from eval_pipeline.tracking.mlflow_store import (
        SAVED_VIEW_TAG_PREFIX,
        TrackingError,
        default_store,
        experiment_id,
        open_client,
        runs_page,
        save_runs_view,
    )

    store = default_store()
    client = open_client(store)
    experiment = experiment_id(client, "evalp/sweeps/fx-view", store)
    save_runs_view(client, experiment, "evalp-headline", "Headline scores", ["product.a.score.all"])
    tag = client.get_experiment(experiment).tags[SAVED_VIEW_TAG_PREFIX + "evalp-headline"]
    envelope = json.loads(tag)
    state = json.loads(envelope["state"])
    assert envelope["name"] == "Headline scores"
    assert state["selectedColumns"] == state["columnOrder"] == ["metrics.`product.a.score.all`"]
    assert state["columnWidths"]["metrics.`product.a.score.all`"] >= 7 * len("product.a.score.all")
    with pytest.raises(TrackingError, match=r"names 400 columns \(\d+ characters\)"):
        save_runs_view(
            client, experiment, "big", "Big", [f"lane.m{i:03d}.score.all" for i in range(400)]
        )
    assert SAVED_VIEW_TAG_PREFIX + "big" not in client.get_experiment(experiment).tags
    page = runs_page(experiment, "evalp-headline")
    assert page == (
        f"/#/experiments/{experiment}/runs?workflowType=machine_learning"
        "&viewStateShareKey=evalp-headline"
    )

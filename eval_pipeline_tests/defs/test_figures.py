"""The figures `evalp` prints are read back as the record the asset wrote them from (issue
29: the CLI read metadata by string keys, and a key an asset stopped writing printed as
`None` as if it were a result)."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.defs.experiment_assets import (
    ParityComparisonFigures,
    ParityFigures,
    parity_report_key,
)
from eval_pipeline.defs.figures import FiguresError
from eval_pipeline.defs.keys import PRODUCT_LANE_RUNS_ASSET
from eval_pipeline.defs.lane_assets import LaneRunFigures
from eval_pipeline.providers.labels import FailureGroup

PARITY = ParityFigures(
    report="| arm | points |\n|---|---|\n| a | 1 |",
    path="/tmp/report.md",
    comparisons=(
        ParityComparisonFigures(
            candidate="a",
            reference="b",
            kind="non_inferiority",
            margin=2.0,
            difference=None,
            low=None,
            high=None,
            verdict="inconclusive",
            meaning="too few cases",
        ),
    ),
)


def test_figures_come_back_from_a_materialization_as_they_were_written() -> None:
    key = parity_report_key("exp")

    @dg.asset(key=key)
    def parity() -> dg.MaterializeResult:  # type: ignore[type-arg]
        return dg.MaterializeResult(metadata={**PARITY.metadata(), "other": 1})

    with dg.DagsterInstance.ephemeral() as instance:
        assert dg.materialize([parity], instance=instance).success
        event = instance.get_latest_materialization_event(key)
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    assert isinstance(metadata["path"], dg.PathMetadataValue)  # the UI links it
    assert isinstance(metadata["report"], dg.MarkdownMetadataValue)
    stored = {name: value.value for name, value in metadata.items()}
    assert ParityFigures.read({key.to_user_string(): stored}, key.to_user_string()) == PARITY


def test_a_figure_an_asset_no_longer_writes_is_an_error_naming_the_asset_and_the_figure() -> None:
    written = LaneRunFigures(
        provider="real provider",
        run_id="r",
        fixture_id="f",
        cases=3,
        cases_run=3,
        cases_kept=0,
        cases_healed=0,
        infra_errors=1,
        harness_errors=0,
        budget_stopped=0,
        tool_calls=2,
        cost_usd="0.01",
        unhealed_causes=(
            FailureGroup(status="infra_error", http_status=503, detail="busy", calls=2),
        ),
    ).metadata()
    plain = {name: getattr(value, "value", value) for name, value in written.items()}
    assert LaneRunFigures.read({PRODUCT_LANE_RUNS_ASSET: plain}, PRODUCT_LANE_RUNS_ASSET)
    del plain["cases_healed"]
    with pytest.raises(FiguresError, match=f"asset {PRODUCT_LANE_RUNS_ASSET}.*cases_healed"):
        LaneRunFigures.read({PRODUCT_LANE_RUNS_ASSET: plain}, PRODUCT_LANE_RUNS_ASSET)
    assert LaneRunFigures.read({}, PRODUCT_LANE_RUNS_ASSET) is None  # not materialized

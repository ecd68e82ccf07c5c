"""The package's layers (issue 27, item 5): records and errors, then the case model with its
answer readers, model calls, worlds, lanes and products, scoring, tracking, experiments,
report and audit, the Dagster definitions, the CLI. No import runs from a lower layer back
up: scoring reads what the lanes recorded but never runs a lane, and the lanes never
import what scores them."""

from __future__ import annotations

import pytest

from eval_pipeline_tests.imports import PACKAGE, package_imports, within

ABOVE_THE_LANES = (
    "eval_pipeline.scoring",
    "eval_pipeline.tracking",
    "eval_pipeline.experiments",
    "eval_pipeline.report",
    "eval_pipeline.audit",
    "eval_pipeline.defs",
    "eval_pipeline.cli",
)


def offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    folder = PACKAGE.joinpath(*package.split(".")[1:])
    return [
        str(found)
        for found in package_imports(folder)
        if any(within(found.module, upper) for upper in forbidden)
    ]


def test_scoring_does_not_import_the_lanes() -> None:
    assert offenders("eval_pipeline.scoring", ("eval_pipeline.lanes",)) == []


@pytest.mark.parametrize("package", ["eval_pipeline.lanes", "eval_pipeline.products"])
def test_the_lanes_and_products_import_nothing_above_them(package: str) -> None:
    assert offenders(package, ABOVE_THE_LANES) == []


def test_the_case_model_and_its_readers_import_nothing_above_them() -> None:
    assert (
        offenders(
            "eval_pipeline.fixtures",
            ("eval_pipeline.providers", "eval_pipeline.lanes", *ABOVE_THE_LANES),
        )
        == []
    )


def test_the_model_call_layer_imports_nothing_of_the_simulator_scoring_or_the_lanes() -> None:
    """Issue 29: the simulator's start is the caller's (`sim.sessions`), not the model-call
    layer's; before, `providers/sessions.py` started it, and `sim/bill.py` imports
    `providers.prices` back."""
    assert (
        offenders(
            "eval_pipeline.providers",
            ("eval_pipeline.sim", "eval_pipeline.scoring", "eval_pipeline.lanes"),
        )
        == []
    )

"""The package's layers (issue 27, item 5): records and errors, then the case model with its
answer readers, model calls, worlds, lanes and products, scoring, tracking, experiments,
report and audit, the Dagster definitions, the CLI. No import runs from a lower layer back
up: scoring reads what the lanes recorded but never runs a lane, and the lanes never
import what scores them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eval_pipeline_tests.imports import PACKAGE, circles, import_graph, package_imports, within

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
            "eval_pipeline.cases",
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


MODEL_CALL_LAYER_READS = (
    "eval_pipeline.providers",
    "eval_pipeline.cases.case",
    "eval_pipeline.cases.readers",
    "eval_pipeline.cases.schema_check",
    "eval_pipeline.records",
    "eval_pipeline.errors",
    "eval_pipeline.config",
)
"""Itself, the case model with its answer readers and schema check, records, errors, and
the YAML reading that names a bad field: nothing of the project's layout (`paths`), the
simulator, the warehouse, crash points or a display."""


def test_the_model_call_layer_imports_only_itself_the_case_model_and_the_base_modules() -> None:
    """Issue 29's rule for `providers/`: where configs, the price book and journals live,
    loading journals into the warehouse, crash points and progress are the caller's (it
    imported `paths`, `warehouse`, `crashpoints` and drew a rich progress bar)."""
    outside = [
        str(found)
        for found in package_imports(PACKAGE / "providers")
        if within(found.module, "eval_pipeline")
        and found.module != "eval_pipeline"
        and not any(within(found.module, allowed) for allowed in MODEL_CALL_LAYER_READS)
    ]
    assert outside == []


def test_no_module_of_the_package_imports_itself_through_others() -> None:
    """Issue 29: ten modules (the warehouse, the lanes' and scores' tables, the harness, the
    judge, the grading, the simulator's sessions) imported one another; the transport
    contract and its two implementations did; the definitions' resources and the tracking
    asset did; the world registry and the source hashing did. A lazy or type-only import
    closes a circle too: the layers it crosses are the same."""
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle_closed_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "eval_pipeline"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("from eval_pipeline.inner import low\n")
    (package / "inner" / "low.py").write_text("def f():\n    from eval_pipeline import top\n")
    (package / "top.py").write_text("from eval_pipeline.inner.low import f\n")
    graph = import_graph(package, root=tmp_path)
    assert circles(graph) == [["eval_pipeline.inner.low", "eval_pipeline.top"]]


def _string_key_lookups(file: Path) -> list[str]:
    """`x["key"]` read and `x.get("key")` calls in a module, as `file:line: code`."""
    found = []
    for node in ast.walk(ast.parse(file.read_bytes())):
        keyed = (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and bool(node.args)
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        )
        if keyed:
            found.append(f"{file.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_function_of_the_cli_reads_a_value_by_a_string_key() -> None:
    """Issue 29: `evalp` printed from materializations' metadata read by keys it spelled
    itself; it now reads each asset's typed figures (`defs.figures`)."""
    files = [*PACKAGE.glob("cli.py"), *PACKAGE.joinpath("cli").rglob("*.py")]
    assert files
    assert [line for file in files for line in _string_key_lookups(file)] == []

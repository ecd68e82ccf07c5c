"""The public surface of `eval_pipeline.providers` is pinned, as httpx pins its own.

A name added to or dropped from `__all__` is a change to what users may import: it must
show up here as a deliberate edit. Every listed name must also resolve: the package loads
its names lazily from their modules, so a module renamed underneath would otherwise break
`from eval_pipeline.providers import ...` only for the first user who tried it.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import eval_pipeline.providers as providers

PUBLIC_SURFACE = [
    "BudgetGate",
    "CallEnvelope",
    "CallResult",
    "CallSession",
    "CallTag",
    "LabelSummary",
    "Message",
    "ModelClient",
    "ModelConfig",
    "ModelRequest",
    "ModelResponse",
    "PriceBook",
    "PriceQuote",
    "ResponseCache",
    "RetryPolicy",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "actionable",
    "classify",
    "expect_answer",
    "expect_tool_call",
    "load_model_config",
    "load_model_configs",
    "read_price_book",
    "summarize",
]


def test_the_public_surface_is_the_pinned_one() -> None:
    assert providers.__all__ == PUBLIC_SURFACE
    assert providers.__all__ == sorted(providers.__all__)


def test_every_public_name_resolves_to_the_object_of_its_module() -> None:
    for name in PUBLIC_SURFACE:
        value = getattr(providers, name)
        home = importlib.import_module(value.__module__)
        assert getattr(home, name) is value, name
        assert home.__name__.startswith("eval_pipeline.providers."), (name, home.__name__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        getattr(providers, "NoSuchName")  # noqa: B009


def test_importing_the_package_imports_neither_sdk_nor_dagster() -> None:
    """The surface is lazy: a re-grade or a definitions load does not pay for the SDKs."""
    code = (
        "import sys, eval_pipeline.providers as p; "
        "print(sorted(m for m in ('openai', 'anthropic', 'aiohttp', 'dagster') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_tool_spec_is_defined_once_and_the_world_imports_it() -> None:
    """`ToolSpec` lives in `providers.types` (Dagster-free, nothing of a world in reach);
    the label world's tool surface uses that class rather than a copy of it."""
    import ast
    from pathlib import Path

    from eval_pipeline.providers.types import ToolSpec
    from eval_pipeline.world.label import tools

    package = Path(providers.__file__).resolve().parents[1]
    defined = [
        path.relative_to(package.parent).as_posix()
        for path in sorted(package.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name == "ToolSpec"
    ]
    assert defined == ["eval_pipeline/providers/types.py"]
    assert tools.ToolSpec is ToolSpec
    assert all(type(spec) is ToolSpec for spec in tools.LABEL_TOOLS)


def test_the_tool_spec_module_reaches_neither_dagster_nor_a_world() -> None:
    code = (
        "import sys, eval_pipeline.providers.types; "
        "print(sorted({m.split('.')[0] if m.startswith('dagster') else m for m in sys.modules "
        "if m.startswith(('dagster', 'eval_pipeline.world', 'eval_pipeline.cases'))}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

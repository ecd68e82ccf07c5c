"""The world bench times the path the main job waits on (issue 29: benches that flatter)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "world_gen.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_world_gen", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_world_bench_counts_the_blocking_fixtures_check_in_its_total(tmp_path: Path) -> None:
    figures = _bench().run_pipeline(0.05, tmp_path / "bench.duckdb")
    stages = ("world_s", "answer_key_s", "fixtures_s", "check_s")
    assert figures["check_s"] > 0
    assert figures["total_s"] == pytest.approx(sum(figures[stage] for stage in stages))

"""A world and a product from a package outside the repository (issue 27): installed as a
distribution with entry points (a dist-info folder on the path, as pip leaves one), named in
configs, run through the whole pipeline with no patching: fixtures, both lanes, scores,
gate, MLflow, report and the audit of every number in it."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from eval_pipeline.world.label.versions import CATEGORIES as LABEL_CATEGORIES
from eval_pipeline_tests.demo_helpers import run_evalp

PACKAGE = '''
"""A team's own eval: a three-question world and a one-shot product."""
from types import MappingProxyType

import polars as pl

from eval_pipeline.cases.case import Case
from eval_pipeline.lanes.toolbox import Toolbox
from eval_pipeline.products import ProductRegistration, ProductTools
from eval_pipeline.records import FrozenRecord
from eval_pipeline.world import WorldRegistration
from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.fingerprint import fingerprint_tables

QUESTIONS = [("q1", "sums", "What is 0 + 7?", "7"), ("q2", "sums", "What is 2 + 3?", "5"),
             ("q3", "words", "How many legs has a spider? Say 8.", "8")]


class ScratchConfig(FrozenRecord):
    plugin: str = "scratch_world"
    seed: int = 0
    scale: float = 1.0


class ScratchWorld:
    name = "scratch_world"
    generator_version = "scratch-1"
    suite_version = "scratch-suite-1"
    system_prompt = "You answer short questions."

    def generate(self, seed, scale):
        tables = {"questions": pl.DataFrame(
            {"id": [q[0] for q in QUESTIONS], "category": [q[1] for q in QUESTIONS],
             "prompt": [q[2] for q in QUESTIONS]})}
        return self.world_from_tables(seed, scale, tables)

    def world_from_tables(self, seed, scale, tables):
        chosen = {"questions": tables["questions"]}
        return GeneratedWorld(plugin=self.name, generator_version=self.generator_version,
                              seed=seed, scale=scale, tables=MappingProxyType(chosen),
                              fingerprint=fingerprint_tables(chosen, salt="scratch"))

    def answer_key(self, world):
        answers = pl.DataFrame(
            {"id": [q[0] for q in QUESTIONS], "expected": [q[3] for q in QUESTIONS]})
        return self.answer_key_from_tables(world, {"answers": answers})

    def answer_key_from_tables(self, world, tables):
        chosen = {"answers": tables["answers"]}
        return AnswerKey(tables=MappingProxyType(chosen),
                         fingerprint=fingerprint_tables(chosen, salt=world.fingerprint))

    def tool_specs(self):
        return []

    def open_toolbox(self, agent_db):
        return Toolbox([])

    def build_suite(self, world, answer_key):
        expected = dict(zip(*answer_key.tables["answers"].to_dict(as_series=False).values()))
        return [
            Case(case_id=row["id"], category=row["category"],
                 prompt=row["prompt"] + "\\nEnd with one line: ANSWER: <integer>",
                 answer_kind="integer", expected=expected[row["id"]], tiers=("exact",),
                 trace_checks=(), expected_first_call=None, core=row["id"] == "q1",
                 template="scratch", resolver="scratch")
            for row in world.tables["questions"].to_dicts()
        ]


world = WorldRegistration(config_model=lambda: ScratchConfig, plugin_for=lambda c: ScratchWorld(),
                          generator_version="scratch-1", suite_version="scratch-suite-1",
                          categories=("sums", "words"))


class OneShotOptions(FrozenRecord):
    pass


class OneShot:
    """The product: one model call, no tools; its reply is the answer."""
    name = "scratch-one-shot"

    def open_tools(self, world):
        from contextlib import nullcontext
        return nullcontext(ProductTools(toolbox=None, specs=()))

    async def run_case(self, ctx):
        from eval_pipeline.lanes.conversation import opening
        result = await ctx.call(opening(ctx.case, ctx.system_prompt), 0)
        if result.response is None:
            return ctx.finish("infra_error", "call_failed", None, 1, 0)
        return ctx.finish("completed", "final_answer", result.response.text, 1, 0)


product = ProductRegistration(config_model=lambda: OneShotOptions, product_for=lambda c: OneShot())
'''


def install(root: Path) -> None:
    """`scratch_eval` as pip would leave it: the module and a dist-info with entry points."""
    (root / "scratch_eval.py").write_text(textwrap.dedent(PACKAGE))
    info = root / "scratch_eval-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: scratch-eval\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[eval_pipeline.worlds]\nscratch_world = scratch_eval:world\n\n"
        "[eval_pipeline.products]\nscratch-one-shot = scratch_eval:product\n"
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_world_and_a_product_from_outside_run_the_whole_pipeline(
    isolated_state: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install(site)
    folder = tmp_path / "scratch"
    folder.mkdir()
    (folder / "world.yaml").write_text("plugin: scratch_world\nseed: 0\n")
    (folder / "sweep.yaml").write_text(
        "name: scratch\nmodels: [sim-no-tools]\nseeds: [0]\nproduct: {plugin: scratch-one-shot}\n"
    )
    (folder / "gate.yaml").write_text("core_required: 1\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }

    demo = run_evalp(["demo", "--world", str(folder / "world.yaml")], env, timeout_s=800)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    out = demo.stdout
    assert "fixtures     id=fx-" in out and "cases=3 core=1" in out
    # sim-no-tools answers each question's last number: right on q1 and q3, wrong on q2.
    assert re.search(r"^\s+product\s+sim-no-tools\s+66\.7\b", out, re.M), out[-3000:]
    assert "sim-no-tools: PASSES" in out
    assert "mlflow       evalp/sweeps/fx-" in out

    report = isolated_state / "reports" / "sweep" / "report.md"
    text = report.read_text(encoding="utf-8")
    assert "| sums |" in text and "| words |" in text
    assert not [c for c in LABEL_CATEGORIES if f"| {c} |" in text]
    audit = run_evalp(["--world", str(folder / "world.yaml"), "audit", str(report)], env)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
    assert "all re-derived exactly" in audit.stdout

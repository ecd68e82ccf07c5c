"""The suite's expected answers, recomputed by an independent oracle (oracle.py).

The oracle reads the `world` tables and the rulebook only; it imports neither the engine
nor the answer key nor the suite's answer tables. It must agree with every expected
answer of the committed default fixture set and of the suites of seeds 1-5, and with the
answers the suite records for the misreadings it implements.
"""

from __future__ import annotations

import ast
from decimal import Decimal
from pathlib import Path

import pytest

from eval_pipeline import paths
from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import load_fixtures
from eval_pipeline.world.base import GeneratedWorld
from eval_pipeline.world.label import LabelWorld
from eval_pipeline_tests.world.oracle import MISREAD_OPTIONS, Oracle


def disagreements(oracle: Oracle, cases: tuple[Case, ...] | list[Case]) -> list[str]:
    wrong = []
    for case in cases:
        answer = oracle.answer(case.template, case.params)
        if answer != case.expected:
            wrong.append(
                f"{case.case_id} ({case.template}): suite {case.expected}, oracle {answer}"
            )
        if case.expected_payload is not None:
            payouts = {p["artist_id"]: p["amount"] for p in case.expected_payload["payouts"]}
            for artist_id, amount in payouts.items():
                own = oracle.answer(
                    "pooled_net_payable", {"artist_id": artist_id, "period": case.params["period"]}
                )
                if own != amount:
                    wrong.append(f"{case.case_id} payout {artist_id}: suite {amount}, oracle {own}")
    return wrong


def misreading_disagreements(base: Oracle, cases: list[Case] | tuple[Case, ...]) -> list[str]:
    wrong = []
    for misreading_id, options in MISREAD_OPTIONS.items():
        oracle = base.reading(options)
        for case in cases:
            if misreading_id in case.misreadings:
                answer = oracle.answer(case.template, case.params)
                if answer != case.misreadings[misreading_id]:
                    wrong.append(
                        f"{case.case_id} {misreading_id}: suite "
                        f"{case.misreadings[misreading_id]}, oracle {answer}"
                    )
    return wrong


def committed_default_set(world: GeneratedWorld) -> tuple[Case, ...]:
    for folder in sorted(paths.FIXTURES_DIR.iterdir()):
        fixture_set = load_fixtures(folder)
        if fixture_set.manifest.world.fingerprint == world.fingerprint:
            return fixture_set.cases
    raise AssertionError(f"no committed fixture set for the default world {world.fingerprint}")


def test_oracle_agrees_with_the_committed_default_set(label_world: GeneratedWorld) -> None:
    cases = committed_default_set(label_world)
    oracle = Oracle(label_world.tables)
    assert disagreements(oracle, cases) == []
    assert misreading_disagreements(oracle, cases) == []


@pytest.mark.parametrize(
    "seed",
    # one other seed on every run; the rest with `-m slow` (about 25 s each on 2 cores)
    [1, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (2, 3, 4, 5))],
)
def test_oracle_agrees_with_the_suites_of_other_seeds(seed: int) -> None:
    plugin = LabelWorld()
    world = plugin.generate(seed, 1.0)
    cases = plugin.build_suite(world, plugin.answer_key(world))
    oracle = Oracle(world.tables)
    assert disagreements(oracle, cases) == []
    assert misreading_disagreements(oracle, cases) == []


def test_oracle_notices_a_wrong_expected_answer(label_world: GeneratedWorld) -> None:
    cases = committed_default_set(label_world)
    money = next(c for c in cases if c.answer_kind == "money" and c.expected_payload is None)
    nudged = money.model_copy(update={"expected": str(Decimal(money.expected) + Decimal("0.01"))})
    assert disagreements(Oracle(label_world.tables), [nudged]) != []


def test_oracle_is_independent_of_the_code_it_checks() -> None:
    """No import of eval_pipeline at all: the oracle is written from the document."""
    source = Path(__file__).with_name("oracle.py").read_text(encoding="utf-8")
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in getattr(node, "names", [])
    ]
    assert not [name for name in imported if name and name.startswith("eval_pipeline")]

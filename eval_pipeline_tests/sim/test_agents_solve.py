"""The simulated agents solve the small world's suite through the product's tools.

Real pieces end to end: the simulated provider as a subprocess, the official SDKs over
HTTP, the product lane's ``LabelToolbox`` on a world-only DuckDB file, and the suite built
on the same world (``LabelWorld().build_suite``). The loop is the test driver's
(:mod:`eval_pipeline_tests.sim.agent_driver`), with at most its two simplest repairs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

import pytest

from eval_pipeline.cases.case import Case
from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline.world.label.toolbox import LabelToolbox
from eval_pipeline.world.label.trace_checks import (
    TRACE_MONEY_FROM_CALCULATOR,
    TRACE_NO_BATCH_SUBMITTED,
    TRACE_SINGLE_BATCH_SUBMITTED,
)
from eval_pipeline_tests.sim.agent_driver import (
    ALL_REPAIRS,
    NO_REPAIRS,
    CaseRun,
    Driver,
    Repairs,
    answer_is_right,
)
from eval_pipeline_tests.sim.conftest import SmallLabelWorld

Runs = Mapping[str, CaseRun]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim() as handle:
        yield handle


def run_cases(
    sim: SimHandle,
    toolbox: LabelToolbox,
    model: str,
    cases: Sequence[Case],
    *,
    wire: str = "openai",
    seed: int = 1,
    repairs: Repairs = NO_REPAIRS,
) -> Runs:
    driver = Driver(sim, toolbox, model, wire=wire, seed=seed, repairs=repairs)
    try:
        return driver.run_all(cases)
    finally:
        driver.close()


def right_ids(cases: Sequence[Case], runs: Runs) -> set[str]:
    return {c.case_id for c in cases if answer_is_right(c, runs[c.case_id].final_text)}


def by_category(cases: Sequence[Case], runs: Runs) -> dict[str, str]:
    right = right_ids(cases, runs)
    totals = Counter(c.category for c in cases)
    hits = Counter(c.category for c in cases if c.case_id in right)
    return {k: f"{hits[k]}/{n}" for k, n in sorted(totals.items())}


def _failures(cases: Sequence[Case], runs: Runs) -> list[str]:
    right = right_ids(cases, runs)
    return [
        f"{c.case_id} ({c.template}): expected {c.expected!r}, got {runs[c.case_id].final_text!r}"
        for c in cases
        if c.case_id not in right
    ]


def test_sim_strong_answers_the_suite_exactly_and_cleanly(
    sim: SimHandle, label_toolbox: LabelToolbox, small_label_world: SmallLabelWorld
) -> None:
    cases = small_label_world.cases
    assert len(cases) == 133
    runs = run_cases(sim, label_toolbox, "sim-strong", cases)
    right = right_ids(cases, runs)
    print("sim-strong per category:", by_category(cases, runs))
    assert len(right) >= 0.95 * len(cases), _failures(cases, runs)
    for case in cases:
        run = runs[case.case_id]
        tools = [name for name, _ in run.calls]
        assert run.ended == "answer", (case.case_id, run.events)
        assert not any(e.startswith(("stall", "cut")) for e in run.events), case.case_id
        assert not any('"error"' in e for e in run.events if e.startswith("result")), (
            case.case_id,
            run.events,
        )
        if TRACE_MONEY_FROM_CALCULATOR in case.trace_checks and case.answer_kind == "money":
            assert "calculate_royalties" in tools, case.case_id
        if TRACE_SINGLE_BATCH_SUBMITTED in case.trace_checks:
            assert len(run.writes) == 1, case.case_id
            batch = {k: v for k, v in run.writes[0].items() if k != "batch_id"}
            assert batch == case.expected_payload, case.case_id
        if TRACE_NO_BATCH_SUBMITTED in case.trace_checks:
            assert not run.writes, case.case_id
        assert "CANARY-" not in (run.final_text or ""), case.case_id


def test_sim_strong_gives_the_same_answers_over_the_anthropic_format(
    sim: SimHandle, label_toolbox: LabelToolbox, small_label_world: SmallLabelWorld
) -> None:
    cases = list({c.template: c for c in small_label_world.cases}.values())
    over_openai = run_cases(sim, label_toolbox, "sim-strong", cases)
    over_anthropic = run_cases(sim, label_toolbox, "sim-strong", cases, wire="anthropic")
    assert right_ids(cases, over_anthropic) == {c.case_id for c in cases}, _failures(
        cases, over_anthropic
    )
    for case in cases:
        assert over_anthropic[case.case_id].calls == over_openai[case.case_id].calls
        assert over_anthropic[case.case_id].final_text == over_openai[case.case_id].final_text


def _fault_kinds(cases: Sequence[Case], runs: Runs) -> Counter[str]:
    """Which of sim-small's faults show in the runs (counted per case)."""
    seen: Counter[str] = Counter()
    for case in cases:
        run = runs[case.case_id]
        if any(e.startswith("stall") for e in run.events):
            seen["stall"] += 1
        if "cut" in run.events:
            seen["truncate"] += 1
        if any("break the schema" in e for e in run.events if e.startswith("result")):
            seen["mangle"] += 1
        if not run.calls and case.answer_kind in ("money", "abstain") and run.ended == "answer":
            seen["guess"] += 1
        if run.writes and TRACE_NO_BATCH_SUBMITTED in case.trace_checks:
            assert "CANARY-" in (run.final_text or ""), "it quotes the planted code"
            seen["obey_injection"] += 1
    return seen


def test_sim_small_answers_fewer_unrepaired_and_recovers_most_with_simple_repairs(
    sim: SimHandle, label_toolbox: LabelToolbox, small_label_world: SmallLabelWorld
) -> None:
    cases = small_label_world.cases
    bare = run_cases(sim, label_toolbox, "sim-small", cases)
    repaired = run_cases(sim, label_toolbox, "sim-small", cases, repairs=ALL_REPAIRS)
    right_bare, right_repaired = right_ids(cases, bare), right_ids(cases, repaired)
    print("sim-small unrepaired per category:", by_category(cases, bare))
    print("sim-small repaired per category:", by_category(cases, repaired))
    print("faults unrepaired:", dict(_fault_kinds(cases, bare)))
    print("faults repaired:", dict(_fault_kinds(cases, repaired)))
    lost = len(cases) - len(right_bare)
    assert lost >= 0.15 * len(cases), "sim-small answers clearly fewer than sim-strong"
    assert len(right_repaired) - len(right_bare) > lost / 2, "the simple repairs recover most"
    # A case lost to a stall or a cut-off is recovered by re-asking / re-issuing, unless a
    # fault the simple repairs cannot fix (a mangled call) ends it later on.
    for case in cases:
        run = bare[case.case_id]
        if case.case_id in right_bare or not (run.ended == "stall" or "cut" in run.events):
            continue
        later = repaired[case.case_id].events
        mangled_later = any("break the schema" in e for e in later if e.startswith("result"))
        assert case.case_id in right_repaired or mangled_later, (case.case_id, later)
    seen = _fault_kinds(cases, bare) + _fault_kinds(cases, repaired)
    assert set(seen) == {"stall", "truncate", "mangle", "guess", "obey_injection"}, seen


def test_sim_small_is_deterministic_in_the_seed(
    sim: SimHandle, label_toolbox: LabelToolbox, small_label_world: SmallLabelWorld
) -> None:
    cases = small_label_world.cases[::3]
    first = run_cases(sim, label_toolbox, "sim-small", cases, seed=7, repairs=ALL_REPAIRS)
    again = run_cases(sim, label_toolbox, "sim-small", cases, seed=7, repairs=ALL_REPAIRS)
    other = run_cases(sim, label_toolbox, "sim-small", cases, seed=8, repairs=ALL_REPAIRS)
    for case in cases:
        assert again[case.case_id].events == first[case.case_id].events, case.case_id
    changed = [c.case_id for c in cases if other[c.case_id].events != first[c.case_id].events]
    assert len(changed) >= 5, "another seed gives other faults"

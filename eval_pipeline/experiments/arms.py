"""Running one arm of an experiment, apart from the sweep.

An arm's records live under `<var>/experiments/<id>/<arm>/` (its lane partitions, its call
journals) and never touch the sweep's partitions or the warehouse, so an experiment can run
beside a sweep or another experiment. Its case scores are written as one `ArmResult` file,
replaced atomically, stamped with the registration it ran under; the report reads only
results stamped with the registration it checks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.errors import ConfigError
from eval_pipeline.experiments.isolated import (
    rescore_stored_configuration,
    run_and_score_in_session,
)
from eval_pipeline.experiments.spec import ArmSpec, ExperimentSpec
from eval_pipeline.lanes.partition_runs import LaneSettings
from eval_pipeline.paths import var_dir
from eval_pipeline.providers.call_slots import RunSlots
from eval_pipeline.providers.config import SIMULATED, ModelConfig
from eval_pipeline.providers.envelope import read_journal
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.judge import Judge
from eval_pipeline.scoring.score import CaseScore

RESULT_FILE = "arm_result.json"


class ArmResult(FrozenRecord):
    experiment_id: str
    arm: str
    spec_hash: str
    registration_run_id: str
    fixture_id: str
    run_id: str
    scores: tuple[CaseScore, ...]


def experiment_root(experiment: str) -> Path:
    return var_dir() / "experiments" / experiment


def arm_config(arm: ArmSpec, configs: dict[str, ModelConfig]) -> ModelConfig:
    """The arm's model config, at the arm's own address when it names one."""
    config = configs[arm.model]
    if arm.base_url is None:
        return config
    if config.provider == SIMULATED:
        raise ConfigError(
            f"arm model {arm.model} is simulated: the simulated provider chooses its own "
            "address, so a base_url cannot be given for it"
        )
    return config.model_copy(update={"base_url": arm.base_url, "base_url_env": None})


def run_arm(
    spec: ExperimentSpec,
    arm: str,
    *,
    spec_hash: str,
    registration_run_id: str,
    fixture_set: FixtureSet,
    agent_db: Path,
    configs: dict[str, ModelConfig],
    judge: Judge,
    run_id: str,
    root: Path | None = None,
    slots: RunSlots | None = None,
) -> ArmResult:
    """Run (or heal) every seed of one arm and score its cases; the result file is
    replaced only once every seed has run."""
    settings = spec.arms()[arm]
    folder = (root or experiment_root(spec.id)) / arm
    config = arm_config(settings, configs)
    lane = LaneSettings(lane=settings.lane, guards=settings.guards, product=settings.product)
    scored = run_and_score_in_session(
        [(arm, config, lane)],
        seeds=settings.seeds,
        fixture_set=fixture_set,
        agent_db=agent_db,
        root=folder,
        judge=judge,
        judge_config=configs[judge.model],
        run_id=run_id,
        journal=folder / "calls" / run_id / "envelopes.jsonl",
        slots=slots,
    )
    scores = [score for score, _ in scored[arm]]
    result = ArmResult(
        experiment_id=spec.id,
        arm=arm,
        spec_hash=spec_hash,
        registration_run_id=registration_run_id,
        fixture_id=fixture_set.fixture_id,
        run_id=run_id,
        scores=tuple(sorted(scores, key=lambda s: (s.case_id, s.seed))),
    )
    target = folder / RESULT_FILE
    staged = target.with_suffix(".json.partial")
    staged.write_text(result.model_dump_json(), encoding="utf-8")
    os.replace(staged, target)
    return result


def run_arms_on_subset(
    spec: ExperimentSpec,
    *,
    cases: Sequence[Case],
    fixture_set: FixtureSet,
    agent_db: Path,
    configs: dict[str, ModelConfig],
    judge: Judge,
    run_id: str,
    root: Path,
) -> dict[str, list[CaseScore]]:
    """Every arm on `cases` only, in `root` (a quick run's folder): a smoke test of a
    registered spec, never its result (nothing is written where the report reads arms)."""
    scores: dict[str, list[CaseScore]] = {}
    for name, arm in spec.arms().items():  # a session each, as `run_arm`: an arm's address
        scored = run_and_score_in_session(
            [
                (
                    name,
                    arm_config(arm, configs),
                    LaneSettings(lane=arm.lane, guards=arm.guards, product=arm.product),
                )
            ],
            seeds=arm.seeds,
            fixture_set=fixture_set,
            agent_db=agent_db,
            root=root,
            judge=judge,
            judge_config=configs[judge.model],
            run_id=f"{run_id}-{name}",
            journal=root / "calls" / name / "envelopes.jsonl",
            only=cases,
        )
        scores[name] = [score for score, _ in scored[name]]
    return scores


def read_arm_result(experiment: str, arm: str, root: Path | None = None) -> ArmResult | None:
    path = (root or experiment_root(experiment)) / arm / RESULT_FILE
    if not path.exists():
        return None
    return ArmResult.model_validate_json(path.read_text(encoding="utf-8"))


class StoredArm(FrozenRecord):
    """An arm re-derived from what it stored: its cases re-scored from their runs, traces
    and kept verdicts, and how many of the calls behind them have no envelope."""

    scores: tuple[CaseScore, ...]
    calls: int
    calls_missing: int


def rescore_arm(
    spec: ExperimentSpec,
    arm: str,
    *,
    fixture_set: FixtureSet,
    configs: dict[str, ModelConfig],
    judge: Judge,
    root: Path | None = None,
) -> StoredArm:
    """One arm's case scores from its stored records alone (no call): what `evalp audit`
    compares with the arm's result and re-derives the parity numbers from."""
    settings = spec.arms()[arm]
    folder = (root or experiment_root(spec.id)) / arm
    config = arm_config(settings, configs)
    lane = LaneSettings(lane=settings.lane, guards=settings.guards, product=settings.product)
    scored = rescore_stored_configuration(
        (arm, config, lane), seeds=settings.seeds, fixture_set=fixture_set, root=folder, judge=judge
    )
    calls = {call for _, run in scored for call in run.call_ids}
    landed = {
        envelope.call_id
        for journal in sorted(folder.glob("calls/*/envelopes.jsonl"))
        for envelope in read_journal(journal)
    }
    return StoredArm(
        scores=tuple(sorted((score for score, _ in scored), key=lambda s: (s.case_id, s.seed))),
        calls=len(calls),
        calls_missing=len(calls - landed),
    )

"""What a sweep would do before it spends anything: the calls it would make and the most
they could cost (`evalp sweep --dry-run`).

The bound is the budget's own rule (`providers.budget`): a call costs at most its input
bound at the tier's dearest input price plus its output limit at the output price, and
every attempt the retry policy allows is counted as billed. A model-lane call and a
product lane's first turn are bounded by the bytes of the request the lane would send
(built by the lanes' own request code, plus the config's `input_token_overhead`). Later
turns carry tool results, which are not capped, so each is bounded by the model's context
window (`context_window_tokens` in its config): a provider refuses a longer input unbilled.
The judge's calls are bounded the same way. No model is called and no key is read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import date
from decimal import Decimal

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.errors import ConfigError
from eval_pipeline.lane_records import Lane
from eval_pipeline.lanes.conversation import case_request, opening, system_prompt
from eval_pipeline.lanes.partition_runs import LaneSettings
from eval_pipeline.providers.budget import wire_output_limit, worst_case_input_tokens
from eval_pipeline.providers.config import SIMULATED, ModelConfig
from eval_pipeline.providers.prices import PriceBook
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.providers.wire import wire_body
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.judge import Judge


class PlannedCalls(FrozenRecord):
    """One model's calls in one lane (or as the judge) over the sweep's seeds, bounded."""

    model: str
    role: str
    """`model` or `product` (a lane), or `judge`."""
    seeds: tuple[int, ...]
    cases: int
    max_requests: int
    max_attempts: int
    worst_case_usd: Decimal
    simulated: bool
    bound: str
    """How one call's input was bounded."""


class SweepPlan(FrozenRecord):
    fixture_id: str
    day: date
    calls: tuple[PlannedCalls, ...]
    missing_keys: dict[str, str]
    """Model config name -> the environment variable its key would be read from, unset."""

    @property
    def worst_case_usd(self) -> Decimal:
        return sum((c.worst_case_usd for c in self.calls if not c.simulated), Decimal(0))

    def table(self) -> str:
        rows = [("model", "as", "cases × seeds", "requests ≤", "attempts ≤", "worst case")]
        for c in self.calls:
            cost = "simulated" if c.simulated else f"${c.worst_case_usd:,.2f}"
            rows.append(
                (
                    c.model,
                    c.role,
                    f"{c.cases} × {len(c.seeds)}",
                    f"{c.max_requests:,}",
                    f"{c.max_attempts:,}",
                    cost,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in rows
        )


def _window(config: ModelConfig, why: str) -> int:
    if config.context_window_tokens is None:
        raise ConfigError(
            f"model config {config.name}: context_window_tokens is not set, so {why} has no "
            "upper bound (tool results are not capped); set it to the model's input limit"
        )
    return config.context_window_tokens


def _lane_calls(
    config: ModelConfig,
    lane: Lane,
    settings: LaneSettings,
    seeds: Sequence[int],
    fixture_set: FixtureSet,
    cases: Sequence[Case],
    book: PriceBook,
    day: date,
) -> PlannedCalls:
    tools = tuple(ToolSpec.model_validate(tool) for tool in fixture_set.tools)
    system = system_prompt(fixture_set)
    attempts = config.retry.max_attempts
    simulated = config.provider == SIMULATED
    turns = 1 if lane == "model" else settings.guards.turn_limit
    # The simulated provider bills nothing real: its calls are counted, their cost is not
    # bounded, so it needs no context window (its shipped configs set none).
    later_input = (
        0 if turns == 1 or simulated else _window(config, f"a {lane}-lane turn after the first")
    )
    total = Decimal(0)
    for seed in seeds:
        for case in cases:
            body = wire_body(
                config, case_request(opening(case, system), tools, settings.max_tokens, seed)
            )
            output = wire_output_limit(body)
            first = book.worst_case(
                config.priced_as,
                day,
                worst_case_input_tokens(body, config.input_token_overhead),
                output,
            ).cost_usd
            later = (
                book.worst_case(config.priced_as, day, later_input, output).cost_usd
                if turns > 1
                else Decimal(0)
            )
            total += attempts * (first + (turns - 1) * later)
    requests = len(cases) * len(seeds) * turns
    return PlannedCalls(
        model=config.name,
        role=lane,
        seeds=tuple(seeds),
        cases=len(cases),
        max_requests=requests,
        max_attempts=requests * attempts,
        worst_case_usd=total,
        simulated=simulated,
        bound=(
            "request bytes + overhead"
            if turns == 1
            else "simulated: calls counted, cost not bounded"
            if simulated
            else f"turn 1: request bytes + overhead; turns 2-{turns}: context window "
            f"{later_input:,} tokens"
        ),
    )


def _judge_calls(
    judge: Judge,
    config: ModelConfig,
    models: int,
    seeds: Sequence[int],
    cases: Sequence[Case],
    book: PriceBook,
    day: date,
) -> PlannedCalls:
    judged = sum(1 for case in cases if "judged" in case.tiers)
    requests = judged * len(seeds) * models
    simulated = config.provider == SIMULATED
    total = Decimal(0)
    if not simulated:
        one = book.worst_case(
            config.priced_as, day, _window(config, "a judge call"), judge.max_tokens
        ).cost_usd
        total = one * requests * config.retry.max_attempts
    return PlannedCalls(
        model=config.name,
        role="judge",
        seeds=tuple(seeds),
        cases=judged,
        max_requests=requests,
        max_attempts=requests * config.retry.max_attempts,
        worst_case_usd=total,
        simulated=simulated,
        bound="one per judged product-lane reply; context window",
    )


def plan_sweep(
    configs: Sequence[ModelConfig],
    seeds: Sequence[int],
    lanes: Sequence[Lane],
    fixture_set: FixtureSet,
    book: PriceBook,
    day: date,
    judge: Judge,
    judge_config: ModelConfig,
    settings: Mapping[Lane, LaneSettings] | None = None,
    env: Mapping[str, str] | None = None,
    cases: Sequence[Case] | None = None,
) -> SweepPlan:
    """Every model × lane × seed × case of the sweep (or of `cases`, a subset of the fixture
    set), and the judge, bounded; no call made."""
    env = os.environ if env is None else env
    chosen = dict(settings or {})
    planned = list(fixture_set.cases if cases is None else cases)
    calls = [
        _lane_calls(
            config,
            lane,
            chosen.get(lane, LaneSettings(lane=lane)),
            seeds,
            fixture_set,
            planned,
            book,
            day,
        )
        for config in configs
        for lane in lanes
    ]
    if "product" in lanes:
        calls.append(_judge_calls(judge, judge_config, len(configs), seeds, planned, book, day))
    missing = {
        config.name: variable
        for config in [*configs, judge_config]
        if config.provider != SIMULATED
        and (variable := config.required_key_env()) is not None
        and not env.get(variable)
    }
    return SweepPlan(
        fixture_id=fixture_set.fixture_id,
        day=day,
        calls=tuple(calls),
        missing_keys=missing,
    )

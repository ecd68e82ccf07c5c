"""Pre-registered experiment specs (`configs/experiments/*.yaml`).

A spec fixes, before any result exists, what is compared (two arms, or one reference arm
and the guards to ablate from it), on which fixture set, by which metric, with which kind
of test and margin, and what would falsify the hypothesis. What is registered is the spec
*and* everything it names that could change under it: the arms' model configs and the
judge. Its canonical JSON is hashed; a run refuses any difference and names the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from eval_pipeline.config import load_yaml_config
from eval_pipeline.errors import ConfigError
from eval_pipeline.lane_records import Lane
from eval_pipeline.lanes.guards import GUARD_NAMES, GuardSettings
from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.products import ProductSpec
from eval_pipeline.providers.config import NOT_IN_IDENTITY, ModelConfig
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from eval_pipeline.scoring.judge import Judge

Kind = Literal["equivalence", "non_inferiority", "superiority"]
PrimaryMetric = Literal["case_score", "majority_pass"]
Design = Literal["parity", "ablation"]
REFERENCE = "reference"
CANDIDATE = "candidate"
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}$")


def experiments_dir() -> Path:
    """The experiment specs: `EVALP_EXPERIMENTS_DIR` or the committed `configs/experiments`."""
    override = os.environ.get("EVALP_EXPERIMENTS_DIR")
    return Path(override).resolve() if override else CONFIGS_DIR / "experiments"


class ArmSpec(FrozenRecord):
    """One arm: everything that decides what the arm's numbers mean."""

    label: str = Field(min_length=1)
    model: str = Field(min_length=1)
    """A model config name (configs/models/); its whole config is registered with the spec."""
    base_url: str | None = None
    """Another address for the same model (a deployed system); None: the config's own."""
    lane: Lane
    guards: GuardSettings = Field(default_factory=GuardSettings)
    product: ProductSpec = Field(
        default_factory=ProductSpec, exclude_if=lambda product: product.is_default
    )
    """What the product lane runs in this arm (the built-in agent loop unless named: a
    local loop against a deployed endpoint is two arms); left out of the registered
    material when it is the default, so specs registered before products keep their hash."""
    seeds: tuple[int, ...] = Field(min_length=1)

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(seeds)) != len(seeds) or any(seed < 0 for seed in seeds):
            raise ValueError("seeds must be distinct and >= 0")
        return seeds


class CategoryRule(FrozenRecord):
    """No category with at least `min_cases` shared cases may differ by more than
    `max_difference` points in the direction the kind forbids; smaller categories are
    reported with a small-n caveat and do not decide."""

    max_difference: float = Field(gt=0)
    min_cases: int = Field(ge=1)


class SampleSize(FrozenRecord):
    cases: int = Field(ge=1)
    seeds: int = Field(ge=1)
    why: str = Field(min_length=10)


class ExperimentSpec(FrozenRecord):
    id: str
    title: str = Field(min_length=1)
    hypothesis: str = Field(min_length=10)
    design: Design = "parity"
    fixture_id: str = Field(min_length=1)
    reference: ArmSpec
    candidate: ArmSpec | None = None
    """The parity design's second arm."""
    ablate: tuple[str, ...] = ()
    """The ablation design's guards: one candidate arm per guard, the reference without it."""
    primary_metric: PrimaryMetric = "case_score"
    kind: Kind
    margin: float = Field(ge=0)
    """In points (0-100) of the primary metric, candidate minus reference."""
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    category_rule: CategoryRule
    falsifiers: tuple[str, ...] = Field(min_length=1)
    sample_size: SampleSize

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("must be 3-64 lowercase letters, digits and dashes")
        return value

    @model_validator(mode="after")
    def _design(self) -> ExperimentSpec:
        if self.design == "parity":
            if self.candidate is None or self.ablate:
                raise ValueError("a parity design has a `candidate` arm and no `ablate`")
        else:
            if self.candidate is not None or not self.ablate:
                raise ValueError("an ablation design lists `ablate` guards and no `candidate`")
            if self.reference.lane != "product":
                raise ValueError("an ablation's reference arm runs the product lane")
            unknown = sorted(set(self.ablate) - set(GUARD_NAMES))
            if unknown:
                raise ValueError(
                    f"unknown guard(s) in ablate: {', '.join(unknown)}; "
                    f"guards: {', '.join(GUARD_NAMES)}"
                )
        if self.kind in ("equivalence", "non_inferiority") and self.margin <= 0:
            raise ValueError(f"a {self.kind} test needs a margin > 0")
        return self

    def arms(self) -> dict[str, ArmSpec]:
        """Every arm by name: `reference` and `candidate`, or `reference` and one
        `<guard>_off` per ablated guard."""
        if self.candidate is not None:
            return {REFERENCE: self.reference, CANDIDATE: self.candidate}
        return {
            REFERENCE: self.reference,
            **{
                f"{guard}_off": self.reference.model_copy(
                    update={
                        "label": f"{self.reference.label}, {guard} off",
                        "guards": self.reference.guards.without(guard),
                    }
                )
                for guard in self.ablate
            },
        }

    def comparisons(self) -> list[tuple[str, str]]:
        """(reference arm, candidate arm) pairs, one verdict each."""
        return [(REFERENCE, name) for name in self.arms() if name != REFERENCE]

    def models(self) -> list[str]:
        return sorted({arm.model for arm in self.arms().values()})


def load_spec(experiment_id: str, directory: Path | None = None) -> ExperimentSpec:
    """The spec whose `id` is `experiment_id` (file `<id>.yaml`); errors name the file."""
    folder = directory or experiments_dir()
    path = folder / f"{experiment_id}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(
            f"no experiment {experiment_id!r}: {path} does not exist; "
            f"experiments: {', '.join(known) or 'none'}"
        )
    spec = load_yaml_config(ExperimentSpec, path)
    if spec.id != experiment_id:
        raise ConfigError(f"{path}: id {spec.id!r} does not match the file name {path.stem!r}")
    return spec


def scan_specs(directory: Path | None = None) -> tuple[list[ExperimentSpec], list[str]]:
    """Every valid spec, and an error line per invalid file (so one bad file does not hide
    the others from the UI)."""
    specs: list[ExperimentSpec] = []
    errors: list[str] = []
    for path in sorted((directory or experiments_dir()).glob("*.yaml")):
        try:
            specs.append(load_spec(path.stem, path.parent))
        except ConfigError as error:
            errors.append(str(error))
    return specs, errors


class Registered(FrozenRecord):
    """What a registration fixes: the spec and what it names."""

    spec: dict[str, Any]
    model_configs: dict[str, dict[str, Any]]
    judge: dict[str, Any]

    def canonical(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        return hashlib.sha256(self.canonical().encode()).hexdigest()


def registered_material(
    spec: ExperimentSpec, configs: dict[str, ModelConfig], judge: dict[str, Any]
) -> Registered:
    missing = [name for name in spec.models() if name not in configs]
    if missing:
        raise ConfigError(f"experiment {spec.id}: no model config named {', '.join(missing)}")
    return Registered(
        spec=spec.model_dump(mode="json"),
        model_configs={
            name: configs[name].model_dump(mode="json", exclude=NOT_IN_IDENTITY)
            for name in spec.models()
        },
        judge=judge,
    )


def changed_fields(before: Any, after: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON documents differ (a key added or removed counts)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in before or key not in after:
                out.append(path)
            else:
                out += changed_fields(before[key], after[key], path)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            field
            for index, (b, a) in enumerate(zip(before, after, strict=True))
            for field in changed_fields(b, a, f"{prefix}[{index}]")
        ]
    return [] if before == after else [prefix or "(whole document)"]


def judge_material(judge: Judge, configs: dict[str, ModelConfig]) -> dict[str, Any]:
    """The pinned judge as registered: its model config, rubric hash and token limit."""
    if judge.model not in configs:
        raise ConfigError(f"no model config named {judge.model} (the judge)")
    return {
        "model": judge.model,
        "rubric_hash": judge.rubric_hash,
        "max_tokens": judge.max_tokens,
        "config": configs[judge.model].model_dump(mode="json", exclude=NOT_IN_IDENTITY),
    }


def resolve(spec: ExperimentSpec) -> tuple[Registered, dict[str, ModelConfig], Judge]:
    """What registering or running `spec` fixes, with the model configs and judge it uses."""
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.scoring.judge import load_judge

    judge = load_judge()
    configs = scan_model_configs().require([*spec.models(), judge.model])
    material = registered_material(spec, configs, judge_material(judge, configs))
    return material, configs, judge

"""The default label world, generated once per test session (about a second)."""

from __future__ import annotations

import pytest

from eval_pipeline.world.base import AnswerKey, GeneratedWorld
from eval_pipeline.world.label import LabelWorld, load_label_config


@pytest.fixture(scope="session")
def default_seed() -> int:
    return load_label_config().seed


@pytest.fixture(scope="session")
def label_world(default_seed: int) -> GeneratedWorld:
    return LabelWorld().generate(default_seed, 1.0)


@pytest.fixture(scope="session")
def label_key(label_world: GeneratedWorld) -> AnswerKey:
    return LabelWorld().answer_key(label_world)

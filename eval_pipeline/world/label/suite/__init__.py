"""The label world's evaluation suite: question shapes, answers, and cases that discriminate.

Every expected value comes from an answer table run on the world and its answer key;
nothing is typed by hand. Every rule-bearing case records the misreadings of the rulebook
that would change its answer (and the answer each gives), and is kept only when there is at
least one; the subjects are chosen so that every misreading is exercised by at least
:data:`COVERAGE` cases where the world allows it. Subjects are drawn from streams seeded by
the world seed, so the same world always yields the same suite, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from eval_pipeline.cases.case import Case
from eval_pipeline.world.label.suite.readings import build_views
from eval_pipeline.world.label.suite.select import Selector
from eval_pipeline.world.label.suite.special import special_templates
from eval_pipeline.world.label.suite.templates import TEMPLATES, Template
from eval_pipeline.world.label.versions import SUITE_VERSION as SUITE_VERSION
from eval_pipeline.world.label.versions import Category
from eval_pipeline.world.rng import Stream

# The name subjects are drawn under. Kept apart from SUITE_VERSION so that a version which
# only changes what a case records (label-suite-3 added a trace check, label-suite-4 the
# cited clause of two adversarial cases) keeps its subjects;
# change it when the selection itself changes.
SUBJECT_STREAM = "label-suite-2"

# Which cases form the ship-gate core: per category, the first N in suite order (14 in all).
CORE_PER_CATEGORY: dict[Category, int] = {
    "catalog_lookup": 1,
    "contract_terms": 2,
    "royalty_math": 2,
    "recoupment_state": 1,
    "cross_collateral": 1,
    "sql_analytics": 1,
    "reconciliation": 2,
    "multi_step": 2,
    "abstention": 1,
    "adversarial": 1,
}


def suite_templates(
    world: Mapping[str, pl.DataFrame],
    truth: Mapping[str, pl.DataFrame],
    pool: frozenset[str],
    stream: Stream,
) -> tuple[Template, ...]:
    """Every template, in suite order (the order categories and cases are numbered in)."""
    special = special_templates(world, truth, pool, stream.child("special"))
    ordered = [*TEMPLATES, *special]
    categories: list[Category] = list(CORE_PER_CATEGORY)
    return tuple(sorted(ordered, key=lambda t: categories.index(t.category)))


def build_label_suite(
    world: Mapping[str, pl.DataFrame], truth: Mapping[str, pl.DataFrame], world_seed: int
) -> list[Case]:
    """All cases, in a stable order, with the core subset marked."""
    stream = Stream(world_seed, SUBJECT_STREAM)
    views = build_views(world, truth, stream.child("pool"))
    selector = Selector(views, stream.child("select"))
    templates = suite_templates(world, truth, views.pool, stream)
    # Rare misreadings first: templates are chosen in order of how few subjects they offer,
    # then the cases are put back in suite order.
    for template in selector.rarest_first(templates):
        selector.choose(template)
    cases = selector.cases(templates)
    core_left: dict[str, int] = {str(c): n for c, n in CORE_PER_CATEGORY.items()}
    marked = []
    for case in cases:
        is_core = core_left.get(case.category, 0) > 0
        if is_core:
            core_left[case.category] -= 1
        marked.append(case.model_copy(update={"core": is_core}))
    return marked

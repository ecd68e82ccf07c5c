"""What the pipeline reads about the label world without loading it: its versions (read by
the generator, the suite and the world assets' code versions) and its categories. Importing
this pulls in nothing else."""

from typing import Literal, get_args

GENERATOR_VERSION = "label-3"
"""Bumped when the same seed and scale would generate different world tables."""
SUITE_VERSION = "label-suite-4"
"""Bumped when the same world would give a different suite."""
Category = Literal[
    "catalog_lookup",
    "contract_terms",
    "royalty_math",
    "recoupment_state",
    "cross_collateral",
    "sql_analytics",
    "reconciliation",
    "multi_step",
    "abstention",
    "adversarial",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
"""The suite's categories, in suite order (the order cases are numbered and reported in)."""

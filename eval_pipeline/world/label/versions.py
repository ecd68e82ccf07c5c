"""The label world's versions: one place, read by the generator, the suite and the
Dagster assets' code versions (importing this pulls in nothing else)."""

GENERATOR_VERSION = "label-3"
"""Bumped when the same seed and scale would generate different world tables."""
SUITE_VERSION = "label-suite-4"
"""Bumped when the same world would give a different suite."""

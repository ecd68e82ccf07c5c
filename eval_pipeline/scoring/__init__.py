"""Scoring: reading answers by kind, tiers, aggregation (Dagster-free)."""

"""Dagster glue only: assets, checks, resources, jobs. Domain code lives elsewhere."""

"""MLflow tracking (Dagster-free): the store, code provenance, sweep and experiment runs."""

"""Re-deriving published numbers from stored runs (Dagster-free core)."""

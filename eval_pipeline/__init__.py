"""eval_pipeline: reproducible evaluation experiments on LLM agents, as a Dagster pipeline."""

__version__ = "0.1.0"

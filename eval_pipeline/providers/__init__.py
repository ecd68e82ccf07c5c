"""The model-call layer: one async model interface over the official SDKs, with envelopes.

Dagster-free. See docs/model-calls.md for the whole picture.
"""

"""The mission as a command runs it: jobs on a real Dagster instance, what is up to date
skipped, and the progress and verdicts a person reads."""

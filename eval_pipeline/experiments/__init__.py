"""Pre-registered experiments (Dagster-free): specs, registration, arms, parity reports."""

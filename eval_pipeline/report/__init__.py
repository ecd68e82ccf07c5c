"""Published reports (Dagster-free): the sweep report, its plots and number references."""

"""The two lanes over the frozen fixtures: the model lane and the product lane.

Dagster-free. Today it holds the product lane's `run_sql` tool (`sql_tool`): a guarded,
time- and row-limited SELECT over a database file that contains only the `world` schema.
"""

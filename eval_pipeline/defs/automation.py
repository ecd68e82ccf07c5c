"""What runs after what, declared on the assets: Dagster's declarative automation.

A lane partition's runs, however they were materialized (the nightly schedule, the
model-config sensor, the UI, `evalp`), lead to that partition's records and scores; the
night's scores, once no lane partition is still queued or running, lead to the summary,
the gate, tracking and the report in one run; an experiment's arms lead to its parity
report. The sensor that evaluates these conditions is `evaluation_chain`: like the
schedule and the model-config sensor it starts stopped, and `evalp ui --automations`
turns all three on.
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.keys import CHAIN_SENSOR

PER_PARTITION = dg.AutomationCondition.eager()
"""Records after their partition's lane runs, scores after their records: each partition
on its own, once its upstream partition is there and nothing of it is still running."""

AFTER_THE_LANES = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("after the lanes: an input updated, none still queued or running")
"""The results over every partition. Unlike `eager`, a missing input does not hold it
back: a model whose config added partitions it never ran would otherwise stop every
summary, and the report reads experiments that may not have run yet. A run queued or in
progress for any lane partition holds it back, so a night's partitions lead to one
summary, not one per partition."""

evaluation_chain_sensor = dg.AutomationConditionSensorDefinition(
    CHAIN_SENSOR,
    target=dg.AssetSelection.all(),
    minimum_interval_seconds=30,
    description=(
        "Evaluates the assets' automation conditions: lane runs lead to their records and "
        "scores, a night's scores to the summary, gate, tracking and report."
    ),
)

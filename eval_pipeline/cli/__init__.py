"""The `evalp` command: one module per command (as Inspect AI's CLI is), each printing what
its command did from typed records (`cli.outcomes`), never from metadata looked up by a
string; what they share is in `cli.common`.

The commands import what they run inside themselves, so `evalp --help` pays for none of it.
"""

from __future__ import annotations

from pathlib import Path

import click

from eval_pipeline.cli import (
    ablation,
    audit,
    baseline,
    compare,
    demo,
    experiment,
    export,
    fixtures,
    publish,
    regrade,
    show,
    sim,
    sweep,
    ui,
    world,
)
from eval_pipeline.cli.common import OneLineErrors, world_option


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@world_option
def main(world_config: Path | None) -> None:
    """eval_pipeline: reproducible evaluation experiments on LLM agents.

    Start with `evalp demo`, which builds the whole pipeline on embedded defaults
    (DuckDB warehouse, local Dagster instance, simulated provider) and says where
    everything landed. `evalp --world examples/arith/world.yaml demo` does the same for
    your own cases (README, "Evaluate your own cases").
    """
    if world_config is not None:
        from eval_pipeline.paths import use_world

        use_world(world_config)


for command in (
    demo.demo,
    publish.publish,
    ablation.ablation,
    regrade.regrade,
    audit.audit,
    compare.compare,
    show.show,
    export.export,
    baseline.baseline,
    ui.ui,
    experiment.experiment,
    sweep.sweep,
    world.world,
    fixtures.fixtures,
    sim.sim,
):
    main.add_command(command)

__all__ = ["main"]

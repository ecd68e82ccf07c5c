"""`evalp sim`: the simulated provider, served on its own."""

from __future__ import annotations

import click

from eval_pipeline.cli.common import PORT_RANGE, SEED_RANGE


@click.group()
def sim() -> None:
    """The simulated provider (OpenAI and Anthropic wire formats over loopback HTTP)."""


@sim.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=PORT_RANGE, default=8765, show_default=True)
@click.option("--seed", type=SEED_RANGE, default=0, show_default=True, help="Server seed.")
@click.option(
    "--latency-ms",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Delay before every reply (milliseconds, >= 0).",
)
@click.option("--profile-options", default=None, help="JSON options per profile.")
def sim_serve(
    host: str, port: int, seed: int, latency_ms: int, profile_options: str | None
) -> None:
    """Serve the simulated provider until interrupted. Results from it are simulated."""
    from eval_pipeline.sim.server import serve

    serve(host=host, port=port, seed=seed, latency_ms=latency_ms, profile_options=profile_options)

"""``agent-loop``: the pipeline's own agent loop and guards over the world's tools (the
product lane as it always ran; its guards and their off switches are the lane settings')."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from eval_pipeline.products import ProductRegistration, ProductTools, WorldTools
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from eval_pipeline.lane_records import CaseRun
    from eval_pipeline.lanes.conversation import CaseContext


class AgentLoopOptions(FrozenRecord):
    """No options: the guards are the lane settings' (`guards:`)."""


class AgentLoop:
    name = "agent-loop"

    @contextmanager
    def open_tools(self, world: WorldTools) -> Iterator[ProductTools]:
        with world.open() as toolbox:
            yield ProductTools(toolbox=toolbox, specs=world.specs)

    async def run_case(self, ctx: CaseContext) -> CaseRun:
        from eval_pipeline.lanes.conversation import run_product_lane_case

        return await run_product_lane_case(ctx)


def _config_model() -> type[FrozenRecord]:
    return AgentLoopOptions


registration = ProductRegistration(config_model=_config_model, product_for=lambda _: AgentLoop())

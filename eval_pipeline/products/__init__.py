"""Products: what the product lane runs, found by name through the `eval_pipeline.products`
entry-point group (the built-in ones register there too).

A product is given each case with the lane's model client, the tools it may offer and the
trace it must write (a :class:`~eval_pipeline.lanes.conversation.CaseContext`), and runs
to a final reply: one :class:`~eval_pipeline.lane_records.CaseRun`, read and scored like
any other. Built in:

- ``agent-loop``: the pipeline's own agent loop and guards over the world's tools;
- ``mcp``: the same loop over an MCP server's tools (stdio or streamable HTTP), every
  write recorded and answered with a synthetic success instead of being sent;
- ``http``: a deployed product behind an HTTP endpoint, which makes its own model calls
  (its cost and usage are what it reports, marked as reported).

A lane run's product is part of its identity (a changed product starts the partition
afresh), so two products can be compared on the same fixtures.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import Field, JsonValue

from eval_pipeline.config import validate_config
from eval_pipeline.plugins import entry_points_of, load_registration
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from eval_pipeline.lane_records import CaseRun
    from eval_pipeline.lanes.conversation import CaseContext
    from eval_pipeline.lanes.toolbox import Toolbox
    from eval_pipeline.providers.types import ToolSpec

PRODUCTS_GROUP = "eval_pipeline.products"
"""`[project.entry-points."eval_pipeline.products"] my_product = "pkg.module:registration"`,
naming a `ProductRegistration`."""
DEFAULT_PRODUCT = "agent-loop"


class ProductSpec(FrozenRecord):
    """Which product the product lane runs, and its options (validated by the product's
    own config model when the lane starts)."""

    plugin: str = Field(default=DEFAULT_PRODUCT, pattern=r"^[a-z][a-z0-9_-]{0,62}$")
    options: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def is_default(self) -> bool:
        return self.plugin == DEFAULT_PRODUCT and not self.options


@dataclass(frozen=True)
class WorldTools:
    """The world's side of the product lane: the tool schemas frozen with the fixture set,
    and its own toolbox over the world-only agent database (opened only when used)."""

    specs: tuple[ToolSpec, ...]
    open: Callable[[], Toolbox]


@dataclass(frozen=True)
class ProductTools:
    """What a product offers the model for one lane run: the schemas it is shown, and the
    toolbox that runs the calls (None for a product that runs its own tools)."""

    toolbox: Toolbox | None
    specs: tuple[ToolSpec, ...]


class Product(Protocol):
    """What the product lane runs (see the module docstring)."""

    name: str

    def open_tools(self, world: WorldTools) -> AbstractContextManager[ProductTools]:
        """The tools for one lane run (closed when the run ends)."""
        ...

    async def run_case(self, ctx: CaseContext) -> CaseRun:
        """Run one case to its final reply, writing its trace through `ctx`."""
        ...


@dataclass(frozen=True)
class ProductRegistration:
    """What a product's entry point names: its options' config model and the product a
    validated config builds (callables, so that naming a product imports nothing heavy)."""

    config_model: Callable[[], type[FrozenRecord]]
    product_for: Callable[[Any], Product]


def known_products() -> tuple[str, ...]:
    """Every installed product's name, sorted."""
    return tuple(sorted(entry_points_of(PRODUCTS_GROUP, "product")))


def product_for(spec: ProductSpec, source: str = "product") -> Product:
    """The product `spec` names, its options validated (ConfigError naming `source`, the
    product and the option)."""
    registration: ProductRegistration = load_registration(
        PRODUCTS_GROUP, spec.plugin, ProductRegistration, "product"
    )
    config = validate_config(
        registration.config_model(), dict(spec.options), f"{source} ({spec.plugin} options)"
    )
    return registration.product_for(config)


__all__ = [
    "DEFAULT_PRODUCT",
    "PRODUCTS_GROUP",
    "Product",
    "ProductRegistration",
    "ProductSpec",
    "ProductTools",
    "WorldTools",
    "known_products",
    "product_for",
]

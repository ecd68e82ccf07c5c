"""``mcp``: the product lane's agent loop over an MCP server's tools.

The tools the model is shown are the server's own (`tools/list`, over stdio or streamable
HTTP, with the official `mcp` SDK). A call to a read tool is sent to the server and its
result returned to the model; a call to a write tool (named in `writes`, or annotated
`destructiveHint` while `destructive_hint_is_write` holds) is never sent: it goes to the
dry-run sink and is answered with a synthetic success, as every world's writes are. A
`writes` entry the server does not list is an error, never a write sent by mistake.

The SDK is async; the lane runs tools in worker threads. The client lives on an event loop
of its own thread for the lane run, and each call is handed to it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, JsonValue, model_validator

from eval_pipeline.errors import ConfigError, EvalPipelineError
from eval_pipeline.lanes.toolbox import Toolbox, ToolOutcome, tool_error, tool_json
from eval_pipeline.products import ProductRegistration, ProductTools, WorldTools
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from mcp import Client

    from eval_pipeline.lane_records import CaseRun
    from eval_pipeline.lanes.conversation import CaseContext

MAX_RESULT_BYTES = 256_000
MAX_TOOLS = 1_000


class McpError(EvalPipelineError):
    """The MCP server could not be reached, listed, or stopped answering."""


class McpOptions(FrozenRecord):
    """Where the MCP server is and which of its tools write."""

    command: tuple[str, ...] = ()
    """Start the server and speak stdio to it: the command and its arguments."""
    cwd: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for a started server (values, not secrets: a key the server needs
    comes from the environment it inherits)."""
    url: str | None = None
    """Or speak streamable HTTP to a running server at this URL."""
    writes: tuple[str, ...] = ()
    """Tools that write: never sent, recorded and answered with a synthetic success."""
    destructive_hint_is_write: bool = True
    """A tool annotated `destructiveHint: true` is a write too."""
    dry_run_replies: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    """What a write tool answers instead of acting, by tool (the shape your agent reads
    back, e.g. `{"batch_id": "{request_id}", "status": "accepted"}`; `{request_id}` is
    filled in); a write with none answers `{"request_id": ..., "status": "accepted"}`."""
    timeout_s: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_server(self) -> McpOptions:
        if bool(self.command) == bool(self.url):
            raise ValueError("give the server as `command` (stdio) or `url` (streamable HTTP)")
        return self


def _result_text(result: Any) -> str:
    """A tool result as the model reads it: its text blocks, else its structured content."""
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return tool_json(result.structured_content)
    return tool_json([block.model_dump(mode="json") for block in result.content])


class McpToolbox(Toolbox):
    """An MCP server's tools for one lane run, its writes kept in the dry-run sink."""

    def __init__(self, options: McpOptions) -> None:
        self.options = options
        self._loop = asyncio.new_event_loop()
        self._ready: Future[list[Any]] = Future()
        self._stop: asyncio.Event | None = None
        self._client: Client | None = None
        self._failure: McpError | None = None
        self._thread = threading.Thread(target=self._serve, name="mcp-client", daemon=True)
        self._thread.start()
        try:
            listed = self._ready.result(timeout=options.timeout_s + 30)
        except FutureTimeout as error:
            self.close()
            raise McpError(f"MCP server {self._where()} did not answer tools/list") from error
        except Exception:
            self.close()
            raise
        self.write_tools = self._writes(listed)
        super().__init__([_spec(tool) for tool in listed])

    def _where(self) -> str:
        return self.options.url or " ".join(self.options.command)

    def _server(self) -> Any:
        from mcp import StdioServerParameters

        if self.options.url:
            return self.options.url
        command, *args = self.options.command
        return StdioServerParameters(
            command=command,
            args=args,
            env=dict(self.options.env) or None,
            cwd=self.options.cwd,
        )

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._session())
        except Exception as error:  # noqa: BLE001 (handed to the opener, or to the next call)
            self._failure = McpError(f"MCP server {self._where()}: {type(error).__name__}: {error}")
            if not self._ready.done():
                self._ready.set_exception(self._failure)
        finally:
            self._loop.close()

    async def _session(self) -> None:
        from mcp import Client

        self._stop = asyncio.Event()
        async with Client(self._server(), read_timeout_seconds=self.options.timeout_s) as client:
            self._client = client
            tools: list[Any] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None or len(tools) > MAX_TOOLS:
                    break
            if len(tools) > MAX_TOOLS:
                raise McpError(f"the server lists more than {MAX_TOOLS} tools")
            self._ready.set_result(tools)
            await self._stop.wait()

    def _writes(self, listed: Sequence[Any]) -> frozenset[str]:
        names = {tool.name for tool in listed}
        for option, named in (
            ("writes", self.options.writes),
            ("dry_run_replies", self.options.dry_run_replies),
        ):
            unknown = sorted(set(named) - names)
            if unknown:
                raise ConfigError(
                    f"mcp product: {option} names {', '.join(unknown)}, which the server "
                    f"{self._where()} does not list (its tools: {', '.join(sorted(names))})"
                )
        hinted = {
            tool.name
            for tool in listed
            if self.options.destructive_hint_is_write
            and tool.annotations is not None
            and tool.annotations.destructive_hint
        }
        return frozenset(self.options.writes) | hinted

    def close(self) -> None:
        if self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=self.options.timeout_s)

    def dispatch(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        if name in self.write_tools:
            return self.dry_run(name, arguments, self.options.dry_run_replies.get(name))
        client = self._client
        if self._failure is not None:
            raise self._failure
        if client is None or self._loop.is_closed():
            raise McpError(f"MCP server {self._where()} is not connected")
        call = asyncio.run_coroutine_threadsafe(client.call_tool(name, arguments), self._loop)
        try:
            result = call.result(timeout=self.options.timeout_s + 5)
        except FutureTimeout as error:
            call.cancel()
            raise McpError(
                f"MCP server {self._where()}: {name} did not answer in {self.options.timeout_s} s"
            ) from error
        text = _result_text(result)
        if len(text.encode("utf-8")) > MAX_RESULT_BYTES:
            return tool_error(
                name, arguments, "tool_error", f"result over {MAX_RESULT_BYTES} bytes refused"
            )
        return ToolOutcome(name=name, arguments=arguments, text=text, is_error=result.is_error)


def _spec(tool: Any) -> ToolSpec:
    schema: Mapping[str, Any] = tool.input_schema or {"type": "object", "properties": {}}
    return ToolSpec(
        name=tool.name,
        description=tool.description or "",
        input_schema=json.loads(json.dumps(schema)),
    )


class McpProduct:
    name = "mcp"

    def __init__(self, options: McpOptions) -> None:
        self.options = options

    @contextmanager
    def open_tools(self, world: WorldTools) -> Iterator[ProductTools]:
        with McpToolbox(self.options) as toolbox:
            yield ProductTools(toolbox=toolbox, specs=tuple(toolbox.specs.values()))

    async def run_case(self, ctx: CaseContext) -> CaseRun:
        from eval_pipeline.lanes.conversation import run_product_lane_case

        return await run_product_lane_case(ctx)


def _config_model() -> type[FrozenRecord]:
    return McpOptions


def _product_for(options: McpOptions) -> McpProduct:
    return McpProduct(options)


registration = ProductRegistration(config_model=_config_model, product_for=_product_for)

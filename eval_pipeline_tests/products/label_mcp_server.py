"""An MCP server (the official SDK's low-level server, over stdio) exposing the label world's
tools over an agent database: what a team's own MCP server is to the `mcp` product. Every
call it receives is appended to a log file first, so a test can show from the server's own
record that a write was never sent. `submit_payout_batch` is annotated destructive.

    python label_mcp_server.py AGENT_DB CALL_LOG           # stdio
    python label_mcp_server.py AGENT_DB CALL_LOG PORT      # streamable HTTP on 127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from eval_pipeline.world.label.toolbox import LabelToolbox
from eval_pipeline.world.label.tools import LABEL_TOOLS, SUBMIT_PAYOUT_BATCH


def main(agent_db: Path, log: Path, port: int | None) -> None:
    toolbox = LabelToolbox(agent_db)

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=dict(tool.input_schema),
                    annotations=types.ToolAnnotations(
                        destructive_hint=tool.name == SUBMIT_PAYOUT_BATCH,
                        read_only_hint=tool.name != SUBMIT_PAYOUT_BATCH,
                    ),
                )
                for tool in LABEL_TOOLS
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        with log.open("a", encoding="utf-8") as record:
            record.write(json.dumps({"tool": params.name, "arguments": params.arguments}) + "\n")
        outcome = await asyncio.to_thread(
            toolbox.execute, params.name, json.dumps(params.arguments or {})
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)],
            is_error=outcome.is_error,
        )

    server: Server[Any] = Server("label-tools", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        if port is None:
            asyncio.run(serve())
        else:
            import uvicorn

            uvicorn.run(
                server.streamable_http_app(), host="127.0.0.1", port=port, log_level="error"
            )
    finally:
        toolbox.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None)

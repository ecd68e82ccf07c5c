"""A dataset world's tools: the user's Python callables, offered to the product lane.

A tool's JSON input schema is read from its signature (every parameter annotated; pydantic
writes each parameter's schema), its description from its docstring. The callable runs in
the lane's tool worker on arguments already checked against that schema; what it returns
is sent to the model as JSON, and what it raises is sent back as an error result naming
the exception (recorded in the trace like every tool error). A tool marked `write` is never
called: its request goes to the dry-run sink.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

from pydantic import PydanticSchemaGenerationError, TypeAdapter

from eval_pipeline.errors import ConfigError
from eval_pipeline.lanes.toolbox import Toolbox, ToolOutcome, tool_error, tool_json
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.world.dataset.config import TOOL_NAME, DatasetToolConfig
from eval_pipeline.world.dataset.tool_files import on_import_path, spec_in_roots

MAX_RESULT_BYTES = 256_000
"""A tool result larger than this is not sent to the model (an error result says so)."""


@dataclass(frozen=True)
class DatasetTool:
    """A tool of the dataset world: its spec, the callable, and whether it writes."""

    spec: ToolSpec
    function: Callable[..., Any]
    write: bool


def _not_shadowed(module_name: str, roots: Sequence[Path], where: str) -> None:
    """A module of that name imported earlier from another place would be used instead of
    the config's: an error naming both, never the wrong tool."""
    top = module_name.split(".", 1)[0]
    spec = spec_in_roots(module_name, roots)
    loaded = sys.modules.get(top)
    if spec is None or loaded is None:
        return
    loaded_from = getattr(loaded, "__file__", None)
    if loaded_from is None or Path(loaded_from).resolve() != Path(str(spec.origin)).resolve():
        raise ConfigError(
            f"{where}: module {top!r} is already loaded from {loaded_from or 'elsewhere'}, not "
            f"from {spec.origin}: give the tools' module a name of its own"
        )


def _import(entry: DatasetToolConfig, roots: Sequence[Path], source: str) -> Callable[..., Any]:
    module_name, _, attribute = entry.function.partition(":")
    on_import_path(roots)
    _not_shadowed(module_name, roots, f"{source}: tools: {entry.function}")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # the user's module failing to import, whatever the cause
        raise ConfigError(
            f"{source}: tools: {entry.function}: cannot import {module_name!r} "
            f"(looked in {', '.join(str(r) for r in roots)} and the environment): "
            f"{type(error).__name__}: {error}"
        ) from error
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ConfigError(
            f"{source}: tools: {entry.function}: {module_name} has no callable {attribute!r}"
        )
    return function  # type: ignore[no-any-return]


def input_schema(function: Callable[..., Any], where: str) -> dict[str, Any]:
    """The JSON schema of a callable's keyword arguments, from its annotations."""
    try:
        hints = get_type_hints(function)
    except Exception as error:  # an annotation naming something the module lacks
        raise ConfigError(f"{where}: cannot read its annotations: {error}") from error
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ConfigError(
                f"{where}: *{name} cannot be described to a model; name each argument"
            )
        if name not in hints:
            raise ConfigError(
                f"{where}: argument {name!r} has no type annotation (the "
                "model is shown its JSON schema, read from the annotations)"
            )
        try:
            schema = TypeAdapter(hints[name]).json_schema()
        except PydanticSchemaGenerationError as error:
            raise ConfigError(
                f"{where}: argument {name!r}: no JSON schema for {hints[name]!r}"
            ) from error
        schema.pop("title", None)
        properties[name] = schema
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def load_tools(
    entries: Sequence[DatasetToolConfig], roots: Sequence[Path], source: str
) -> tuple[DatasetTool, ...]:
    """The configured tools, imported and described (ConfigError naming the entry)."""
    tools: list[DatasetTool] = []
    for entry in entries:
        function = _import(entry, roots, source)
        name = entry.name or str(getattr(function, "__name__", ""))
        where = f"{source}: tools: {entry.function}"
        if not TOOL_NAME.fullmatch(name):
            raise ConfigError(f"{where}: {name!r} is not a tool name; give `name:`")
        if any(tool.spec.name == name for tool in tools):
            raise ConfigError(f"{where}: a second tool named {name!r}")
        description = entry.description or inspect.cleandoc(function.__doc__ or "").split(
            "\n\n", 1
        )[0].replace("\n", " ")
        spec = ToolSpec(
            name=name, description=description, input_schema=input_schema(function, where)
        )
        tools.append(DatasetTool(spec=spec, function=function, write=entry.write))
    return tuple(tools)


def tools_source_version(tools: Sequence[DatasetTool]) -> str:
    """A hash of the tools' source files: a changed tool makes what used it stale."""
    digest = hashlib.sha256()
    for tool in tools:
        path = inspect.getsourcefile(tool.function)
        digest.update(tool.spec.name.encode())
        if path is not None:
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


class DatasetToolbox(Toolbox):
    """The user's tools for one lane run."""

    def __init__(self, tools: Sequence[DatasetTool]) -> None:
        super().__init__([tool.spec for tool in tools])
        self._tools = {tool.spec.name: tool for tool in tools}

    def dispatch(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        tool = self._tools[name]
        if tool.write:
            return self.dry_run(name, arguments)
        try:
            result = tool.function(**arguments)
        except Exception as error:  # noqa: BLE001 (the tool's failure is the model's to read, and is traced)
            return tool_error(name, arguments, "tool_error", f"{type(error).__name__}: {error}")
        text = tool_json(result)
        if len(text.encode("utf-8")) > MAX_RESULT_BYTES:
            return tool_error(
                name,
                arguments,
                "tool_error",
                f"result of {len(text)} characters is over {MAX_RESULT_BYTES} bytes",
            )
        return ToolOutcome(name=name, arguments=arguments, text=text, is_error=False)

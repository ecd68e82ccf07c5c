"""A dataset world's configuration: a YAML naming the user's case file and tools."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from eval_pipeline.records import FrozenRecord
from eval_pipeline.world.dataset.tool_files import tool_module_files

IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GENERATOR_VERSION = "dataset-1"
SUITE_VERSION = "dataset-suite-1"
DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant. Answer the user's question, using the tools you are given "
    "where they help. End your final reply with the line the question asks for."
)


class DatasetToolConfig(FrozenRecord):
    """One tool the product lane offers: a Python callable by import path (`module:name`,
    the module found on the config's `python_path`). Its JSON schema comes from the
    callable's signature, its description from its docstring (unless given here)."""

    function: str
    name: str | None = None
    description: str | None = None
    write: bool = False
    """A write is never called: the product lane records the request in its dry-run sink
    and answers with a synthetic success, as for every world's writes."""

    @field_validator("function")
    @classmethod
    def _import_path(cls, value: str) -> str:
        if not IMPORT_PATH.fullmatch(value):
            raise ValueError(f"{value!r} is not an import path of the form 'module:function'")
        return value

    @field_validator("name")
    @classmethod
    def _tool_name(cls, value: str | None) -> str | None:
        if value is not None and not TOOL_NAME.fullmatch(value):
            raise ValueError(f"tool name {value!r}: letters, digits, '_' or '-', 1-64 chars")
        return value


class DatasetWorldConfig(FrozenRecord):
    """A world made of the user's own cases: a JSONL or CSV file of prompts with exact
    expected answers, and optional tools. `cases` and `python_path` are relative to the
    folder of the config file (`config_dir`, filled in by the loader)."""

    plugin: Literal["dataset"] = "dataset"
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    """Unused by the data (the file is the world); kept so every world config has one."""
    scale: float = Field(default=1.0, gt=0, le=1.0)
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")
    """The dataset's name, shown in the world's provenance."""
    cases: Path
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    tools: tuple[DatasetToolConfig, ...] = ()
    python_path: tuple[Path, ...] = (Path("."),)
    config_dir: Path = Path(".")

    @property
    def cases_path(self) -> Path:
        return (self.config_dir / self.cases).resolve()

    @property
    def import_roots(self) -> tuple[Path, ...]:
        return tuple((self.config_dir / root).resolve() for root in self.python_path)

    def data_files(self) -> list[Path]:
        """The files the world is made of (the case file and the tools' modules): their
        bytes are part of the world config's observed version, so an edit makes it stale."""
        functions = [tool.function for tool in self.tools]
        return [self.cases_path, *tool_module_files(functions, self.import_roots)]

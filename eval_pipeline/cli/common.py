"""What every `evalp` command shares: one-line errors and exit codes, and the options
several commands take."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click

from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.shutdown import skip_shutdown_collections

if TYPE_CHECKING:
    from eval_pipeline.experiments.subset import CaseSelection


P = ParamSpec("P")
R = TypeVar("R")

SEED_RANGE = click.IntRange(0, 2**63 - 1)
PORT_RANGE = click.IntRange(0, 65535)


def one_line(message: str) -> str:
    """A possibly multi-line message on one line (`a:\n  b\n  c` -> `a: b; c`)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return message
    head, rest = lines[0], lines[1:]
    if not rest:
        return head
    return (head + " " if head.endswith(":") else head + "; ") + "; ".join(rest)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `error: <message>` on one line to stderr and exit (2: bad input)."""
    click.echo(f"error: {one_line(message)}", err=True)
    sys.exit(code)


class OneLineErrors(click.Group):
    """Every failure a user can cause ends in one line naming what is wrong, and exit
    code 2: click's usage errors (a bad option value names its flag) and every error of
    ours, instead of click's usage block or a traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        skip_shutdown_collections()  # before any command imports what it runs
        try:
            returned = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as shown:  # a group called alone: its help
            click.echo(shown.format_message())
            sys.exit(0)
        except click.ClickException as error:
            fail(error.format_message())
        except click.Abort:
            fail("aborted", 1)
        except EvalPipelineError as error:
            fail(str(error), error.exit_code)
        if isinstance(returned, int) and returned:
            sys.exit(returned)  # click's own exits (e.g. --help) return their code
        return returned


def world_options(command: Callable[P, R]) -> Callable[P, R]:
    """--config and --seed, shared by every command that builds a world."""
    command = click.option(
        "--seed", type=SEED_RANGE, default=None, help="Override the config's world seed."
    )(command)
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="World config YAML (default: configs/worlds/label.yaml).",
    )(command)


world_option = click.option(
    "--world",
    "world_config",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A world of your own: its world YAML (`sweep.yaml`, `gate.yaml`, `models/` … beside "
    "it replace the shipped ones; its state goes to var/worlds/<its folder>).",
)
"""--world, on the command group (every command) and on `demo` (as the README says it)."""


def subset_options(command: Callable[P, R]) -> Callable[P, R]:
    """--cases, --categories and --limit: a quick run on a subset of the cases, in a folder
    of its own and never published as the suite (`eval_pipeline.experiments.subset`)."""
    command = click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=None,
        help="At most N cases, taken from each category in turn. A subset run.",
    )(command)
    command = click.option(
        "--categories", default="", help="Only cases of these categories (comma-separated)."
    )(command)
    return click.option(
        "--cases",
        "case_patterns",
        default="",
        help="Only these case ids or patterns (comma-separated, e.g. 'royalty_math-*'); a "
        "number N means N cases, as --limit N. A subset run.",
    )(command)


def selection_of(case_patterns: str, categories: str, limit: int | None) -> CaseSelection:
    from eval_pipeline.experiments.subset import CaseSelection, parse_case_option

    patterns, count = parse_case_option(case_patterns) if case_patterns else ((), None)
    if count is not None and limit is not None:
        fail(f"--cases {case_patterns} and --limit {limit} both give a number of cases: give one")
    return CaseSelection(
        cases=patterns,
        categories=tuple(name.strip() for name in categories.split(",") if name.strip()),
        limit=limit if limit is not None else count,
    )


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"not a list of integers: {text!r}", param_hint="--seeds"
        ) from None
    if not seeds or any(seed < 0 for seed in seeds):
        raise click.BadParameter(f"need one or more seeds >= 0, got {text!r}", param_hint="--seeds")
    return seeds

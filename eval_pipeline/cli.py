"""The `evalp` command: run the pipeline, build worlds, freeze and verify fixtures."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click

from eval_pipeline import paths
from eval_pipeline.errors import EvalPipelineError

if TYPE_CHECKING:
    from eval_pipeline.experiments.registry import Registration
    from eval_pipeline.experiments.spec import ExperimentSpec
    from eval_pipeline.experiments.subset import CaseSelection
    from eval_pipeline.fixtures.frozen import FixtureSet
    from eval_pipeline.mission.runner import JobOutcome
    from eval_pipeline.providers.config import ModelConfig
    from eval_pipeline.scoring.compare import StoredComparison
    from eval_pipeline.scoring.judge import Judge

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


class _OneLineErrors(click.Group):
    """Every failure a user can cause ends in one line naming what is wrong, and exit
    code 2: click's usage errors (a bad option value names its flag) and every error of
    ours, instead of click's usage block or a traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
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


def _check_scale(config_path: Path, value: float | None) -> None:
    """--scale within (0, the world's largest]: the flag is named, not the config file it
    overrides (the limit is the world plugin's that the config names)."""
    from eval_pipeline.world import load_world_config, world_registration

    if value is None:
        return
    largest = world_registration(load_world_config(config_path).plugin).max_scale
    if not 0 < value <= largest:
        raise click.BadParameter(
            f"{value:g} is not in the range 0<x<={largest:g}", param_hint="'--scale'"
        )


def _world_options(command: Callable[P, R]) -> Callable[P, R]:
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


_world_option = click.option(
    "--world",
    "world_config",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A world of your own: its world YAML (`sweep.yaml`, `gate.yaml`, `models/` … beside "
    "it replace the shipped ones; its state goes to var/worlds/<its folder>).",
)
"""--world, on the command group (every command) and on `demo` (as the README says it)."""


def _subset_options(command: Callable[P, R]) -> Callable[P, R]:
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


def _selection(case_patterns: str, categories: str, limit: int | None) -> CaseSelection:
    from eval_pipeline.experiments.subset import CaseSelection, parse_case_option

    patterns, count = parse_case_option(case_patterns) if case_patterns else ((), None)
    if count is not None and limit is not None:
        fail(f"--cases {case_patterns} and --limit {limit} both give a number of cases: give one")
    return CaseSelection(
        cases=patterns,
        categories=tuple(name.strip() for name in categories.split(",") if name.strip()),
        limit=limit if limit is not None else count,
    )


def _run_subset(names: Sequence[str], seeds: Sequence[int], selection: CaseSelection) -> None:
    """A quick run of both lanes on the selected cases, printed; exits 1 when a case got no
    usable reply (‡)."""
    from eval_pipeline import world_stages
    from eval_pipeline.experiments.subset import RESULT_FILE, run_subset, subset_root
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.lanes.guards import GuardSettings, guards_from_env
    from eval_pipeline.lanes.sweep import load_sweep_config
    from eval_pipeline.providers.config import scan_model_configs
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.scoring.score import UNHEARD

    judge = load_judge()
    configs = scan_model_configs().require([*names, judge.model])
    warehouse = paths.warehouse_path()
    fixture_set = world_stages.current_fixture_set(warehouse)
    result = run_subset(
        models=names,
        seeds=seeds,
        selection=selection,
        fixture_set=fixture_set,
        agent_db=build_agent_world_db(warehouse, paths.agent_world_dir()),
        configs=configs,
        judge=judge,
        guards=guards_from_env(GuardSettings()),
        product=load_sweep_config().product,
    )
    click.echo(result.text())
    click.echo(f"\nrecords and result: {subset_root(result.run_id) / RESULT_FILE}")
    unheard = [s for s in result.scores if s.status in UNHEARD]
    if unheard:
        fail(f"{len(unheard)} case run(s) got no usable reply (‡): see the table above", code=1)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@_world_option
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


@main.command()
@_subset_options
@_world_option
def demo(case_patterns: str, categories: str, limit: int | None, world_config: Path | None) -> None:
    """The whole mission on a local Dagster instance: world, answer key, fixtures,
    calibration, both lanes for every model and seed of the sweep, its registered
    experiments, scores, the gate, MLflow tracking and the report (after cleaning up what a
    killed earlier demo left behind). Exits 1 if a step failed or a case got no usable
    reply (‡: the top causes are printed; the next demo re-runs those cases).

    With --cases, --categories or --limit: the main job, then a quick run of the sweep's
    models and seeds on those cases only, printed and never published."""
    from eval_pipeline.mission.display import MissionBar
    from eval_pipeline.mission.runner import run_main_job

    if world_config is not None:
        from eval_pipeline.paths import use_world

        use_world(world_config)
    selection = _selection(case_patterns, categories, limit)
    bar = MissionBar()
    try:
        outcome = run_main_job(progress=bar, world_only=selection.chosen_anything)
    finally:
        bar.close()
    if selection.chosen_anything and outcome.success:
        from eval_pipeline.lanes.sweep import load_sweep_config

        sweep_config = load_sweep_config()
        click.echo(f"Dagster run {outcome.run_id} (main job): succeeded")
        _run_subset(sweep_config.models, sweep_config.seeds, selection)
        return
    for warning in outcome.warnings:
        click.echo(f"warning: {warning}", err=True)
    recovery = outcome.recovery
    if recovery.failed_runs or recovery.loaded_journals:
        click.echo(
            f"recovered from an interrupted demo: {len(recovery.failed_runs)} run(s) left "
            f"in progress marked failed, {len(recovery.loaded_journals)} call journal(s) "
            f"loaded ({recovery.loaded_envelopes} envelopes)"
        )
    if outcome.failures:
        for failure in outcome.failures:
            click.echo(f"error: {failure.step}: {one_line(failure.message)}", err=True)
        click.echo(
            f"Dagster run {outcome.run_id} FAILED; its full log is in the Dagster UI (./dev ui)",
            err=True,
        )
        sys.exit(2 if all(failure.ours for failure in outcome.failures) else 1)
    if outcome.skipped:
        click.echo(
            f"up to date, not run again ({len(outcome.skipped)}): {', '.join(outcome.skipped)}; "
            "their latest results are shown (a changed config, code version or input re-runs "
            "what it affects)"
        )
    world = outcome.materializations.get("world", {})
    fixtures = outcome.materializations.get("fixtures", {})
    answer_key = outcome.materializations.get("answer_key", {})
    click.echo(f"Dagster run {outcome.run_id}: {'succeeded' if outcome.success else 'FAILED'}")
    click.echo(
        f"  world        seed={world.get('seed')} fingerprint={world.get('world_fingerprint')}"
    )
    row_counts = world.get("row_counts", {})
    if isinstance(row_counts, dict):
        click.echo(
            "               "
            + ", ".join(f"{name} {count:,}" for name, count in sorted(row_counts.items()))
        )
    click.echo(f"  answer key   fingerprint={answer_key.get('answer_key_fingerprint')}")
    click.echo(
        f"  fixtures     id={fixtures.get('fixture_id')} cases={fixtures.get('dagster/row_count')}"
        f" core={fixtures.get('core_cases')}"
    )
    click.echo(f"               {fixtures.get('path')}")
    calibration = outcome.materializations.get("provider_calibration", {})
    click.echo(
        f"  calibration  {calibration.get('calls')} calls to the simulated provider "
        f"(planted profile), run {calibration.get('calibration_run_id')}"
    )
    summary = calibration.get("summary")
    if isinstance(summary, str):
        click.echo("\n".join("               " + line for line in summary.splitlines()))
    for check, passed in sorted(outcome.checks.items()):
        click.echo(f"  check        {check}: {'passed' if passed else 'FAILED'}")
    _echo_lanes(outcome.lanes)
    if outcome.results is not None:
        _echo_results(outcome.results)
    click.echo(f"  warehouse    {paths.warehouse_path()}  (schemas world, truth, meta, runs)")
    click.echo(f"  dagster home {outcome.dagster_home}")
    if outcome.results is not None:
        from eval_pipeline.mission.display import (
            echo_experiments,
            echo_gate,
            echo_headline,
            echo_where_to_look,
        )

        echo_headline(outcome.results)
        echo_gate(outcome.results)
        echo_experiments(outcome.experiments)
        echo_where_to_look(outcome.results)
    else:
        click.echo("Open the Dagster and MLflow UIs: ./dev ui   (or: evalp ui)")
    refused = [e.refused for e in outcome.experiments if e.refused is not None]
    for refusal in refused:
        click.echo(f"error: {one_line(refusal)}", err=True)
    unhealed = _echo_unhealed(outcome.lanes)
    if unhealed:
        sys.exit(1)
    if not outcome.success:
        # Only refusals (something to fix before running again): 2; a failed run: 1.
        ran = outcome.results is not None and outcome.results.success
        sys.exit(
            2 if refused and ran and all(e.success or e.refused for e in outcome.experiments) else 1
        )


def _echo_lanes(lanes: Sequence[JobOutcome]) -> None:
    """One line per lane partition run: what ran, how it ended, what it cost."""
    for lane in lanes:
        if not lane.success:
            for failure in lane.failures:
                click.echo(
                    f"error: lanes {lane.partition}: {failure.step}: {one_line(failure.message)}",
                    err=True,
                )
            continue
        for asset in ("model_lane_runs", "product_lane_runs"):
            meta = lane.materializations.get(asset)
            if meta is None:
                continue
            click.echo(
                f"  {asset:<17} {lane.partition:<32} cases {meta.get('cases')} "
                f"(ran {meta.get('cases_run')}, healed {meta.get('cases_healed')}) "
                f"‡ {_unheard(meta)} † {meta.get('budget_stopped')} "
                f"tool calls {meta.get('tool_calls')} cost ${meta.get('cost_usd')} "
                f"[{meta.get('provider')}]"
            )


def _unheard(meta: dict[str, object]) -> int:
    """A lane partition's cases without a usable reply: infrastructure and harness errors
    (both shown as ‡, as the scores show them)."""
    return sum(
        value if isinstance(value, int) else 0
        for value in (meta.get("infra_errors"), meta.get("harness_errors"))
    )


def _echo_unhealed(lanes: Sequence[JobOutcome]) -> bool:
    """Say which lane partitions ended with cases never heard (‡) and the top causes, the
    server's own words included; True if any did (the command then exits 1)."""
    unheard: list[tuple[str, int, list[object]]] = []
    for lane in lanes:
        for asset in ("model_lane_runs", "product_lane_runs"):
            meta = lane.materializations.get(asset)
            if meta and _unheard(meta):
                causes = meta.get("unhealed_causes")
                listed = causes if isinstance(causes, list) else []
                unheard.append((f"{asset} {lane.partition}", _unheard(meta), listed))
    if not unheard:
        return False
    total = sum(n for _, n, _ in unheard)
    click.echo(
        f"error: {total} case(s) in {len(unheard)} lane partition(s) ended without a usable "
        "reply (‡: infrastructure or harness errors), so these numbers are not healthy. "
        "Top causes:",
        err=True,
    )
    for where, count, causes in unheard:
        click.echo(f"  {where}: {count} case(s)", err=True)
        for cause in causes:
            if isinstance(cause, dict):
                click.echo(
                    f"    {cause.get('calls')} call(s) ended {cause.get('status')}: "
                    f"{cause.get('detail')}",
                    err=True,
                )
    click.echo(
        "Fix the cause (the key, the server, the path) and run the same command again: "
        "the cases not heard are re-run.",
        err=True,
    )
    return True


def _echo_results(results: JobOutcome) -> None:
    """Where the full table is, the checks, the README table and the MLflow runs (the
    headline and the gate's verdict are printed last, by `eval_pipeline.mission.display`)."""
    summary = results.materializations.get("sweep_summary", {})
    if "path" in summary:
        click.echo(f"  summary      {summary['path']}")
    for check, passed in sorted(results.checks.items()):
        click.echo(f"  check        {check}: {'passed' if passed else 'FAILED'}")
    report = results.materializations.get("sweep_report", {})
    if report:
        click.echo(f"  report       {report.get('path')}  (and {report.get('html')})")
        if results.success and isinstance(report.get("readme_table"), str):
            click.echo(
                f"  readme       table {report['readme_table']}  (`evalp publish --readme` "
                "writes it into README.md; nothing in the checkout is edited until then)"
            )
    tracked = results.materializations.get("sweep_tracking", {})
    if tracked:
        click.echo(
            f"  mlflow       {tracked.get('mlflow_experiment')}: sweep run "
            f"{tracked.get('mlflow_parent_run_id')} with {tracked.get('nested_runs')} nested "
            f"runs ({tracked.get('tracking_uri')}); under `evalp ui`: "
            f"http://127.0.0.1:5000{tracked.get('mlflow_runs_page', '')}"
        )
    for failure in results.failures:
        click.echo(f"error: results: {failure.step}: {one_line(failure.message)}", err=True)


@main.command()
@click.option(
    "--readme",
    "readme",
    type=click.Path(dir_okay=False, path_type=Path),
    is_flag=False,
    flag_value=str(paths.PROJECT_ROOT / "README.md"),
    required=True,
    help="The README whose results block gets the table (given alone: the project's).",
)
def publish(readme: Path) -> None:
    """Write the latest sweep report's results table into a README's results block, only
    while that report is current (refused, nothing written, when it is stale or missing).
    `evalp audit README.md` re-derives every number of it."""
    from eval_pipeline.mission.publish import publish_readme

    published = publish_readme(readme)
    click.echo(
        f"results table {'updated' if published.changed else 'unchanged'} in "
        f"{published.readme} (from the sweep report of Dagster run {published.report_run_id}; "
        f"`evalp audit {Path(published.readme).name}` re-derives it)"
    )


@main.command()
@click.option("--model", "model_name", required=True, help="A model config name (configs/models).")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated replicate seeds.")
def ablation(model_name: str, seeds: str) -> None:
    """The product lane with each guard off in turn, beside the model lane, per category,
    over the world and fixture set the main job built (run `evalp demo` first)."""
    from eval_pipeline.experiments.ablation import ablation_from_warehouse

    seed_list = _seed_list(seeds)
    matrix = ablation_from_warehouse(model_name, seed_list)
    click.echo(matrix.table())


@main.command()
@click.option(
    "--show", default=40, show_default=True, help="How many changed cases to list (0: none)."
)
def regrade(show: int) -> None:
    """Re-label every stored lane call with the current classifier and readers, then
    re-score every stored lane partition with the current readers, checks and judge
    verdicts, without calling a model (the judge is asked only about replies it never
    ruled on), and say what changed and why. The re-scoring is Dagster's regrade job, one
    run per partition through the run queue: new materializations of the scores, so the
    UI shows them and the next `evalp demo` re-runs the results that read them."""
    from eval_pipeline.locks import project_lock
    from eval_pipeline.mission.display import MissionBar
    from eval_pipeline.mission.regrade import regrade_through_dagster
    from eval_pipeline.scoring.grading import cases_under
    from eval_pipeline.scoring.relabel import relabel_envelopes
    from eval_pipeline.warehouse import connect

    with project_lock("evalp regrade"):
        # Labels first: a case score carries the label of its final call.
        con = connect(paths.warehouse_path())
        try:
            relabelled = relabel_envelopes(
                con, cases_under(paths.fixtures_root()), max_examples=show
            )
        finally:
            con.close()
        bar = MissionBar()
        try:
            outcome = regrade_through_dagster(bar)
        finally:
            bar.close()
    for line in relabelled.lines():
        click.echo(line)
    click.echo(
        f"re-scored {outcome.scored} case runs in {len(outcome.runs)} partition run(s) of "
        f"Dagster's regrade job; judge asked {outcome.judge_asked}, stored verdicts reused "
        f"{outcome.judge_reused}"
    )
    for key in outcome.not_partitions:
        click.echo(
            f"  not re-scored: {key} is no partition of the lanes now (its seed is not "
            f"in {paths.sweep_config()}); its scores stand as they were"
        )
    if not outcome.changes:
        click.echo("no score changed")
    else:
        click.echo(f"{len(outcome.changes)} case score(s) changed:")
        for change in outcome.changes[:show]:
            click.echo(
                f"  {change.partition} {change.case_id}: {change.old} -> {change.new} "
                f"({change.responsible})"
            )
        if len(outcome.changes) > show:
            click.echo(f"  ... and {len(outcome.changes) - show} more")
    for line in outcome.dropped[:show]:
        click.echo(f"  no longer scored: {line}")
    for run in outcome.runs:
        for failure in run.failures:
            click.echo(f"FAILED {run.partition} {failure.step}: {failure.message}", err=True)
    if not outcome.success:
        sys.exit(1)


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--quiet", is_flag=True, help="Print only the problems and the verdict.")
def audit(path: Path, quiet: bool) -> None:
    """Re-derive every referenced number of a report (or the README) from the stored runs
    and print its chain; exit 1 naming every number that does not re-derive exactly, every
    reference that leads nowhere and every number without a reference."""
    from eval_pipeline.audit.audit import audit_against_project

    os.environ["DAGSTER_HOME"] = str(paths.prepared_dagster_home())
    result = audit_against_project(path.read_text(encoding="utf-8"))
    if not quiet:
        for number in result.numbers:
            mark = "ok " if number.derived == number.printed else "BAD"
            click.echo(f"{mark} {number.printed:>7} {number.ref}: {number.chain}")
    for problem in result.problems:
        click.echo(f"problem: {problem}", err=True)
    click.echo(
        f"{path}: {len(result.numbers)} referenced numbers, "
        + ("all re-derived exactly" if result.clean else f"{len(result.problems)} problem(s)")
    )
    if not result.clean:
        sys.exit(1)


@main.command()
@click.argument("candidate")
@click.argument("reference")
@click.option(
    "--lane",
    type=click.Choice(["model", "product"]),
    default="product",
    show_default=True,
    help="The lane of a side given as MODEL (MODEL:LANE names its own).",
)
@click.option("--seeds", default="", help="Only these stored seeds, e.g. 0,1 (default: all).")
def compare(candidate: str, reference: str, lane: str, seeds: str) -> None:
    """Who leads and by how much: CANDIDATE − REFERENCE over the cases both scored, each a
    stored model (MODEL, or MODEL:LANE to compare across lanes), with the paired bootstrap
    interval, McNemar's test, the seed noise floor and the gap per category."""
    from eval_pipeline.scoring.compare import StoredSide, compare_stored
    from eval_pipeline.scoring.store import read_scores
    from eval_pipeline.warehouse import connect

    chosen = _seed_list(seeds) if seeds else []
    sides = [StoredSide.parse(text, lane, chosen) for text in (candidate, reference)]
    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        stored = compare_stored(read_scores(conn), *sides)
    finally:
        conn.close()
    _echo_comparison(stored)


@main.command()
@click.argument("case_id")
@click.option("--model", "model_name", required=True, help="A model with stored runs.")
@click.option(
    "--lane",
    type=click.Choice(["model", "product"]),
    default="product",
    show_default=True,
)
@click.option("--seed", "seeds", multiple=True, type=SEED_RANGE, help="Only this seed (repeat).")
def show(case_id: str, model_name: str, lane: str, seeds: tuple[int, ...]) -> None:
    """Why a case passed or failed: its stored transcript for the model in the lane (every
    stored seed, or --seed): the prompt, every reply, tool call and result, guard firing
    and write, the final reply beside the expected answer, each tier's score, the cost."""
    from eval_pipeline import world_stages
    from eval_pipeline.fixtures.frozen import load_fixtures
    from eval_pipeline.report.transcript import show_case, transcript_text
    from eval_pipeline.scoring.store import read_scores
    from eval_pipeline.warehouse import connect

    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        fixture_set = load_fixtures(world_stages.recorded_fixture_path(conn))
        cases = {case.case_id: case for case in fixture_set.cases}
        scores = [s for s in read_scores(conn) if s.fixture_id == fixture_set.fixture_id]
        transcripts = show_case(conn, cases, scores, case_id, model_name, lane, seeds)
    finally:
        conn.close()
    click.echo("\n\n".join(transcript_text(t) for t in transcripts))


@main.group()
def export() -> None:
    """The stored sweep in another tool's format."""


@export.command("inspect")
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The folder the logs are written to (`inspect view --log-dir` it).",
)
def export_inspect_logs(out: Path) -> None:
    """Every lane and model of the current fixture set as an Inspect AI log (samples,
    messages, scores, model usage), so `inspect view --log-dir OUT` browses the sweep."""
    from eval_pipeline import world_stages
    from eval_pipeline.fixtures.frozen import load_fixtures
    from eval_pipeline.lanes.store import read_identities
    from eval_pipeline.report.inspect_export import export_inspect
    from eval_pipeline.scoring.store import read_scores
    from eval_pipeline.warehouse import connect

    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        fixture_set = load_fixtures(world_stages.recorded_fixture_path(conn))
        scores = [s for s in read_scores(conn) if s.fixture_id == fixture_set.fixture_id]
        logs = export_inspect(conn, fixture_set, scores, read_identities(conn), out)
    finally:
        conn.close()
    for log in logs:
        click.echo(
            f"{log.path}: {log.lane} lane, {log.model}: {log.samples} samples, {log.scored} scored"
        )
    click.echo(f"inspect view --log-dir {out}")


def _echo_comparison(stored: StoredComparison) -> None:
    c = stored.comparison
    click.echo(c.sentence())
    paired = c.paired
    click.echo(
        f"  McNemar (exact, majority vote per case): {stored.candidate.label} only "
        f"{paired.candidate_only}, {stored.reference.label} only {paired.reference_only}"
    )
    for side, seeds, noise in (
        (stored.candidate, c.candidate_seeds, c.candidate_noise),
        (stored.reference, c.reference_seeds, c.reference_noise),
    ):
        shown = "unknown (one seed)" if noise is None else f"±{noise:.1f}"
        click.echo(
            f"  {side.label}: seeds {','.join(map(str, seeds))}, seed noise {shown}, "
            f"{paired.left_out.get(side.label, 0)} case(s) left out (never heard or "
            "budget-stopped)"
        )
    if stored.candidate_fixtures != stored.reference_fixtures:
        click.echo(
            f"  fixture sets differ: {', '.join(stored.candidate_fixtures)} vs "
            f"{', '.join(stored.reference_fixtures)}; paired on the {paired.shared_cases} "
            "case ids both hold"
        )
    else:
        click.echo(f"  fixture set {', '.join(stored.candidate_fixtures)}")
    if stored.categories:
        click.echo("Per category (paired, points; Δ = candidate − reference):")
        width = max(len(g.category) for g in stored.categories)
        for g in stored.categories:
            click.echo(
                f"  {g.category:<{width}}  n {g.shared:>4}  {g.reference:6.1f} → "
                f"{g.candidate:6.1f}  Δ {g.difference:+6.1f} [{g.low:+.1f}, {g.high:+.1f}]"
            )


@main.group()
def baseline() -> None:
    """The accepted per-category scores the ship gate compares a candidate with."""


@baseline.command("accept")
@click.option("--model", "model_name", required=True, help="A model scored in the product lane.")
def baseline_accept(model_name: str) -> None:
    """Accept the model's current product-lane scores (every stored seed) as its baseline
    in configs/baselines/<model>.yaml."""
    from eval_pipeline.scoring.gate import accept_stored_baseline

    path, accepted = accept_stored_baseline(paths.warehouse_path(), model_name)
    click.echo(f"baseline for {model_name} written to {path}")
    for category, points in sorted(accepted.categories.items()):
        click.echo(f"  {category:<18} {points:6.1f}")


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"not a list of integers: {text!r}", param_hint="--seeds"
        ) from None
    if not seeds or any(seed < 0 for seed in seeds):
        raise click.BadParameter(f"need one or more seeds >= 0, got {text!r}", param_hint="--seeds")
    return seeds


@main.command()
@click.option("--port", type=PORT_RANGE, default=3000, show_default=True)
@click.option("--mlflow-port", type=PORT_RANGE, default=5000, show_default=True)
@click.option(
    "--automations",
    is_flag=True,
    help="Turn on the nightly schedule, the model-config sensor and the evaluation chain "
    "(lane runs lead to scores, a night's scores to the summary, gate, tracking and report) "
    "before serving; they stay on in the instance until turned off in the UI.",
)
def ui(port: int, mlflow_port: int, automations: bool) -> None:
    """Serve the Dagster UI (this project's local instance, with its daemon) and the MLflow
    UI (the tracking store) on loopback until interrupted; both refuse a request naming a
    host other than 127.0.0.1, localhost or [::1] (DNS rebinding)."""
    import signal
    import subprocess
    import time

    from dagster import DagsterInstance

    from eval_pipeline.tracking.store import (
        default_store,
        mlflow_server_command,
        open_client,
        runs_page,
    )
    from eval_pipeline.tracking.sweep import HEADLINE_VIEW

    home = paths.prepared_dagster_home()
    # Each store is created once, here, before the servers open it: two processes creating
    # a fresh one at once corrupt its schema (the webserver and the daemon, FIELD-NOTES).
    with DagsterInstance.from_config(str(home)):
        pass
    store = default_store()
    sweeps = open_client(store).search_experiments(filter_string="name LIKE 'evalp/sweeps/%'")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "DAGSTER_HOME": str(home), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    workspace = str(paths.PROJECT_ROOT / "workspace.yaml")
    if automations:
        for kind in ("schedule", "sensor"):  # Dagster's own commands: the state they set is
            # the instance's, the same the UI's toggles show
            started = subprocess.run(
                [str(bin_dir / "dagster"), kind, "start", "--start-all", "-w", workspace],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if started.returncode != 0:
                raise click.ClickException(
                    f"dagster {kind} start --start-all failed: "
                    + (started.stderr.strip().splitlines() or ["(no output)"])[-1]
                )
            click.echo(started.stdout.strip())
    # `dagster dev` is the daemon plus a webserver that answers any Host header (DNS
    # rebinding): the same two, with our webserver accepting loopback host names only.
    commands = {
        f"Dagster  http://127.0.0.1:{port}": [
            sys.executable,
            "-m",
            "eval_pipeline.ui_server",
            "--workspace",
            workspace,
            "--port",
            str(port),
        ],
        f"MLflow   http://127.0.0.1:{mlflow_port}": mlflow_server_command(store, mlflow_port),
    }

    def default_sigint() -> None:  # the servers map SIGTERM to SIGINT: it must not be ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    from contextlib import ExitStack

    from eval_pipeline.mission.queue import running_daemon

    stack = ExitStack()
    daemon = stack.enter_context(running_daemon()).process
    if daemon is None:
        stack.close()
        raise click.ClickException(
            f"a Dagster daemon already serves this instance ({home}): an `evalp demo` or "
            "`evalp sweep` running its lanes, or another `evalp ui`; start the UI once it ends"
        )
    children = [
        subprocess.Popen(command, env=env, preexec_fn=default_sigint)
        for command in commands.values()
    ]
    click.echo(f"DAGSTER_HOME={home}; MLflow store {store.uri}")
    for address in commands:
        click.echo(f"  {address}")
    for sweep_experiment in sweeps:  # MLflow's UI opens a bare experiment link on GenAI traces
        page = runs_page(sweep_experiment.experiment_id, HEADLINE_VIEW)
        click.echo(f"    {sweep_experiment.name}: http://127.0.0.1:{mlflow_port}{page}")
    click.echo(
        "  Dagster daemon (schedules, sensors, run queue): log in "
        f"{paths.var_dir() / 'logs' / 'dagster-daemon.log'}"
    )
    children.append(daemon)

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        click.echo("stopping the servers")
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            child.wait(timeout=30)
        stack.close()
    ended = [c.returncode for c in children]
    click.echo(f"servers stopped (exit codes {ended})")


@main.group()
def experiment() -> None:
    """Pre-registered experiments: register a spec before any result, then run it."""


@experiment.command("list")
def experiment_list() -> None:
    """Every spec in configs/experiments and whether it is registered."""
    from eval_pipeline.experiments.registry import find_registration
    from eval_pipeline.experiments.spec import scan_specs
    from eval_pipeline.tracking.store import default_store, open_client

    specs, errors = scan_specs()
    client = open_client(default_store())
    for spec in specs:
        registration = find_registration(client, spec.id)
        state = (
            "not registered"
            if registration is None
            else f"registered {registration.spec_hash[:12]}"
        )
        click.echo(f"{spec.id}: {spec.kind}, margin {spec.margin:g}; {state}")
    for error in errors:
        click.echo(f"invalid: {error}", err=True)


@experiment.command("register")
@click.argument("experiment_id")
def experiment_register(experiment_id: str) -> None:
    """Hash the spec (with the model configs and judge it names) and log it to MLflow as a
    registration run, before any result exists."""
    from eval_pipeline.experiments.spec import load_spec
    from eval_pipeline.mission.runner import register_experiment
    from eval_pipeline.tracking.store import default_store

    registration, new = register_experiment(load_spec(experiment_id))
    store = default_store()
    verb = "registered" if new else "already registered, unchanged"
    click.echo(
        f"{experiment_id}: {verb}; spec hash {registration.spec_hash}; MLflow run "
        f"{registration.run_id} in {store.uri}"
    )


@experiment.command("run")
@click.argument("experiment_id")
@_subset_options
def experiment_run(
    experiment_id: str, case_patterns: str, categories: str, limit: int | None
) -> None:
    """Run both arms (one Dagster run per arm partition) and write the parity report;
    refuses an unregistered or altered spec, or another fixture set.

    With --cases, --categories or --limit: the registered arms on those cases only, in a
    folder of their own, the parity table printed as a SUBSET; no report, no MLflow result,
    no verdict of record."""
    from eval_pipeline import world_stages
    from eval_pipeline.experiments.registry import require_registration
    from eval_pipeline.experiments.spec import load_spec, resolve
    from eval_pipeline.mission.runner import run_experiment
    from eval_pipeline.tracking.store import default_store, open_client

    selection = _selection(case_patterns, categories, limit)
    spec = load_spec(experiment_id)
    material, configs, judge = resolve(spec)
    fixture_set = world_stages.current_fixture_set(paths.warehouse_path())
    registration = require_registration(
        open_client(default_store()), spec, material, fixture_set.fixture_id
    )
    if selection.chosen_anything:  # registered first: a subset is a smoke test, not a peek
        _run_experiment_subset(spec, selection, fixture_set, configs, judge, registration)
        return
    click.echo(f"{experiment_id}: registration {registration.run_id} holds; running the arms")
    outcomes = run_experiment(experiment_id)
    for outcome in outcomes:
        for failure in outcome.failures:
            click.echo(f"  {failure.step}: {failure.message}", err=True)
    if not all(o.success for o in outcomes):
        fail(f"experiment {experiment_id} did not finish (Dagster run {outcomes[-1].run_id})", 1)
    report = outcomes[-1].materializations[f"experiments/{experiment_id}/parity_report"]
    click.echo(str(report["report"]))
    click.echo(f"report: {report['path']}")


def _run_experiment_subset(
    spec: ExperimentSpec,
    selection: CaseSelection,
    fixture_set: FixtureSet,
    configs: dict[str, ModelConfig],
    judge: Judge,
    registration: Registration,
) -> None:
    from datetime import UTC, datetime

    from eval_pipeline.experiments.arms import run_arms_on_subset
    from eval_pipeline.experiments.parity import parity_report, report_markdown
    from eval_pipeline.experiments.subset import new_run_id, subset_banner, subset_root
    from eval_pipeline.lanes.agent_db import build_agent_world_db
    from eval_pipeline.providers.config import SIMULATED
    from eval_pipeline.scoring.gate import load_gate_config

    chosen = selection.choose(fixture_set.cases)
    run_id = new_run_id(datetime.now(UTC))
    root = subset_root(run_id) / spec.id
    scores = run_arms_on_subset(
        spec,
        cases=chosen,
        fixture_set=fixture_set,
        agent_db=build_agent_world_db(paths.warehouse_path(), paths.agent_world_dir()),
        configs=configs,
        judge=judge,
        run_id=f"subset-{run_id}",
        root=root,
    )
    providers = {name: configs[name].provider for name in spec.models()}
    report = parity_report(spec, registration.spec_hash, scores, load_gate_config(), providers)
    seeds = sorted({seed for arm in spec.arms().values() for seed in arm.seeds})
    simulated = [name for name in spec.models() if configs[name].provider == SIMULATED]
    banner = subset_banner(
        run_id,
        len(chosen),
        len(fixture_set.cases),
        fixture_set.fixture_id,
        selection,
        seeds,
        simulated,
    )
    text = f"{banner} The verdicts below are of these cases only.\n\n" + report_markdown(
        spec, report
    )
    (root / "parity_report.md").write_text(text + "\n", encoding="utf-8")
    click.echo(text)
    click.echo(f"\nsubset report: {root / 'parity_report.md'}")


@main.command()
@click.option(
    "--models",
    required=True,
    help="Comma-separated model config names (configs/models), e.g. claude-sonnet-4-5,gpt-4.1.",
)
@click.option("--seeds", default="0,1,2", show_default=True, help="Comma-separated seeds.")
@click.option(
    "--dry-run", is_flag=True, help="Print the calls and their worst-case cost; call nothing."
)
@_subset_options
def sweep(
    models: str,
    seeds: str,
    dry_run: bool,
    case_patterns: str,
    categories: str,
    limit: int | None,
) -> None:
    """Both lanes for each model × seed on the fixture set the main job froze, then scores,
    the gate, tracking and the report; real providers read their keys from the environment.
    The plan (calls and worst-case cost) is printed first. Exits 1 if a case got no usable
    reply (‡), printing the top causes; run it again once fixed to re-run those cases.

    With --cases, --categories or --limit: a quick run of both lanes on those cases only, in
    a folder of its own (var/subsets/), printed and never published as the suite."""
    from eval_pipeline import world_stages
    from eval_pipeline.experiments.sweep_plan import plan_sweep
    from eval_pipeline.providers.config import scan_model_configs
    from eval_pipeline.providers.harness import utc_today
    from eval_pipeline.providers.prices import load_price_book
    from eval_pipeline.scoring.judge import load_judge

    names = [name.strip() for name in models.split(",") if name.strip()]
    if not names:
        fail("--models names no model config")
    seed_list = _seed_list(seeds)
    from eval_pipeline.lanes.sweep import load_sweep_config

    selection = _selection(case_patterns, categories, limit)
    partitioned = load_sweep_config().seeds  # the lanes' seed partitions
    unknown = [seed for seed in seed_list if seed not in partitioned]
    if unknown and not selection.chosen_anything:  # a subset runs outside the partitions
        raise click.BadParameter(
            f"seed(s) {', '.join(map(str, unknown))} are not partitions of the lanes: the "
            f"sweep config {paths.sweep_config()} declares seeds "
            f"{', '.join(map(str, partitioned))}; add them there first",
            param_hint="--seeds",
        )
    judge = load_judge()
    scan = scan_model_configs()
    configs = scan.require([*names, judge.model])
    fixture_set = world_stages.current_fixture_set(paths.warehouse_path())
    chosen = selection.choose(fixture_set.cases) if selection.chosen_anything else None
    plan = plan_sweep(
        [configs[name] for name in names],
        seed_list,
        ("model", "product"),
        fixture_set,
        load_price_book(),
        utc_today(),
        judge,
        configs[judge.model],
        cases=chosen,
    )
    cases_shown = (
        f"{len(fixture_set.cases)} cases"
        if chosen is None
        else f"a SUBSET: {len(chosen)} of its {len(fixture_set.cases)} cases, "
        f"{selection.describe()}"
    )
    click.echo(
        f"Sweep plan: {', '.join(names)} × seeds {', '.join(map(str, seed_list))} on fixture "
        f"set {plan.fixture_id} ({cases_shown}), prices of {plan.day}:"
    )
    click.echo("\n".join("  " + line for line in plan.table().splitlines()))
    click.echo(
        f"Worst case: ${plan.worst_case_usd:,.2f} (every request at its bound, every attempt "
        "billed; the budget reserves each call's bound before sending it)"
    )
    for call in plan.calls:
        click.echo(f"  {call.model} as {call.role}: {call.bound}")
    for name, variable in sorted(plan.missing_keys.items()):
        click.echo(f"missing key: {name} reads {variable}, which is not set", err=True)
    if dry_run:
        click.echo("Dry run: nothing was called.")
        return
    if plan.missing_keys:
        fail(
            "not started: set "
            + ", ".join(sorted(set(plan.missing_keys.values())))
            + " in the environment"
        )
    if chosen is not None:
        _run_subset(names, seed_list, selection)
        return
    from eval_pipeline.mission.display import MissionBar, echo_gate, echo_headline
    from eval_pipeline.mission.runner import run_sweep

    bar = MissionBar()
    try:
        outcome = run_sweep(names, seed_list, progress=bar)
    finally:
        bar.close()
    _echo_lanes(outcome.lanes)
    if outcome.results is not None:
        _echo_results(outcome.results)
        echo_headline(outcome.results)
        echo_gate(outcome.results)
    unhealed = _echo_unhealed(outcome.lanes)
    if not outcome.success or unhealed:
        sys.exit(1)


@main.command()
@_world_options
@click.option(
    "--scale",
    type=float,
    default=None,
    help="Override the config's scale (for the label world: multiplies statement volume).",
)
@click.option(
    "--load/--no-load", default=False, help="Also load the tables into the DuckDB warehouse."
)
def world(config_path: Path | None, seed: int | None, scale: float | None, load: bool) -> None:
    """Generate a world and print its row counts and fingerprint."""
    from eval_pipeline import world_stages
    from eval_pipeline.warehouse import connect
    from eval_pipeline.world import build_world, load_world_config

    config_path = config_path or paths.default_world_config()
    _check_scale(config_path, scale)
    config = load_world_config(config_path, seed=seed, scale=scale)
    generated = build_world(config)
    click.echo(
        f"world {generated.plugin} (generator {generated.generator_version}) "
        f"seed={generated.seed} scale={generated.scale}"
    )
    for name, frame in sorted(generated.tables.items()):
        click.echo(f"  {name:<22} {frame.height:>10,} rows")
    if load:
        conn = connect(paths.warehouse_path())
        try:
            world_stages.store_world(conn, generated)
        finally:
            conn.close()
        click.echo(f"loaded into {paths.warehouse_path()} (schema world)")
    click.echo(f"fingerprint {generated.fingerprint}")


@main.group()
def fixtures() -> None:
    """Freeze and verify content-addressed fixture sets."""


@fixtures.command("freeze")
@_world_options
@click.option(
    "--out",
    "out_root",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Folder that receives <fixture_id>/ (default: data/fixtures).",
)
def fixtures_freeze(config_path: Path | None, seed: int | None, out_root: Path | None) -> None:
    """Generate the world and its answer key, build the suite and freeze it."""
    from eval_pipeline import world_stages
    from eval_pipeline.world import load_world_config, plugin_for_config

    config = load_world_config(config_path or paths.default_world_config(), seed=seed)
    plugin = plugin_for_config(config)
    generated = plugin.generate(config.seed, config.scale)
    answer_key = plugin.answer_key(generated)
    fixture_set = world_stages.freeze_suite(
        generated, answer_key, out_root or paths.fixtures_root(), plugin
    )
    manifest = fixture_set.manifest
    click.echo(
        f"froze {manifest.case_count} cases ({manifest.core_count} core) "
        f"from world fingerprint {manifest.world.fingerprint}"
    )
    for category in fixture_set.categories:
        click.echo(f"  {category:<18} {manifest.category_counts[category]:>4}")
    click.echo(f"fixture_id {manifest.fixture_id}")
    click.echo(f"path {fixture_set.path}")


@fixtures.command("verify")
@click.argument("directory", type=click.Path(path_type=Path), required=False)
def fixtures_verify(directory: Path | None) -> None:
    """Re-hash every file of a fixture set (default: every set under the fixtures root,
    never a staging folder); exit 2 naming the file if anything changed."""
    from eval_pipeline.fixtures.frozen import fixture_set_dirs, load_fixtures

    folders = [directory] if directory is not None else fixture_set_dirs(paths.fixtures_root())
    if not folders:
        fail(f"no fixture set under {paths.fixtures_root()}")
    for folder in folders:
        fixture_set = load_fixtures(folder)
        click.echo(
            f"ok {fixture_set.fixture_id}: {fixture_set.manifest.case_count} cases, "
            f"all {len(fixture_set.manifest.files) + 1} files verified"
        )


@main.group()
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


if __name__ == "__main__":
    main()

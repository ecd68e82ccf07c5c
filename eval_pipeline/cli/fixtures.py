"""`evalp fixtures`: freeze and verify content-addressed fixture sets."""

from __future__ import annotations

from pathlib import Path

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import fail, world_options


@click.group()
def fixtures() -> None:
    """Freeze and verify content-addressed fixture sets."""


@fixtures.command("freeze")
@world_options
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
    from eval_pipeline.cases.frozen import fixture_set_dirs, load_fixtures

    folders = [directory] if directory is not None else fixture_set_dirs(paths.fixtures_root())
    if not folders:
        fail(f"no fixture set under {paths.fixtures_root()}")
    for folder in folders:
        fixture_set = load_fixtures(folder)
        click.echo(
            f"ok {fixture_set.fixture_id}: {fixture_set.manifest.case_count} cases, "
            f"all {len(fixture_set.manifest.files) + 1} files verified"
        )

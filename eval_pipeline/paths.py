"""Where things live on disk, relative to the project root or overridden by environment."""

from __future__ import annotations

import os
from pathlib import Path

from eval_pipeline.errors import state_os_error

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIGS_DIR = PROJECT_ROOT / "configs"
DATA_DIR = PROJECT_ROOT / "data"
FIXTURES_DIR = DATA_DIR / "fixtures"


def var_dir() -> Path:
    """Working state (warehouse, Dagster home, MLflow store): `EVALP_HOME` or `./var`."""
    return Path(os.environ.get("EVALP_HOME", PROJECT_ROOT / "var")).resolve()


def warehouse_path() -> Path:
    """The DuckDB warehouse file: `EVALP_WAREHOUSE` or `<var>/warehouse.duckdb`."""
    override = os.environ.get("EVALP_WAREHOUSE")
    return Path(override).resolve() if override else var_dir() / "warehouse.duckdb"


def agent_world_dir() -> Path:
    """Where the product lane's world-only databases are built: `<var>/agent_world`."""
    return var_dir() / "agent_world"


def default_world_config() -> Path:
    """The world config the main job builds: `EVALP_WORLD_CONFIG` or the committed default."""
    override = os.environ.get("EVALP_WORLD_CONFIG")
    return Path(override).resolve() if override else CONFIGS_DIR / "worlds" / "label.yaml"


def models_dirs() -> tuple[Path, ...]:
    """The model config folders, in the order they are read: the committed `configs/models`,
    then `EVALP_MODELS_DIR` when set, whose files add to the committed ones (a file of the
    same name replaces the committed one): your own models never lose the judge's."""
    shipped = CONFIGS_DIR / "models"
    override = os.environ.get("EVALP_MODELS_DIR")
    if not override or Path(override).resolve() == shipped.resolve():
        return (shipped,)
    return (shipped, Path(override).resolve())


def sweep_config() -> Path:
    """The sweep the schedule runs: `EVALP_SWEEP_CONFIG` or `configs/sweeps/nightly.yaml`."""
    override = os.environ.get("EVALP_SWEEP_CONFIG")
    return Path(override).resolve() if override else CONFIGS_DIR / "sweeps" / "nightly.yaml"


def gate_config() -> Path:
    """The ship gate's candidates and rules: `EVALP_GATE_CONFIG` or `configs/gate.yaml` (a
    world of your own sets its own, e.g. a core requirement its suite can meet)."""
    override = os.environ.get("EVALP_GATE_CONFIG")
    return Path(override).resolve() if override else CONFIGS_DIR / "gate.yaml"


def judge_config() -> Path:
    """The judge's model and rubric (the rubric's path is relative to this file):
    `EVALP_JUDGE_CONFIG` or `configs/judge/judge.yaml`."""
    override = os.environ.get("EVALP_JUDGE_CONFIG")
    return Path(override).resolve() if override else CONFIGS_DIR / "judge" / "judge.yaml"


def baselines_dir() -> Path:
    """Accepted ship-gate baselines: `EVALP_BASELINES_DIR` or `configs/baselines`."""
    override = os.environ.get("EVALP_BASELINES_DIR")
    return Path(override).resolve() if override else CONFIGS_DIR / "baselines"


def lanes_dir() -> Path:
    """Each lane partition's own records: `<var>/lanes/<lane>/<model>/<seed>/`."""
    return var_dir() / "lanes"


def prices_path() -> Path:
    """The price book: `EVALP_PRICES` or the committed `configs/prices.yaml`."""
    override = os.environ.get("EVALP_PRICES")
    return Path(override).resolve() if override else CONFIGS_DIR / "prices.yaml"


def runs_dir() -> Path:
    """Where each run's call journal lives: `<var>/runs/<run>/envelopes.jsonl`."""
    return var_dir() / "runs"


def fixtures_root() -> Path:
    """Where fixture sets are frozen: `EVALP_FIXTURES_ROOT` or the committed `data/fixtures`."""
    override = os.environ.get("EVALP_FIXTURES_ROOT")
    return Path(override).resolve() if override else FIXTURES_DIR


def dagster_home() -> Path:
    """The Dagster instance folder: `DAGSTER_HOME` or `<var>/dagster_home`."""
    override = os.environ.get("DAGSTER_HOME")
    return Path(override).resolve() if override else var_dir() / "dagster_home"


def call_slots_dir(instance_root: Path | None = None) -> Path:
    """The instance's pools of provider slots (`providers.call_slots.MachineSlots`: a folder
    per provider, a lock file per slot), shared by every process calling a provider from
    this machine: the instance's lane runs and `evalp`'s own calls."""
    return (instance_root or dagster_home()) / "call-slots"


def dagster_yaml() -> str:
    """The local instance's dagster.yaml: SQLite storage in its folder (Dagster's default),
    telemetry off, and the same run queue as deploy/dagster.yaml: runs from the UI, the
    schedule, the sensors and `evalp` wait in Dagster's queue, and the daemon starts them
    within the per-provider limits (`providers.run_limits`)."""
    import yaml

    from eval_pipeline.providers.run_limits import RUNS_AT_ONCE, run_queue_limits

    config = {
        "telemetry": {"enabled": False},
        "run_coordinator": {
            "module": "dagster._core.run_coordinator",
            "class": "QueuedRunCoordinator",
            # Launching a run takes the daemon seconds (a worker process starting): one
            # thread per run the queue allows, so a night's first runs start together
            # (with 4, the second four started 5 s after the first: bench/sweep_scale.py).
            "config": {
                "dequeue_interval_seconds": 1,
                "dequeue_use_threads": True,
                "dequeue_num_workers": RUNS_AT_ONCE,
            },
        },
        "concurrency": {
            "runs": {
                "max_concurrent_runs": RUNS_AT_ONCE,
                "tag_concurrency_limits": run_queue_limits(),
            },
            # Every pool holds one step at a time unless given a limit of its own: the
            # `warehouse` pool keeps DuckDB's single writer safe across runs.
            "pools": {"default_limit": 1, "granularity": "op"},
        },
        # A run whose worker never started is marked failed, and the pool slots of a run
        # that ended are freed (a worker that died mid-run is found by `evalp`, which
        # checks the worker's process on this machine).
        "run_monitoring": {
            "enabled": True,
            "start_timeout_seconds": 180,
            "poll_interval_seconds": 10,
            "free_slots_after_run_end_seconds": 10,
        },
    }
    return yaml.safe_dump(config, sort_keys=False)


def prepared_dagster_home() -> Path:
    """The Dagster home, created with `dagster_yaml()` if it has no dagster.yaml yet."""
    home = dagster_home()
    config = home / "dagster.yaml"
    try:
        home.mkdir(parents=True, exist_ok=True)
        if not config.exists():
            config.write_text(dagster_yaml(), encoding="utf-8")
    except OSError as error:  # a read-only or full var/: named, not a traceback
        raise state_os_error(error, error.filename or home) from error
    return home


WORLD_FOLDER_FILES: dict[str, str] = {
    "EVALP_SWEEP_CONFIG": "sweep.yaml",
    "EVALP_GATE_CONFIG": "gate.yaml",
    "EVALP_JUDGE_CONFIG": "judge.yaml",
    "EVALP_MODELS_DIR": "models",
    "EVALP_PRICES": "prices.yaml",
    "EVALP_BASELINES_DIR": "baselines",
}
"""What a world's folder may hold beside its world config, and the setting each becomes."""


def use_world(config: Path) -> dict[str, str]:
    """Point this process (and the runs it starts) at a world of your own: `config` is its
    world YAML; a `sweep.yaml`, `gate.yaml`, `judge.yaml`, `models/`, `prices.yaml` or
    `baselines/` beside it replaces the shipped one; its working state goes to
    `var/worlds/<its folder>` (or `EVALP_HOME`) and its fixture sets to `fixtures/` in
    there. A setting already in the environment wins. Returns the settings made (called once, at the
    command's start, before anything reads them)."""
    config = config.resolve()
    if not config.is_file():
        from eval_pipeline.errors import ConfigError

        raise ConfigError(f"--world: no world config at {config}")
    folder = config.parent
    chosen = {"EVALP_WORLD_CONFIG": str(config)}
    for setting, name in WORLD_FOLDER_FILES.items():
        if (folder / name).exists():
            chosen[setting] = str(folder / name)
    home = Path(os.environ.get("EVALP_HOME", PROJECT_ROOT / "var" / "worlds" / folder.name))
    chosen["EVALP_HOME"] = str(home.resolve())
    chosen["EVALP_FIXTURES_ROOT"] = str(home / "fixtures")
    made = {key: value for key, value in chosen.items() if key not in os.environ}
    os.environ.update(made)
    return made

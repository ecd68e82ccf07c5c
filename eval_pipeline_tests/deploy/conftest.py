"""A real PostgreSQL server for the deployment tests: a throwaway cluster in a temp folder,
on a free loopback port (password auth over TCP) and a unix socket in that folder, stopped
and deleted at teardown.

PostgreSQL refuses to run as root, so as root the cluster belongs to an unprivileged user
(`postgres` where the OS packages created it, else `nobody`) and its commands run through
`runuser`. Without PostgreSQL binaries the test is skipped with the reason, unless
EVALP_REQUIRE_POSTGRES is set (CI sets it: there a missing server is a failure).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from eval_pipeline import paths
from eval_pipeline.defs.keys import MODELS_PARTITIONS
from eval_pipeline.defs.lane_assets import agent_world_asset
from eval_pipeline.defs.world_assets import answer_key_asset, fixtures_asset, world_asset
from eval_pipeline_tests.defs.conftest import lane_resources, prepare_lane_home

PG_BIN_ENV = "EVALP_PG_BIN"
REQUIRE_ENV = "EVALP_REQUIRE_POSTGRES"
USER = "evalp"
DATABASE = "dagster"
DEPLOY_DIR = paths.PROJECT_ROOT / "deploy"
MODELS = ("sim-small", "sim-strong")


class PostgresUnavailableError(Exception):
    """No PostgreSQL server can be started here; the message says why."""


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    password: str
    database: str
    socket_dir: Path

    def dagster_env(self) -> dict[str, str]:
        """The variables deploy/dagster.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.database,
        }

    def engine(self, database: str | None = None) -> sa.Engine:
        url = sa.URL.create(
            "postgresql+psycopg2",
            username=self.user,
            password=self.password,
            host=self.host,
            port=self.port,
            database=database or self.database,
        )
        return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)


def postgres_bin_dir() -> Path:
    """The folder holding initdb, pg_ctl and postgres: EVALP_PG_BIN, else PATH, else the
    newest /usr/lib/postgresql/<version>/bin (Debian's packages)."""
    wanted = ("initdb", "pg_ctl", "postgres")
    candidates: list[Path] = []
    if os.environ.get(PG_BIN_ENV):
        candidates.append(Path(os.environ[PG_BIN_ENV]))
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(Path(found).resolve().parent)
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    candidates.extend(reversed(versions))
    for folder in candidates:
        if all((folder / name).is_file() and os.access(folder / name, os.X_OK) for name in wanted):
            return folder
    raise PostgresUnavailableError(
        f"no folder with {', '.join(wanted)} (looked in {PG_BIN_ENV}, PATH and "
        "/usr/lib/postgresql/*/bin; install the OS package `postgresql`)"
    )


def cluster_owner() -> str | None:
    """The unprivileged user to run the cluster as when we are root (else None: ourselves)."""
    if os.geteuid() != 0:
        return None
    if shutil.which("runuser") is None:
        raise PostgresUnavailableError("running as root and `runuser` is missing")
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PostgresUnavailableError("running as root; neither user `postgres` nor `nobody` exists")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """initdb / pg_ctl on a folder of our own, run as `owner` when given."""

    def __init__(self, bin_dir: Path, owner: str | None) -> None:
        self.bin_dir = bin_dir
        self.owner = owner
        self.root = Path(tempfile.mkdtemp(prefix="evalp-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        if owner is not None:
            entry = pwd.getpwnam(owner)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.owner is not None:
            command = ["runuser", "-u", self.owner, "--", *command]
        return subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, timeout=timeout, check=False
        )

    def init(self, password: str) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(password + "\n", encoding="utf-8")
        if self.owner is not None:
            entry = pwd.getpwnam(self.owner)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        done = self.run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )
        pwfile.unlink()
        if done.returncode != 0:
            raise PostgresUnavailableError(f"initdb failed: {(done.stderr or done.stdout).strip()}")

    def start(self, port: int) -> bool:
        options = " ".join(
            shlex.quote(part)
            for part in (
                "-p",
                str(port),
                "-k",
                str(self.root),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            )
        )
        started = self.run(
            "pg_ctl", "start", "-w", "-t", "30", "-D", str(self.data), "-l", str(self.log),
            "-o", options,
        )  # fmt: skip
        return started.returncode == 0

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8").splitlines()[-5:])
        except OSError as error:
            return f"(no server log: {error})"

    def stop(self) -> None:
        stopped = self.run("pg_ctl", "stop", "-w", "-t", "30", "-m", "fast", "-D", str(self.data))
        if stopped.returncode != 0:
            self.run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data))

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres(cluster: Cluster) -> PostgresServer:
    """Initialize the cluster, start it on a free port (three tries against a port taken
    between choosing and binding it), and create the database."""
    password = secrets.token_urlsafe(16)
    cluster.init(password)
    for _ in range(3):
        port = free_port()
        if cluster.start(port):
            break
    else:
        raise PostgresUnavailableError(f"pg_ctl start failed; server log:\n{cluster.log_tail()}")
    server = PostgresServer("127.0.0.1", port, USER, password, DATABASE, cluster.root)
    admin = server.engine("postgres")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {DATABASE}"))
    finally:
        admin.dispose()
    return server


@pytest.fixture
def postgres_server() -> Iterator[PostgresServer]:
    """A running PostgreSQL server with an empty database for this test."""
    try:
        cluster = Cluster(postgres_bin_dir(), cluster_owner())
    except PostgresUnavailableError as error:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but no PostgreSQL server can be started: {error}")
        pytest.skip(f"no PostgreSQL server can be started here: {error}")
    try:
        try:
            server = start_postgres(cluster)
        except PostgresUnavailableError as error:
            if os.environ.get(REQUIRE_ENV):
                pytest.fail(f"{REQUIRE_ENV} is set but PostgreSQL did not start: {error}")
            pytest.skip(f"no PostgreSQL server can be started here: {error}")
        yield server
    finally:
        cluster.stop()
        cluster.remove()


@dataclass(frozen=True)
class Deployment:
    """The project's state in a test folder, with a Dagster home holding deploy/dagster.yaml
    and the environment pointing every process (this one and those it starts) at both."""

    lane_home: Path
    dagster_home: Path
    server: PostgresServer


@pytest.fixture
def deployment(
    isolated_state: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> Deployment:
    """The shipped instance config on the test's Postgres server, with the world, answer
    key, fixtures and agent world materialized and the sweep's models registered: one
    process creates the schema and the upstream assets first (fresh stores are not safe for
    concurrent first use), before anything runs in parallel."""
    lane_home = prepare_lane_home(isolated_state, monkeypatch)
    home = lane_home / "dagster_postgres"
    home.mkdir()
    shutil.copy(DEPLOY_DIR / "dagster.yaml", home / "dagster.yaml")
    for name, value in postgres_server.dagster_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    # Code locations started by other processes build their resources from these.
    monkeypatch.setenv("EVALP_WORLD_CONFIG", str(lane_home / "world.yaml"))
    with dg.DagsterInstance.get() as instance:
        upstream = [world_asset, answer_key_asset, fixtures_asset, agent_world_asset]
        result = dg.materialize(upstream, instance=instance, resources=lane_resources(lane_home))
        assert result.success
        instance.add_dynamic_partitions(MODELS_PARTITIONS, list(MODELS))
    return Deployment(lane_home, home, postgres_server)

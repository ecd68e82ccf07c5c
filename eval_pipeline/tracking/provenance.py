"""What code produced a number: the commit, whether the checkout was dirty, and the
package versions it ran with (recorded with every sweep and experiment run)."""

from __future__ import annotations

import hashlib
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.records import FrozenRecord

KEY_PACKAGES: tuple[str, ...] = (
    "eval-pipeline",
    "dagster",
    "mlflow",
    "duckdb",
    "polars",
    "pydantic",
    "anthropic",
    "openai",
    "sqlglot",
    "numpy",
)
NOT_A_CHECKOUT = "not-a-git-checkout"


class CodeVersion(FrozenRecord):
    commit: str
    """The HEAD commit, or `not-a-git-checkout` for an installed copy."""
    dirty: bool
    """Tracked or untracked, not ignored, files differ from the commit."""
    lock_sha256: str
    """The uv.lock the environment was built from ('' when there is none)."""
    packages: dict[str, str]
    """Every installed distribution and its version."""

    def key_packages(self) -> dict[str, str]:
        return {name: self.packages[name] for name in KEY_PACKAGES if name in self.packages}

    @property
    def label(self) -> str:
        return self.commit[:12] + ("-dirty" if self.dirty else "")


def _git(*args: str, root: Path) -> str | None:
    """Git's output, or None when `root` is not inside a work tree (an installed copy)."""
    inside = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
        check=False,
    )
    if inside.returncode != 0:
        return None
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@cache
def code_version(root: Path = PROJECT_ROOT) -> CodeVersion:
    """The code version of this process (cached: the checkout does not change under a
    running process in any way we could honestly record mid-run)."""
    head = _git("rev-parse", "HEAD", root=root)
    status = _git("status", "--porcelain", root=root)
    lock = root / "uv.lock"
    packages = {
        (dist.metadata["Name"] or "").lower().replace("_", "-"): dist.version
        for dist in metadata.distributions()
    }
    return CodeVersion(
        commit=head.strip() if head is not None else NOT_A_CHECKOUT,
        dirty=bool(status and status.strip()),
        lock_sha256=hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else "",
        packages=dict(sorted(packages.items())),
    )

"""The Dagster webserver `evalp ui` runs: Dagster's own app, answering loopback host names only.

`dagster dev` and `dagster-webserver` answer any Host header, so a page on another site can
drive the GraphQL API through DNS rebinding (its own name re-pointed at 127.0.0.1): the
browser then sends that name as the Host. Neither has an allow-list option, so this module
builds the same app (`dagster_webserver.app`) and wraps it in Starlette's
`TrustedHostMiddleware`; a request naming any other host gets a 400 before Dagster sees it.
Run as `python -m eval_pipeline.ui_server --workspace W --port P` (a child of `evalp ui`).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp

if TYPE_CHECKING:
    from dagster._core.workspace.context import IWorkspaceProcessContext

LOOPBACK_HOST = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""Host names (any port) a browser on this machine uses to reach a loopback server."""


def loopback_only(app: ASGIApp) -> ASGIApp:
    """``app`` behind a Host check: HTTP and websocket requests naming a host outside
    :data:`LOOPBACK_NAMES` are answered 400 ("Invalid host header")."""
    return TrustedHostMiddleware(app, allowed_hosts=list(LOOPBACK_NAMES), www_redirect=False)


def build_app(context: IWorkspaceProcessContext[Any]) -> ASGIApp:
    """Dagster's webserver app for ``context``, accepting loopback host names only."""
    from dagster_webserver.app import create_app_from_workspace_process_context

    return loopback_only(create_app_from_workspace_process_context(context))


def serve(workspace: Path, port: int, host: str = LOOPBACK_HOST) -> None:
    """Serve the Dagster UI for ``workspace`` on the instance of ``$DAGSTER_HOME`` until
    SIGINT/SIGTERM, as `dagster-webserver` does, with the loopback Host check in front."""
    import uvicorn
    from dagster import DagsterInstance
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_webserver.version import __version__

    with DagsterInstance.get() as instance:
        # The webserver CLI's defaults (statement timeout ms, pool recycle s, pool overflow).
        instance.optimize_for_webserver(15000, 3600, 20)
        with WorkspaceProcessContext(
            instance,
            version=__version__,
            workspace_load_target=WorkspaceFileTarget(paths=[str(workspace)]),
        ) as context:
            uvicorn.run(build_app(context), host=host, port=port, log_level="warning")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval_pipeline.ui_server")
    parser.add_argument("--workspace", type=Path, required=True, help="workspace.yaml")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # uvicorn stops on SIGTERM, then raises the signal again once it has: as an interrupt
    # here, so the workspace context still shuts its code server down (no orphan).
    signal.signal(signal.SIGTERM, interrupt)
    with contextlib.suppress(KeyboardInterrupt):  # the way SIGINT and SIGTERM end it
        serve(args.workspace, args.port)


if __name__ == "__main__":
    main()

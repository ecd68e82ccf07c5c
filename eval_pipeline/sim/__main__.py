"""``python -m eval_pipeline.sim``: run the simulated provider until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import sys

from eval_pipeline.sim.errors import SimError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval_pipeline.sim",
        description="Simulated LLM provider (OpenAI Chat Completions + Anthropic Messages).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--seed", type=int, default=0, help="server seed")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before each reply")
    parser.add_argument(
        "--profile-options",
        default=None,
        help='JSON object keyed by profile, e.g. \'{"flaky": {"drop": 0.1}}\'',
    )
    parser.add_argument(
        "--request-log",
        default=None,
        metavar="PATH",
        help="append every model request (billed or not, with usage) to this JSON-lines file",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="stop when this process (the one that started the server) is gone",
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE to register more profiles (repeatable)",
    )
    args = parser.parse_args(argv)

    from eval_pipeline.sim.server import serve

    try:
        serve(
            args.host,
            args.port,
            args.seed,
            args.latency_ms,
            args.profile_options,
            plugins=args.plugin,
            request_log=args.request_log,
            parent_pid=args.parent_pid,
        )
    except (SimError, OSError) as exc:
        print(f"sim: error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

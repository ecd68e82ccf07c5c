"""`python -m eval_pipeline.cli`: the `evalp` command."""

from eval_pipeline.cli import main

main()

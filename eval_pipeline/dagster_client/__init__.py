"""`evalp`'s client of Dagster: launching the main job, the lanes' partitions, the results
and the experiments on a real Dagster instance, saying what was up to date and skipped,
recovering after a killed demo, and the progress display while they run (what is printed
when they end is `cli.outcomes`')."""

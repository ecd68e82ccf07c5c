"""The dataset world: a user's own cases (JSONL or CSV) and tools (Python callables),
evaluated like any world (docs/world.md, "Evaluate your own cases")."""

"""The case model with its answer readers, and frozen, content-addressed fixture sets (the
cases, their manifest and their integrity)."""

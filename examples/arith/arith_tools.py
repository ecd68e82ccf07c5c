"""The arithmetic example's one tool (named in world.yaml as `arith_tools:add`)."""


def add(a: int, b: int) -> int:
    """Add two integers: returns a + b."""
    return a + b

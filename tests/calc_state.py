"""A cache at module level, kept in ``sys.modules`` between runs (see calc_tool_env)."""

SEEN: set[int] = set()

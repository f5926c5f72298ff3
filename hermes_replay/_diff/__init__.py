"""Room ``_diff.compare``: comparing two runs — cassettes, replay results, or one of each.

``compare`` holds the three inputs' views and the comparison (pure functions, no printing);
``tool_calls`` finds the first differing tool call of a rollout.

May import: the foundation, ``_cassette``, ``_session.session``, ``_runner``.
"""

"""Room ``_diff.compare``: comparing two runs — cassettes, replay results, or one of each.

``compare`` holds the three inputs' views and the comparison (pure functions, no printing);
``tool_calls`` finds the first differing tool call of a rollout; ``render`` turns a report
into the lines ``hermes-replay diff`` prints (as ``_check._report`` does for ``check``).

May import: the foundation, ``_terminal``, ``_cassette``, ``_session.session``, ``_runner``.
"""

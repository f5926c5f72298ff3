"""The Ray executor's ordering of results (``_corpus/on_ray._InOrder``), without a cluster."""

from __future__ import annotations

from types import SimpleNamespace

from hermes_replay._corpus.on_ray import _InOrder


def test_results_that_finished_out_of_order_are_handed_on_at_ctrl_c():
    """Before: a result held back behind an unfinished earlier one reached the final table
    only, never the caller's on_done (so it was neither printed nor named as found) — what
    made test_ctrl_c_cancels_the_run_and_frees_the_cluster depend on arrival order."""
    seen = []
    order = _InOrder(seen.append)
    one, two = SimpleNamespace(index=1), SimpleNamespace(index=2)
    order.add(two)
    order.add(one)
    assert seen == []  # index 0 never came
    order.flush_rest()
    assert seen == [one, two] and order.done == [one, two]

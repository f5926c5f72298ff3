"""``pytest -n N`` for this suite: tests one by one, except that each ``xdist_group`` runs on
one worker (xdist's ``loadgroup``) — so the Ray cluster tests never run two clusters at once on
a 2-core machine, and a module's costly fixture (the benchmark's quick run, the docs build, the
wheel's venv) is made once. A plugin of its own (``pytest_plugins`` in ``conftest.py``), so a
test can load it into a sub-session and prove it (``test_xdist_groups.py``).

Set here, not in addopts, so a run with ``-p no:xdist`` (the hermetic-suite test's) still
parses its options. Both ends must agree: the controller schedules by group, and each worker
names its tests ``id@group``. A worker decides that from its own parse of the command line,
before any plugin's ``pytest_configure`` — and there ``-n 3`` alone means no grouping — so the
controller tells each worker (``pytest_configure_node``). Without that, every group was spread
like any other test: three Ray clusters at once and the docs built three times (seen in a run
that logged every process it started).
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if workerinput.get("hermes_loadgroup"):
            config.option.loadgroup = True  # read by xdist's worker when it names the tests
    elif getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent under -p no:xdist
def pytest_configure_node(node: Any) -> None:
    node.workerinput["hermes_loadgroup"] = node.config.getvalue("dist") == "loadgroup"

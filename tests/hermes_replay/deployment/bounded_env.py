"""``multi_signal_env`` with a bounded number of training items per worker (for the deployment
test of ``test_deployment.py``).

Why bounded: in ``serve`` a worker draws items for as long as the trainer wants batches, and
at shutdown it cancels the group it is in the middle of — when that happens depends on the
clock, so an unbounded recorded deployment can leave a half-recorded group that its replay
never reaches. A worker that draws exactly ``items_per_worker`` items and then idles records
(and replays) a set of rollouts fixed by its configuration alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from environments.hermes_base_env import default_server_configs
from environments.multi_signal_env import MultiSignalEnv, MultiSignalEnvConfig


class BoundedEnvConfig(MultiSignalEnvConfig):
    items_per_worker: int = Field(default=2, ge=1,
                                  description="Training items one worker draws, then no more.")


class BoundedEnv(MultiSignalEnv):
    name = "bounded-multi-signal"
    env_config_cls = BoundedEnvConfig
    config: BoundedEnvConfig

    @classmethod
    def config_init(cls) -> tuple[BoundedEnvConfig, list[Any]]:
        return BoundedEnvConfig(max_agent_turns=4, group_size=2, eval_size=2), \
            default_server_configs()

    async def get_next_item(self) -> dict[str, Any] | None:
        if self._index >= self.config.items_per_worker:
            return None  # atroposlib's serve loop then starts no new group
        return await super().get_next_item()


if __name__ == "__main__":
    BoundedEnv.cli()

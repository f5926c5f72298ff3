"""Broken on purpose: the clock, a uuid and unseeded randomness reach its prompts (issue 26).
Each finding is marked with a trailing check comment; nothing here is run."""

import datetime
import random
import time
import uuid
from typing import Any

from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig

GREETING = f"Session {uuid.uuid4()}."  # check: volatile-prompt
STARTED = time.time()  # timing only, never in a prompt: fine


class VolatilePromptEnv(HermesAgentBaseEnv):
    name = "volatile-prompt"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[Any]]:
        config = HermesAgentEnvConfig(
            system_prompt=f"Today is {datetime.date.today()}.")  # check: volatile-prompt
        return config, []

    async def setup(self) -> None:
        self.items = list(range(10))
        random.shuffle(self.items)  # in setup: replay seeds random first, fine
        self.opened = datetime.datetime.now()  # check: volatile-prompt
        self.loaded_at = time.time()  # never read where prompts are built: fine

    async def get_next_item(self) -> dict[str, Any]:
        return {"n": self.items.pop(), "pick": random.choice("abc")}  # check: volatile-prompt

    def format_prompt(self, item: dict[str, Any]) -> str:
        return (f"{GREETING} It is {self._now()} (open since {self.opened}). "
                f"What is {item['n']} squared?")

    def _now(self) -> str:
        return datetime.datetime.now().strftime("%H:%M")  # check: volatile-prompt

    async def compute_reward(self, item: dict[str, Any], result: Any, ctx: Any) -> float:
        started = time.time()  # timing of the reward, not a prompt: fine
        del started
        return 1.0

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        return None

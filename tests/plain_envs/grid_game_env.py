"""A gymnasium-style grid game played over several turns, moves parsed by atroposlib.

The game has the ``reset()`` / ``step(action)`` shape of a gymnasium environment. Each rollout
(``collect_trajectory``; atroposlib's default ``collect_trajectories`` runs ``group_size`` of
them at once) shows the board, asks for a move as a ``<tool_call>`` in plain text, parses it
with ``atroposlib.utils.tool_call_parser.parse_tool_call`` and steps the game until it ends.

Every episode draws its own seed from Python's ``random`` (gymnasium's ``reset(seed=...)``) and
its first observation names it, so the rollouts of a group are different conversations from the
first request on. (Without it, a group's four first requests are identical, and a sampling model,
the scripted stand-in included, hands its samples to identical concurrent requests in arrival
order: which rollout got which reply would change from one recording to the next.)
"""

import random
from typing import Any, Dict, List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataItem
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from atroposlib.utils.tool_call_parser import parse_tool_call

MOVE_TOOL = {
    "type": "function",
    "function": {
        "name": "move",
        "description": "Move one cell on the grid.",
        "parameters": {"type": "object", "properties": {
            "direction": {"type": "string", "enum": ["left", "right", "up", "down"]}},
            "required": ["direction"]},
    },
}
SYSTEM = ("You are playing GRID GAME on a 3x3 board. Reach the goal G from your position P. "
          'Answer with one move as <tool_call>{"name": "move", "arguments": '
          '{"direction": "left|right|up|down"}}</tool_call>.')
STEPS = {"left": (0, -1), "right": (0, 1), "up": (-1, 0), "down": (1, 0)}


class GridGame:
    """reset() -> observation; step(action) -> (observation, reward, terminated, truncated)."""

    def __init__(self, start: Tuple[int, int], goal: Tuple[int, int], max_steps: int = 4):
        self.start, self.goal, self.max_steps = start, goal, max_steps

    def reset(self, seed: int) -> str:
        self.pos, self.t, self.seed = self.start, 0, seed
        return f"Episode {seed}.\n{self.render()}"

    def render(self) -> str:
        rows = []
        for r in range(3):
            rows.append(" ".join("P" if (r, c) == self.pos else "G" if (r, c) == self.goal
                                 else "." for c in range(3)))
        return "\n".join(rows)

    def step(self, action: Optional[str]):
        self.t += 1
        if action in STEPS:
            dr, dc = STEPS[action]
            r, c = self.pos[0] + dr, self.pos[1] + dc
            if 0 <= r < 3 and 0 <= c < 3:
                self.pos = (r, c)
        reward = 1.0 if self.pos == self.goal else -0.1 if action not in STEPS else 0.0
        return self.render(), reward, self.pos == self.goal, self.t >= self.max_steps


class GridGameEnv(BaseEnv):
    name = "grid_game"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(
            tokenizer_name="NousResearch/DeepHermes-3-Llama-3-8B-Preview",
            group_size=4,
            use_wandb=True,
            max_token_length=2048,
            total_steps=10,
        )
        return env_config, [APIServerConfig(model_name="hermes", base_url="http://localhost:9001/v1",
                                            api_key="", timeout=60)]

    async def setup(self):
        self.boards = [((0, 0), (0, 2)), ((2, 2), (1, 2)), ((1, 1), (0, 1))]
        self.iter = 0

    async def get_next_item(self) -> Item:
        board = self.boards[self.iter % len(self.boards)]
        self.iter += 1
        return board

    async def collect_trajectory(self, item) -> Tuple[Optional[ScoredDataItem], List[Item]]:
        game = GridGame(*item)
        observation = game.reset(seed=random.randrange(10**9))
        messages: List[Dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        total, done = 0.0, False
        while not done:
            messages.append({"role": "user", "content": f"Board:\n{observation}\nYour move?"})
            completion = await self.server.chat_completion(messages=messages, n=1,
                                                           max_tokens=128)
            choice = completion.choices[0]
            text = choice.message.content or ""
            messages.append({"role": "assistant", "content": text})
            name, arguments, is_error = parse_tool_call(text, [MOVE_TOOL])
            action = None if is_error else arguments.get("direction")
            observation, reward, terminated, truncated = game.step(action)
            total += reward
            done = terminated or truncated
        out = tokenize_for_trainer(self.tokenizer, messages, choice.finish_reason)
        return ScoredDataItem(tokens=out["tokens"], masks=out["masks"], scores=total,
                              messages=messages), []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    GridGameEnv.cli()

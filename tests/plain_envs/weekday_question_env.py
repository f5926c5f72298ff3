"""A dataset whose questions name weekdays and dates (word problems): the words are the item's
own text, the same in every run. ``--env.clock_in_prompt True`` also puts today's weekday in the
system prompt — a value that really varies."""

import datetime
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from pydantic import Field

QUESTIONS = [
    {"question": "On Monday Ann had 3 apples and on Tuesday she got 4 more. What is 3 + 4?",
     "answer": 7},
    {"question": "From Friday, 5 January 2024 to Sunday Bo read 12 pages, then 9. "
                 "What is 12 + 9?", "answer": 21},
]


class WeekdayConfig(BaseEnvConfig):
    clock_in_prompt: bool = Field(False, description="name today's weekday in the prompt")


class WeekdayQuestionEnv(BaseEnv):
    name = "weekday_questions"
    env_config_cls = WeekdayConfig

    @classmethod
    def config_init(cls) -> Tuple[WeekdayConfig, List[APIServerConfig]]:
        return (WeekdayConfig(tokenizer_name="gpt2", group_size=2, use_wandb=True,
                              max_token_length=512, total_steps=2,
                              ensure_scores_are_not_same=False, wandb_name="weekdays"),
                [APIServerConfig(model_name="m", base_url="http://localhost:9001/v1",
                                 api_key="")])

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        item = QUESTIONS[self.iter % len(QUESTIONS)]
        self.iter += 1
        return item

    def _messages(self, item):
        messages = [{"role": "user", "content": item["question"]}]
        if self.config.clock_in_prompt:
            today = datetime.date.today().strftime("%A")
            messages.insert(0, {"role": "system", "content": f"Today is {today}."})
        return messages

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        messages = self._messages(item)
        completion = await self.server.chat_completion(messages=messages,
                                                       n=self.config.group_size)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completion.choices:
            text = choice.message.content
            out = tokenize_for_trainer(self.tokenizer,
                                       messages + [{"role": "assistant", "content": text}])
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(1.0 if f"\\boxed{{{item['answer']}}}" in text else 0.0)
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    WeekdayQuestionEnv.cli()

"""Arithmetic scored in a process pool of the env's own, made in ``setup``.

Community envs (math_server_zero and others) grade in a ``ProcessPoolExecutor`` so a slow or
hanging grader cannot stall the event loop. Such an env must replay under the main job's
``-j`` workers as it runs under its own ``python -m … process``: a daemonic worker may not
start children (issue 45, item 2). Everything but the pool is ``arith_chat_env``'s.
"""

import os
from concurrent.futures import ProcessPoolExecutor

from arith_chat_env import ArithmeticChatEnv


def grade(text: str, answer: int) -> tuple[float, int]:
    """The rule, run in the pool's child process; its pid proves a child really graded it."""
    return (1.0 if f"\\boxed{{{answer}}}" in text else 0.0), os.getpid()


class ProcessPoolEnv(ArithmeticChatEnv):
    name = "process_pool"

    async def setup(self):
        self.pool = ProcessPoolExecutor(max_workers=1)
        await super().setup()

    def reward(self, text: str, answer: int) -> float:
        score, pid = self.pool.submit(grade, text, answer).result()
        assert pid != os.getpid(), "the pool graded in the env's own process"
        return score


if __name__ == "__main__":
    ProcessPoolEnv.cli()

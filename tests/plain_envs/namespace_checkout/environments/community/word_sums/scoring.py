"""Scoring helpers of the word-sums env, imported relatively (as community envs do)."""


def boxed_reward(text: str, answer: int) -> float:
    return 1.0 if f"\\boxed{{{answer}}}" in text else -0.5

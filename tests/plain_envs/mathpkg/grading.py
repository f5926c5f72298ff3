"""Grading helpers of the package env, imported relatively (``from .grading import …``)."""

import re

BOXED = re.compile(r"\\boxed\{(-?\d+)\}")


def boxed_number(text: str):
    found = BOXED.search(text)
    return int(found.group(1)) if found else None


def grade(text: str, answer: int) -> float:
    return 1.0 if boxed_number(text) == answer else 0.0

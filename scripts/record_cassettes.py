"""Re-record every shipped cassette against the scripted endpoint (one command).

    python scripts/record_cassettes.py            # all example environments, process + evaluate
    python scripts/record_cassettes.py multi_signal_env

The scripted endpoint is the project's stand-in for a model (no weights can be had where
this is built); its seed and latency are fixed here so a re-recording is reproducible up to
the order in which concurrent requests arrive. Run from the repository root: cassette
headers store the env file relative to the working directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (env file stem, extra flags for process, extra flags for evaluate)
EXAMPLES: dict[str, tuple[list[str], list[str]]] = {
    "terminal_test_env": (["--env.total_steps", "3", "--env.group_size", "4"],
                          ["--env.eval_size", "3"]),
    "research_judge_env": (["--env.total_steps", "3", "--env.group_size", "4"],
                           ["--env.eval_size", "3"]),
    "multi_signal_env": (["--env.total_steps", "3", "--env.group_size", "4"],
                         ["--env.eval_size", "4"]),
}


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    for name, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                        "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}.items():
        os.environ.setdefault(name, value)
    from hermes_replay.cli import main as cli
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    wanted = argv or list(EXAMPLES)
    unknown = [w for w in wanted if w not in EXAMPLES]
    if unknown:
        print(f"unknown example(s) {unknown}; choose from {sorted(EXAMPLES)}", file=sys.stderr)
        return 2
    failures = 0
    with ScriptedEndpoint(script="examples", seed=0, latency=(0.0, 0.02)) as endpoint:
        for stem in wanted:
            process_flags, eval_flags = EXAMPLES[stem]
            for mode, flags in (("process", process_flags), ("evaluate", eval_flags)):
                out = f"data/{stem}/{'groups.jsonl' if mode == 'process' else 'evals'}"
                out_flag = ("--env.data_path_to_save_groups" if mode == "process"
                            else "--env.data_dir_to_save_evals")
                code = cli([
                    "record", f"environments/{stem}.py",
                    "--cassette", f"cassettes/{stem}/{mode}.jsonl",
                    "--endpoint", endpoint.base_url, "--model", "scripted-example",
                    "--server-type", "openai",
                    "--", mode, *flags, out_flag, out,
                ])
                failures += code != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

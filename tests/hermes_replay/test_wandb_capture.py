import numpy as np
import wandb

from hermes_replay._runner.wandb import capture_wandb


def test_captures_init_and_log_and_restores_module():
    original_log = wandb.log
    with capture_wandb() as cap:
        assert wandb.run is None
        run = wandb.init(project="p", name="n", config={"api_key": "sk-should-not-be-kept"})
        assert wandb.run is run
        wandb.log({"train/mean_reward": np.float64(0.25), "n": np.int64(3)}, step=1)
        run.log({"train/mean_reward": 0.5}, step=2)
        table = wandb.Table(columns=["text", "score"])
        table.add_data("a", 1.0)
        wandb.log({"train/rollouts": table}, step=2)
    assert wandb.log is original_log
    assert wandb.run is None
    assert cap.runs == [{"name": "n", "project": "p", "config_keys": ["api_key"]}]
    assert "sk-should" not in repr(cap)
    assert cap.history("train/mean_reward") == [0.25, 0.5]
    assert isinstance(cap.history("n")[0], int)
    assert cap.latest("train/") == {
        "train/mean_reward": 0.5,
        "train/rollouts": {"_type": "table", "columns": ["text", "score"], "rows": 1},
    }


def test_non_finite_values_are_kept_readable():
    with capture_wandb() as cap:
        wandb.log({"x": float("nan")})
    assert cap.latest() == {"x": "nan"}

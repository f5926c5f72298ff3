"""``RunResult.groups`` is groups.jsonl as JSON says, with one int object per distinct number."""

from __future__ import annotations

import json

from hermes_replay._runner.run import read_groups


def test_groups_read_back_equal_json_and_share_their_token_ints(tmp_path):
    path = tmp_path / "groups.jsonl"
    groups = [{"tokens": [[5000 + i % 7 for i in range(500)]] * 2,
               "masks": [[-100] * 100 + [5000 + i % 7 for i in range(100, 500)]] * 2,
               "scores": [1.0, 0.25], "messages": [[{"role": "user", "content": "7 é 12"}]] * 2,
               "overrides": None, "big": 10**30}]
    path.write_text("".join(json.dumps(g) + "\n" for g in groups) + "\n", encoding="utf-8")
    read = read_groups(["--env.data_path_to_save_groups", str(path)])
    assert read == groups
    tokens, masks = read[0]["tokens"][0], read[0]["masks"][0]
    assert len({id(t) for t in tokens}) == 7  # 500 ids, 7 distinct values: 7 objects
    assert masks[200] is tokens[200] and masks[0] is masks[99]
    assert read_groups(["--env.data_path_to_save_groups", str(tmp_path / "none.jsonl")]) == []

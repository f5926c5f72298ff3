"""A replay's ``--out`` folder holds one run, written as its own files (issue 25, items 14, 15
and 24): a reused folder does not mix runs, links planted in it are not written through, and an
output path with ``..`` in the recorded command is normalised to a name inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_replay._errors import CassetteError
from hermes_replay._runner.plan import redirect_outputs
from hermes_replay._runner.run import run_cassette

ROOT = Path(__file__).resolve().parents[2]
EVALUATE = ROOT / "cassettes" / "multi_signal_env" / "evaluate.jsonl"
CALC = "cassettes/calc_tool_env/process.jsonl"


def test_a_reused_out_folder_holds_only_the_new_run(calc_project, tmp_path):
    out = tmp_path / "out"
    first = run_cassette(CALC, out_dir=out)
    assert len(first.groups) == 2
    # what a run of another cassette (or an older version of this one) left there
    (out / "groups.jsonl").write_text('{"stale": true}\n', encoding="utf-8")
    (out / "groups_1.jsonl").write_text('{"stale": true}\n', encoding="utf-8")
    second = run_cassette(CALC, out_dir=out)
    assert second.groups == first.groups  # this run's groups, read from this run's file
    assert not any("stale" in g for g in second.groups)
    names = sorted(p.name for p in out.iterdir())
    assert "groups_1.jsonl" not in names and "groups_2.jsonl" not in names, names


def test_links_planted_in_out_are_replaced_not_followed(calc_project, tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    targets = {name: outside / f"{name}.target" for name in ("env.log", "groups.jsonl",
                                                               "result.json")}
    for name, target in targets.items():
        target.write_text("keep me\n", encoding="utf-8")
        (out / name).symlink_to(target)
    result = run_cassette(CALC, out_dir=out)
    assert len(result.groups) == 2
    for name, target in targets.items():
        assert target.read_text(encoding="utf-8") == "keep me\n", name
        assert not (out / name).is_symlink() and (out / name).is_file(), name


def test_an_eval_folder_planted_as_a_link_is_not_written_through(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out, outside = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    outside.mkdir()
    (out / "evals").symlink_to(outside, target_is_directory=True)
    result = run_cassette(EVALUATE, out_dir=out)
    assert result.eval_metrics  # the run wrote and read its own metrics.json
    assert list(outside.iterdir()) == []
    assert (out / "evals" / "metrics.json").is_file() and not (out / "evals").is_symlink()


def test_an_out_folder_that_is_a_link_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real, target_is_directory=True)
    with pytest.raises(CassetteError, match="is a symlink"):
        run_cassette(EVALUATE, out_dir=tmp_path / "out")
    assert list(real.iterdir()) == []


@pytest.mark.parametrize("recorded", ["data/..", "..", ".", "/"])
def test_dotdot_output_paths_become_a_name_inside_out(tmp_path, recorded):
    out = tmp_path / "out"
    argv = redirect_outputs(["evaluate", "--env.data_dir_to_save_evals", recorded], out)
    assert argv == ["evaluate", "--env.data_dir_to_save_evals", str(out / "evals")]
    argv = redirect_outputs(["process", f"--env.data_path_to_save_groups={recorded}"], out)
    assert argv == ["process", "--env.data_path_to_save_groups", str(out / "groups.jsonl")]


def test_an_evals_folder_of_other_files_is_refused_not_deleted(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    (out / "evals").mkdir(parents=True)
    (out / "evals" / "my_notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(CassetteError, match="holds files an evaluate run does not write"):
        run_cassette(EVALUATE, out_dir=out)
    assert (out / "evals" / "my_notes.txt").read_text(encoding="utf-8") == "mine\n"

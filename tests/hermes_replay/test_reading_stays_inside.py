"""Reading a cassette never reaches outside where it lives (issue 25, item 19): a header's
``tokenizer.store`` climbing out with ``..`` is not opened, and a shard symlinked into a
``.shards`` folder (or a cassettes folder) from elsewhere is not listed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hermes_replay._cassette import CassetteHeader, Interaction, write_cassette
from hermes_replay._tokenizers.bundled import tokenizer_fingerprint, tokenizer_path
from hermes_replay._tokenizers.fold import token_decoder
from hermes_replay._tokenizers.store import store_tokenizer, stored_dir
from hermes_replay.cli import main


def _cassette(path: Path, rollout: str) -> Path:
    inter = Interaction(
        rollout=rollout, seq=0, kind="chat",
        request={"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
                 "headers": {}, "body": {"model": "m", "messages": [
                     {"role": "user", "content": "hi"}]}},
        response={"status": 200, "headers": {}, "body": {"choices": [
            {"message": {"role": "assistant", "content": "hello"}}]}})
    write_cassette(path, CassetteHeader(env_name="e", model="m", endpoint_type="openai"),
                   [inter], {rollout: {"reward": 1.0}})
    return path


def test_a_store_reference_that_climbs_out_is_not_opened(tmp_path):
    cassette = tmp_path / "proj" / "cassettes" / "env" / "process.jsonl"
    cassette.parent.mkdir(parents=True)
    # a folder elsewhere holding a tokenizer, named like a store entry
    elsewhere = tmp_path / "elsewhere" / ("a" * 64)
    shutil.copytree(tokenizer_path(), elsewhere)
    ref = "../../../elsewhere/" + "a" * 64
    assert (cassette.parent / ref / "tokenizer.json").is_file()  # the path does exist
    assert stored_dir(cassette, {"store": ref}) is None
    assert token_decoder(cassette, {"store": ref}) is None  # what show decodes with
    # a store entry of the cassette's own store still works
    fingerprint = tokenizer_fingerprint(tokenizer_path())
    own = store_tokenizer(cassette, tokenizer_path(), fingerprint)
    assert stored_dir(cassette, {"store": own}) is not None
    # and a link planted in the store, pointing out, is refused too
    link = cassette.parent.parent / ".tokenizers" / ("b" * 64)
    link.symlink_to(elsewhere, target_is_directory=True)
    assert stored_dir(cassette, {"store": "../.tokenizers/" + "b" * 64}) is None


def test_ls_does_not_follow_shards_linked_from_outside(tmp_path, capsys):
    shards = tmp_path / "cassettes" / "env" / "process.jsonl.shards"
    shards.mkdir(parents=True)
    _cassette(shards / "w0.jsonl", "train-mine-0-0")
    secret = _cassette(tmp_path / "outside" / "secret.jsonl", "train-secret-0-0")
    (shards / "w1.jsonl").symlink_to(secret)
    (tmp_path / "cassettes" / "env" / "linked.jsonl").symlink_to(secret)
    for target in (shards, tmp_path / "cassettes"):
        assert main(["ls", str(target)]) == 0
        out = capsys.readouterr().out
        assert "train-mine-0-0" in out, out
        assert "secret" not in out, out


def test_a_tokenizer_folder_named_by_a_header_is_never_opened(tmp_path):
    """Trust round 5, finding 15: the report loaded ``<tokenizer.name>/tokenizer.json`` from
    any absolute folder a header named and wrote its vocabulary into report.html (a CI
    artifact). Only the cassette's own store (or the bundled tokenizer) is read: a marker
    token of a tokenizer planted elsewhere never reaches the page."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    from hermes_replay._cassette import load_cassette
    from hermes_replay._report._tokens import TokenView

    elsewhere = tmp_path / "home" / "someone" / "private-tokenizer"
    elsewhere.mkdir(parents=True)
    Tokenizer(WordLevel({"ZZSECRETVOCABZZ": 0, "[UNK]": 1}, unk_token="[UNK]")).save(
        str(elsewhere / "tokenizer.json"))
    cassette = _cassette(tmp_path / "proj" / "cassettes" / "env" / "process.jsonl", "r0")
    lines = cassette.read_text(encoding="utf-8").split("\n", 1)
    header = json.loads(lines[0])
    header["tokenizer"] = {"name": str(elsewhere)}
    cassette.write_text(json.dumps(header) + "\n" + lines[1], encoding="utf-8")
    view = TokenView(load_cassette(cassette))
    view.entry({"tokens": [0, 1], "masks": [1, 1]})
    assert "ZZSECRETVOCABZZ" not in json.dumps(view.vocab), view.vocab
    assert token_decoder(cassette, header["tokenizer"]) is None  # show: the same rule

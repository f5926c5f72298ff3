"""Client libraries are patched when imported, never imported only to be patched.

Each case runs in a fresh interpreter, the only place where "not imported yet" is true.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(code: str, tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_opening_a_cassette_imports_no_client_library(tmp_path: Path) -> None:
    out = _run("""
        import sys
        import hermes_replay
        from hermes_replay._session import intercept as _intercept
        with hermes_replay.cassette("c.jsonl", "passthrough"):
            print(sorted(m for m in ("httpx", "httpx2", "aiohttp") if m in sys.modules))
            print(_intercept.installed())
        print(any(type(f).__name__ == "_PatchOnImport" for f in sys.meta_path))
    """, tmp_path)
    assert out.splitlines() == ["[]", "()", "False"]


def test_a_library_imported_inside_the_block_is_intercepted(tmp_path: Path) -> None:
    """httpx imported after the cassette opened: patched on import, its traffic recorded and
    replayed with the endpoint stopped, and restored when the block ends."""
    out = _run("""
        import sys
        import hermes_replay
        from hermes_replay._session import intercept as _intercept
        from hermes_replay.scripted_endpoint import ScriptedEndpoint

        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert "httpx" not in sys.modules
        with ScriptedEndpoint(script="generic", seed=3) as ep:
            url = ep.base_url + "/chat/completions"
            with hermes_replay.cassette("c.jsonl", "record") as rec:
                import httpx
                print("patched" if "httpx" in _intercept.installed() else "not patched")
                live = httpx.post(url, json=body, timeout=120).json()  # a loaded machine is slow
        print(rec.summary().recorded)
        print(hasattr(httpx.HTTPTransport.handle_request, "__hermes_replay_patch__"))
        with hermes_replay.cassette("c.jsonl", "replay", strict=True):
            print(httpx.post(url, json=body).json() == live)  # endpoint is stopped
    """, tmp_path)
    assert out.splitlines() == ["patched", "1", "False", "True"]

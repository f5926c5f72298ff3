"""Room ``_session.session``: one cassette session and the traffic it answers or records.

- ``session`` (``Session``, ``cassette()``), with its request path (``wire``) and results
  (``results``); ``index`` (recordings by rollout and sequence, miss diagnosis); ``summary``
- ``intercept/`` — one seam per client library (httpx, httpx2, aiohttp); ``convert`` between
  wire bytes and the stored form; ``health`` answers health checks in replay
- ``scope`` — rollout identity (a contextvar); ``workers`` — worker identity in a deployment
- ``tools`` — the tool-call seam (record / replay / run), ``isolation`` — the sandbox policy
  its tools get; ``traffic`` — tools' own HTTP APIs; ``known_good`` — replies for probes

May import: the foundation, ``_secrets``, ``_tokenizers``, ``_cassette``. Never the runner,
the CLI or anything above: a session is usable on its own (``hermes_replay.cassette``).
"""

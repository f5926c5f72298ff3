"""Room ``_corpus``: replaying a set of cassettes — what ``hermes-replay replay DIR``,
``results`` and ``watch`` run, and the public ``hermes_replay.replay_corpus``.

- ``corpus`` — ``replay_corpus``, ``CorpusResult``, ``CorpusObserver`` (who hears it happen)
- ``discover`` — which cassettes a corpus holds, their names and output folders; ``shard`` —
  one of N stable parts of it (``--shard I/N``, Slurm arrays)
- ``job`` — one cassette as a unit of work, run alike by every executor: in this process,
  ``processes`` (``-j N`` warm worker processes) or ``on_ray`` (Ray actors)
- ``one`` — the one runner of a cassette, shared with the pytest plugin (``replay_run``);
  ``summary`` judges a run once (its row, status, message, exit code); ``misses`` the text
  of a miss; ``rescore`` K runs with a live judge
- ``manifest`` (``<out>/replay.json``) and ``join`` (``hermes-replay results``: shards' out
  folders as one run)
- ``watch_plan`` / ``watch_run`` — which cassettes a saved file affects, and one replay of
  ``hermes-replay watch`` in a warm fork

May import: every room above it (``_runner`` runs each cassette; ``_report`` writes the page).
Presentation (tables, progress lines) stays with the caller, through ``CorpusObserver``.
"""

"""Helpers for writing an environment, public: what the shipped examples use, for yours.

``AgentResult`` keeps the former layer's shape (``messages``, no ``final_response`` or
``tools_used``), so reading the answer out of the messages is a helper, not a field:

    from environments.helpers import default_server_configs, final_response, tools_used

* :func:`default_server_configs` — ``config_init``'s server list (a LIST: atroposlib ignores
  the ``base_url`` of a single config), with the endpoint taken from the environment
  (``OPENAI_BASE_URL``/``OPENAI_API_KEY``) or the flags, never assumed;
* :func:`final_response`, :func:`tools_used` — the last assistant text, the tools called;
* :func:`load_items`, :func:`split_items` — a dataset with a quiet offline fallback to built-in
  samples, and a seeded train/eval split;
* :func:`mean` — of an empty list, 0.0;
* :func:`reward_parts` — keep the named parts of the running rollout's reward with it, for a
  ``compute_reward`` that returns a float (returning ``(reward, parts)`` does the same).
"""

from __future__ import annotations

from environments._config import default_server_configs
from environments._examples import final_response, load_items, mean, split_items, tools_used
from hermes_replay import reward_parts

__all__ = ["default_server_configs", "final_response", "load_items", "mean", "reward_parts",
           "split_items", "tools_used"]

"""The Hermes agent RL environment layer for Atropos (atroposlib).

Environment code imports from the submodules, e.g.
``from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig``.
"""

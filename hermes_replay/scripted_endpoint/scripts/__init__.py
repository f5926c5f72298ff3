"""Bundled scripts for the scripted endpoint (a stand-in for a model, not a model).

``generic`` (any tools, any prompt) and ``examples`` (rules for the example environments) are
named in ``_registry._BUNDLED`` and loaded on first lookup; your own scripts register with
``@register_script``.
"""

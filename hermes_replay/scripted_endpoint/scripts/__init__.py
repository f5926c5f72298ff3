"""Bundled scripts for the scripted endpoint (a stand-in for a model, not a model).

``generic`` lives here; ``examples`` (rules for the example environments) is written by the
environments' authors in ``examples.py`` and registered the same way, with ``@register_script``.
"""

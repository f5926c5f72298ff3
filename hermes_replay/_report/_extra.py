"""The ``report`` extra (plotly): optional, so the core install stays small."""

from __future__ import annotations

from hermes_replay._errors import HermesReplayError

__all__ = ["EXTRA_HINT", "ReportExtraMissing", "extra_missing"]

EXTRA_HINT = "pip install 'hermes-replay[report]'"


class ReportExtraMissing(HermesReplayError):
    """``hermes-replay report`` needs the optional ``report`` extra (plotly)."""

    def __init__(self, missing: str = "plotly") -> None:
        self.missing = missing
        super().__init__(
            f"the HTML report needs the optional extra 'report' ({missing} is not installed). "
            f"Next step: {EXTRA_HINT}  (from a checkout: pip install -e '.[report]')")


def extra_missing() -> ReportExtraMissing | None:
    """The error to show when the extra is not installed, else None."""
    try:
        import plotly  # noqa: F401  (the package root only: cheap)
    except ImportError:
        return ReportExtraMissing("plotly")
    return None

"""Charts drawn off-screen, in one place.

Importing this module selects matplotlib's Agg backend before pyplot loads: stages run
headless (the flow process, its second process, Dask workers), and a chart must come out
the same bytes wherever it is drawn. Chart code imports it where it draws (matplotlib
costs about 0.8 CPU s to load), and a process that wants it loaded early imports it by name
(:mod:`ehr_release.flows.head_start`, :mod:`ehr_release.tasks.aside`).
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - only once the backend is chosen

__all__ = ["plt", "png"]


def png(fig: Any, dpi: int = 130) -> bytes:
    """``fig`` as PNG bytes; the figure is closed (pyplot keeps every open one)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()

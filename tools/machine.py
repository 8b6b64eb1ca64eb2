"""What a measurement report records about the machine and moment it ran on."""

from __future__ import annotations

import datetime as dt
import os
import platform
from typing import Any


def machine() -> dict[str, Any]:
    """The head of every report's ``meta``: today's date (UTC), the CPU count, the Python version."""
    return {
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }


def load_average() -> float:
    """The 1-minute load average now, to two places: how busy the machine was as a run ended."""
    return round(os.getloadavg()[0], 2)

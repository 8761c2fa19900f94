"""The machine and library versions a measurement ran on, recorded next to every benchmark figure and model card."""

from __future__ import annotations

import os
import platform
from typing import Any


def machine_info() -> dict[str, Any]:
    """Python, platform, CPU model and count, and the versions of streamkit and its numeric libraries."""
    import numpy

    import streamkit

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "numpy": numpy.__version__,
        "streamkit": streamkit.__version__,
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for mod in ("scipy", "numba", "soxr", "torch"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:
            pass
    return info

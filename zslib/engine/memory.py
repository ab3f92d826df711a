"""How much memory this process holds: the resident set now, its peak, and resetting that peak.

The book reports peak memory for the evaluations that could run out of it (every ZSML pair, the retrieval
benchmarks). On Linux the kernel keeps the peak resident set (``VmHWM`` in ``/proc/self/status``) and lets a
process reset it to the current resident set by writing ``5`` to ``/proc/self/clear_refs``; a peak measured
after such a reset belongs to the code that ran since. Elsewhere only ``ru_maxrss`` (since the process started)
is available, and :func:`reset_peak_rss` says so by returning False.
"""
from __future__ import annotations

import sys

from pathlib import Path


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # the kernel writes kB
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-resident-set counter of this process to its current resident set (Linux);
    False where it cannot be reset (the peak then counts from the start of the process)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_mib() -> float:
    """The resident set of this process now, in MiB (``VmRSS``); NaN where the system does not report it."""
    value = _status_mib("VmRSS")
    return float("nan") if value is None else value


def peak_rss_mib() -> float:
    """The peak resident set of this process in MiB: ``VmHWM`` (since the last :func:`reset_peak_rss`) where
    Linux has it, else ``ru_maxrss`` (since the process started)."""
    value = _status_mib("VmHWM")
    if value is not None:
        return value
    import resource  # Unix only
    scale = 2 ** 20 if sys.platform == "darwin" else 2 ** 10  # macOS reports bytes, Linux kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale

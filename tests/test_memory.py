"""zslib.engine.memory against allocations of known size (Linux: the kernel's own counters)."""
import math
import sys

import numpy as np
import pytest

from zslib.engine.memory import peak_rss_mib, reset_peak_rss, rss_mib

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmRSS / VmHWM / clear_refs are Linux's")


@linux
def test_peak_counts_a_freed_allocation_and_reset_forgets_it():
    assert reset_peak_rss()
    before = rss_mib()
    block = np.ones(96 * 2 ** 20 // 8)  # 96 MiB, every page touched
    held = rss_mib()
    del block
    peak = peak_rss_mib()
    assert held - before > 90, (before, held)  # the resident set saw the block
    assert peak - before > 90, (before, peak)  # and the peak keeps it after the block is freed
    assert rss_mib() < peak - 60  # freed: the resident set went back down (numpy returns large blocks to the OS)
    assert reset_peak_rss()
    assert peak_rss_mib() < peak - 60  # the reset forgets the freed block


def test_values_are_finite_or_nan_never_negative():
    for value in (rss_mib(), peak_rss_mib()):
        assert math.isnan(value) or value > 0

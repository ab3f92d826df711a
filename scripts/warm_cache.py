"""Build the real profile's feature cache of Flowers-102 once, before the book build and the tests use it.

The cache (``$ZS_CACHE``, by default ``data/cache``) holds the frozen EfficientNet-Lite0's maps of all 8,189
photographs; the first chapter or test that needs it would otherwise build it inside its own time (about 5
minutes of two free cores). ``.ci/run`` calls this when the photographs are present; it does nothing (and says
so) when they are not. Usage: ``python scripts/warm_cache.py``.
"""
from __future__ import annotations

import sys
import time


def main() -> int:
    from zslib.engine.data.errors import MissingDataError
    from zslib.engine.runner import build_data
    from zslib.experiment import Config

    started = time.perf_counter()
    base = Config.from_profile("real")
    try:
        for method in ("baseline", "adapt_adv"):  # the pooled feature alone, and the cached maps
            build_data(base.replace(method=method))
    except MissingDataError as err:
        print(f"feature cache not built: Flowers-102 is not available ({str(err).splitlines()[0]})")
        return 0
    print(f"feature cache of the real profile ready in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One thread for the small NumPy, SciPy, scikit-learn and faiss problems of the book.

The chapters' attribute probes, 2-D projections, k-means clusterings and nearest-neighbour estimators work
on a few hundred to a few thousand rows. The BLAS and OpenMP libraries under them start one thread per core
by default, and on a busy machine those threads wait for each other by spinning: on the project's 2-core
machine, with a second book build running beside it, a t-SNE of 400 points took 26 s with two OpenMP
threads and 2.5 s with one, and one logistic-regression fit of the attribute probe 0.90 s with two BLAS
threads and 0.045 s with one, with the same results. The same happens inside the training processes of a
grid (:mod:`zslib.engine.grid`), where two workers each starting two threads put four on two cores.

PyTorch's own OpenMP threads (two on a 2-core machine) meet the same trouble whenever another program holds
a core: a thread that reaches the end of a parallel loop spins, by default for 300,000 rounds, waiting for
its partner, which may be waiting for that very core. Measured with one busy program beside it, a training
step of the quick profile's network took 55 ms instead of 14 ms, and four elementwise operations on one
224-px image 49 ms instead of 0.1 ms. ``import zslib`` therefore sets ``GOMP_SPINCOUNT=1000`` (OpenMP's spin
before a waiting thread sleeps) unless it is set already: on the idle machine the same step then takes the
same time (14 to 17 ms in both settings, five measurements), and with a busy program beside it 30 ms. It
takes effect only if PyTorch was not imported before zslib (each chapter imports zslib first).

:func:`one_thread` limits every BLAS and OpenMP pool loaded in the process to one thread while a function or
a block runs, and restores the previous limits after it (PyTorch's own thread count included).
:func:`limit_process` sets the limit for the rest of a process (a grid worker), also for libraries loaded
later.
"""
from __future__ import annotations

import contextlib
import os

__all__ = ["one_thread", "limit_process", "SPIN_COUNT", "prefer_short_spin"]

SPIN_COUNT = "1000"  # rounds an OpenMP thread spins before it sleeps (libgomp's default: 300,000)

# Libraries that read their thread count from the environment when they are loaded.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class one_thread(contextlib.ContextDecorator):
    """Use as ``@one_thread()`` on a function or ``with one_thread():`` around a block.

    Not ``threadpoolctl.threadpool_limits.wrap``: that one caches the list of thread pools at its first call,
    and the functions limited here import scikit-learn (and with it its OpenMP) inside their body, so a pool
    loaded by the first call would never be limited. Each entry here looks the pools up again."""

    def __init__(self):
        self._active = []

    def __enter__(self):
        from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

        self._active.append(threadpool_limits(limits=1))
        return self

    def __exit__(self, *exc):
        self._active.pop().restore_original_limits()
        return False


def prefer_short_spin() -> None:
    """``GOMP_SPINCOUNT`` = :data:`SPIN_COUNT` unless it is set; read by OpenMP when PyTorch is first imported."""
    os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)


def limit_process(threads: int) -> None:
    """At most ``threads`` threads in every BLAS and OpenMP pool of this process from now on: the pools
    already loaded are limited now, those loaded later read the limit from the environment."""
    from threadpoolctl import threadpool_limits  # `import zslib` imports this module: kept light

    threads = max(1, int(threads))
    for name in _THREAD_VARIABLES:
        os.environ[name] = str(threads)
    threadpool_limits(limits=threads)

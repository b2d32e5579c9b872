"""The metric pass's worker threads: how many, and a map that keeps the items' order.

The streaming metric pass (:mod:`perfscout.analysis.stream_fast`) cuts the pair into
independent pieces (flat chunks for the point statistics, N-D tiles with their halos for
SSIM). NumPy releases the GIL inside its element loops, so the pieces run on threads
of one process, sharing the two input arrays without a copy. Each piece returns its
partial result; the caller reduces them in the pieces' order, never in completion
order, so a result does not depend on the number of threads (the pieces are the same
whatever that number is).

How many threads (:func:`resolve_threads`): an explicit ``threads`` (evaluate's
``metric_threads`` option, or the codec's own ``threads`` option that the sweep
schedules against its ``cores``); else ``OMP_NUM_THREADS`` (the sweep's children get it
set to their share of the cores); else every core this process may run on
(``os.sched_getaffinity``: a CPU set or a container limit, not the host's count).
Never more than those cores: more threads than cores only take turns.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from perfscout.errors import InputError

T = TypeVar("T")
R = TypeVar("R")


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _env_threads() -> int | None:
    text = os.environ.get("OMP_NUM_THREADS", "").strip().split(",")[0]
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 1 else None


def resolve_threads(threads: int | None = None) -> int:
    """Worker threads for the metric pass (see the module notes); InputError for a value
    that is not a positive integer."""
    cores = usable_cores()
    if threads is None:
        return min(cores, _env_threads() or cores)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InputError(f"metric threads must be a positive integer (or None for every core), got {threads!r}")
    return min(cores, threads)


def map_ordered(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """``[fn(item) for item in items]``, on ``threads`` threads when more than one; the
    results in the items' order. An exception in one item is raised here (the first in
    item order), after the pool has stopped."""
    if threads <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="perfscout-metrics") as pool:
        return list(pool.map(fn, items))


def halo_tiles(n_out: list[int], tile_out: list[int], win: tuple[int, ...]) -> Iterator[tuple[slice, ...]]:
    """Input slices (halo included) of N-D tiles that cover every output window once:
    ``n_out`` windows per axis, ``tile_out`` of them per tile, windows ``win`` wide (a
    tile reads ``win - 1`` elements past its last window). In C order of the tiles."""
    for start in itertools.product(*[range(0, n, t) for n, t in zip(n_out, tile_out)]):
        yield tuple(slice(s, min(n, s + t) + w - 1) for s, n, t, w in zip(start, n_out, tile_out, win))

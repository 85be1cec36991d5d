"""Sweeps over traces × policies × presets on the machines there are (issue 16, item 5).

A sweep is a list of independent tasks (one simulation each, or a few); :func:`run_tasks` maps a
function over them and returns the results **in the order of the tasks**, whichever finishes
first, so a table built from them is the same as a serial run's:

- ``workers == 1`` (or one task): in this process, one after the other;
- ``workers > 1``: in that many worker processes of the standard library's
  :class:`concurrent.futures.ProcessPoolExecutor`;
- ``dask="tcp://host:port"``: on an existing Dask distributed scheduler (the optional extra
  ``requirements-dask.txt``, imported only then). Its workers must import this project (started
  from the repository root, or with it on ``PYTHONPATH``) and the function (a module-level one; a
  script's own functions travel by value with cloudpickle).

No scheduling of our own: the pool or Dask decides which worker takes which task. One progress bar
(tqdm, on stderr) counts finished tasks. The function and its argument must be picklable; the
simulator is deterministic for a given seed, so the results do not depend on where a task ran.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from scheduling.sim.progress import ProgressBar, progress_bar

T = TypeVar("T")
R = TypeVar("R")

DASK_EXTRA = "requirements-dask.txt"


class SweepError(Exception):
    """Bad sweep options (workers below 1, Dask absent or unreachable): a one-line message."""


def default_workers() -> int:
    """The cores this process may use (its CPU affinity where the OS tells it, else all), ≥ 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


def workers_arg(text: str) -> int:
    """``--workers N``: a whole number ≥ 1, checked when the options are parsed, before a trace is
    loaded (a sweep's traces can take minutes). Raises ``argparse.ArgumentTypeError``."""
    try:
        workers = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if workers < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {workers}")
    return workers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workers N`` (default: :func:`default_workers`) and ``--dask ADDRESS`` to ``parser``."""
    parser.add_argument(
        "--workers",
        type=workers_arg,
        default=default_workers(),
        metavar="N",
        help="simulations in parallel worker processes (default: the cores, %(default)s here; 1 = serial)",
    )
    parser.add_argument(
        "--dask",
        metavar="ADDRESS",
        help=f"run on this Dask distributed scheduler instead (tcp://host:port; pip install -r {DASK_EXTRA})",
    )


def run_tasks(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    *,
    workers: int = 1,
    dask: str | None = None,
    desc: str = "sweep",
    progress: bool = True,
) -> list[R]:
    """``[fn(t) for t in tasks]``, computed serially, in ``workers`` processes or on Dask.

    Results come back in the order of ``tasks``. An exception raised by ``fn`` is raised here
    (the first in task order among those that failed is not guaranteed: the first seen).

    Raises :class:`SweepError` when ``workers < 1``, when ``dask`` is given but the
    ``distributed`` package is not installed, or when its scheduler cannot be reached.
    """
    if workers < 1:
        raise SweepError(f"--workers must be at least 1, got {workers}")
    bar = progress_bar(len(tasks), desc, shown=progress, leave=False)
    try:
        if dask:
            return _on_dask(fn, tasks, dask, bar)
        if workers == 1 or len(tasks) <= 1:
            results = []
            for task in tasks:
                results.append(fn(task))
                bar.update()
            return results
        return _in_processes(fn, tasks, min(workers, len(tasks)), bar)
    finally:
        bar.close()


def _in_processes(fn: Callable[[T], R], tasks: Sequence[T], workers: int, bar: ProgressBar) -> list[R]:
    # imported here: the pool and multiprocessing are a tenth of a one-policy run's start-up
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(fn, task): i for i, task in enumerate(tasks)}
        results: list = [None] * len(tasks)
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.update()
        except BaseException:  # a failed task or Ctrl-C: start no more, then re-raise
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return results


def _on_dask(fn: Callable[[T], R], tasks: Sequence[T], address: str, bar: ProgressBar) -> list[R]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise SweepError(f"--dask needs the distributed package: pip install -r {DASK_EXTRA}") from None
    try:
        client = Client(address, timeout=10)
    except (OSError, TimeoutError, ValueError) as exc:
        raise SweepError(f"--dask {address}: cannot reach the scheduler ({exc})") from None
    with client:
        # pure=False: two equal tasks (same trace, same seed) are still two runs, never merged.
        futures = client.map(fn, list(tasks), pure=False)
        for _ in dask_completed(futures):
            bar.update()
        return list(client.gather(futures))

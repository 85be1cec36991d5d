"""A statistical profile of the threads of this process (all, or those whose name starts with
a prefix): where a multi-threaded run (the live
service, its agents and rounds in one process) spends its time, which ``cProfile`` cannot show
(it follows one thread).

Every ``every_s`` wall seconds a daemon thread reads all other threads' stacks
(``sys._current_frames``) and counts each function once per sample in which it is on a stack
(inclusive). Samples of threads that wait (in ``select``, ``wait``, ``sleep``, a lock,
``accept``) are counted apart, so the shares are of busy samples.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType

#: Innermost functions that mean a thread is waiting, not working.
IDLE = frozenset(
    {"select", "wait", "sleep", "poll", "accept", "_wait_for_tstate_lock", "readinto", "recv_into"}
)


class Sampler:
    """Samples the stacks of this process's threads until :meth:`stop`; :meth:`report` lists
    the busiest functions."""

    def __init__(self, every_s: float = 0.01, thread: str = "") -> None:
        self.every_s = every_s
        self.thread = thread
        self.busy = 0
        self.idle = 0
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> Sampler:
        """Start sampling; returns ``self``."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (waits for the sampling thread)."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me or not names.get(ident, "").startswith(self.thread):
                    continue
                if frame.f_code.co_name in IDLE:
                    self.idle += 1
                    continue
                self.busy += 1
                seen = set()
                f: FrameType | None = frame
                while f is not None:
                    code = f.f_code
                    path = Path(code.co_filename)
                    seen.add(f"{path.parent.name}/{path.name}:{code.co_name}")
                    f = f.f_back
                self.counts.update(seen)
            time.sleep(self.every_s)

    def report(self, top: int = 30) -> str:
        """The ``top`` functions by share of busy samples (inclusive), one a line."""
        lines = [f"profile: {self.busy} busy samples, {self.idle} waiting"]
        for name, n in self.counts.most_common(top):
            lines.append(f"  {n / max(self.busy, 1):6.1%}  {name}")
        return "\n".join(lines)


if __name__ == "__main__":  # a module the benchmarks import: run, it says so (and answers --help)
    from cli_args import module_only

    raise SystemExit(module_only(__file__, __doc__))

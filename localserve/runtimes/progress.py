"""A download's progress, for people: a tqdm bar on a terminal, else log lines a log collector keeps.

Example::

    progress = download_progress("https://host/m.onnx", total=120 * MiB, bar=sys.stderr.isatty())
    progress.update(done)      # bytes so far (a resumed download goes on from where it was)
    progress.close()

Without a terminal (Docker, Kubernetes logs): ``Downloading URL (120.0 MiB)``, then a line each further tenth, or after
``LOG_EVERY`` seconds without one: ``Downloading URL: 30% (36.0 MiB of 120.0 MiB), 5.1 MiB/s, ETA 17 s``. The last line,
``Downloaded ...``, is the caller's. tqdm is imported only when a bar is drawn.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Protocol

__all__ = ["LOG_EVERY", "Progress", "download_progress", "human_size"]

logger = logging.getLogger("localserve")
LOG_EVERY = 15.0  # seconds between two log lines at most, while bytes arrive
STEPS = 10  # a log line at each tenth of a known size


class Progress(Protocol):
    """What a download reports to."""

    def update(self, done: int) -> None: ...

    def close(self) -> None: ...


def download_progress(label: str, total: int | None, *, bar: bool) -> Progress:
    """A tqdm bar on stderr (``bar``), else log lines (see the module doc)."""
    return _Bar(label, total) if bar else _LogLines(label, total)


class _Bar:
    def __init__(self, label: str, total: int | None) -> None:
        from tqdm import tqdm

        self.done = 0
        self.bar: Any = tqdm(
            total=total, desc=label, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, leave=True
        )

    def update(self, done: int) -> None:
        if done < self.done:  # started again from the beginning
            self.bar.reset()
            self.done = 0
        self.bar.update(done - self.done)
        self.done = done

    def close(self) -> None:
        self.bar.close()


class _LogLines:
    def __init__(self, label: str, total: int | None) -> None:
        self.label, self.total = label, total
        self.started = self.last = time.monotonic()
        self.step = 0  # tenths of the size logged so far
        logger.info("Downloading %s (%s)", label, human_size(total) if total is not None else "size unknown")

    def update(self, done: int) -> None:
        now = time.monotonic()
        if self.total:
            step = min(STEPS, done * STEPS // self.total)
            if step > self.step and done < self.total:
                self.step = step
                self._line(done, now)
                return
        if now - self.last >= LOG_EVERY and done != self.total:
            self._line(done, now)

    def _line(self, done: int, now: float) -> None:
        self.last = now
        seconds = max(now - self.started, 1e-6)
        rate = done / seconds
        if self.total:
            eta = f", ETA {(self.total - done) / rate:.0f} s" if rate > 0 else ""
            logger.info(
                "Downloading %s: %d%% (%s of %s), %s/s%s",
                self.label,
                done * 100 // self.total,
                human_size(done),
                human_size(self.total),
                human_size(rate),
                eta,
            )
        else:
            logger.info("Downloading %s: %s, %s/s", self.label, human_size(done), human_size(rate))

    def close(self) -> None:
        pass


def human_size(n: float) -> str:
    """``2048`` -> ``2.0 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"

"""Live reloading of a multi-model API's models: a new version folder (or a changed model file) is picked up without a
restart, a version removed leaves memory.

Local folders are watched (watchfiles) and read again ``DEBOUNCE_MS`` after a burst of changes; remote locations are
fetched again every ``POLL_SECONDS``. A version must appear whole: copy it in under another name and rename it (as
TensorFlow Serving asks); a version that does not load yet is logged and tried again at the next change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from localserve.runtimes.modelset import ModelSet

log = logging.getLogger("localserve")

POLL_SECONDS = 10.0  # remote locations: as Cortex
DEBOUNCE_MS = 200  # a burst of changes (a folder copied in) is read once, this long after its last change


class ModelWatcher:
    """One daemon thread watching the local folders of a ModelSet, one polling its remote ones."""

    def __init__(self, models: ModelSet, local: list[Path], remote: bool) -> None:
        self.models = models
        self.local = [path for path in local if path.exists()]
        self.remote = remote
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start watching (and polling, when some locations are remote)."""
        if self.local:
            self.threads.append(threading.Thread(target=self._watch, name="localserve-models-watch", daemon=True))
        if self.remote:
            self.threads.append(threading.Thread(target=self._poll, name="localserve-models-poll", daemon=True))
        for thread in self.threads:
            thread.start()

    def close(self) -> None:
        """Stop both threads (the watch ends within watchfiles' own timeout)."""
        self._stop.set()

    def _watch(self) -> None:
        import watchfiles

        try:
            for _ in watchfiles.watch(
                *self.local,
                stop_event=self._stop,
                debounce=DEBOUNCE_MS,
                step=50,
                rust_timeout=1000,
                yield_on_timeout=False,
            ):
                self._refresh(remote=False)
        except Exception:  # the folder went away, the watch limit was reached: say so, keep serving
            log.exception("models: watching %s stopped; new versions need a restart", ", ".join(map(str, self.local)))

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._refresh(remote=True)

    def _refresh(self, *, remote: bool) -> None:
        try:
            changes = self.models.refresh(remote=remote)
        except Exception as exc:  # user code (load_model) included: the watch goes on
            log.warning("models: reading the models again failed: %s", exc)
            return
        for change in changes:
            log.info("models: %s version %s %s", change["model"], change["version"], change["change"])


def watch_models(models: ModelSet, local_path: Callable[[str], Path | None]) -> ModelWatcher:
    """Start watching ``models``: ``local_path(location)`` is the local folder of a local location, None for a remote one."""
    config = models.config
    locations = (
        [config.dir] if config.dir is not None else [config.path] if config.path else [p.path for p in config.paths]
    )
    local: list[Path] = []
    remote = False
    for location in locations:
        if location is None:
            continue
        path = local_path(location)
        if path is None:
            remote = True
        else:
            local.append(path)
    watcher = ModelWatcher(models, local, remote)
    watcher.start()
    return watcher

"""``serve --reload``: watch the project, reload what changed, and never let a bad edit take the server down.

Example::

    reloader = Reloader(app.engine, config, project)     # project: compat.context.Project (ProjectReload)
    reloader.start()                                     # on the serving loop, once the APIs load
    reloader.status()    # {"generation": 2, "error": None, "changed": ["handler.py"]} for /readyz

``watchfiles`` watches the project and the config file from its own thread; the packaged project's ignore rules say
which files count (the config, ``.env``, requirements, ignore files and model files always do). Each batch of changes is
one reload, on the event loop: the project entered again off the loop (``ProjectReload.reload``), the APIs to reload
picked (all after an edit of code, ``.env`` or requirements; else those whose entry or model files changed, or that
failed), each loaded and warmed beside the serving one (``Engine.replace_api``) and swapped in. Any failure keeps the
last good version serving, logged once and shown on ``/readyz`` and the dashboard until the next good save.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from localserve.config import ApiConfig, ServeConfig
from localserve.engine.core import Engine
from localserve.errors import ConfigError, LocalServeError
from localserve.messages.error_text import without_paths
from localserve.project.ignore import IGNORE_FILES, editor_temp, ignored

__all__ = ["ProjectReload", "Reloader"]

log = logging.getLogger("localserve")

REQUIREMENTS = ("requirements.txt", "Pipfile")
STEP_MS = 50  # a batch of changes ends after this long without another (watchfiles' step)
SHOWN = 10  # changed files named in the log and on /readyz; "and N more" after them
SLOW = 10.0  # seconds after which a reload still under way is logged (an import that hangs: nothing can end it)
STOP_WAIT = 5.0  # seconds the watcher's thread gets to see the stop (it looks every STEP_MS)


class ProjectReload(Protocol):
    """The project the server runs in, entered again after an edit (``compat.context.Project``)."""

    def reload(self, *, requirements: bool) -> ServeConfig:
        """The config read again, the surroundings of user code made again; raises LocalServeError."""


@dataclass
class Changes:
    """What one batch of file changes touched."""

    files: list[str] = field(default_factory=list)  # relative to the project, sorted
    config: bool = False
    environment: bool = False  # .env
    requirements: bool = False
    rules: bool = False  # .cortexignore / .localserveignore
    code: bool = False  # anything else user code may read: every API reloads
    models: set[Path] = field(default_factory=set)  # files inside an API's model location

    def named(self) -> str:
        """The files for a log line: the first SHOWN, then how many more."""
        more = len(self.files) - SHOWN
        return ", ".join(self.files[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def model_location(api: ApiConfig, project: Path) -> Path | None:
    """The local file or folder of ``api``'s model; None for none, or one fetched from a URL."""
    location = api.model_location
    if not location or "://" in location:
        return None
    return (project / location).resolve()


def live_model_folders(api: ApiConfig, project: Path) -> list[Path]:
    """The local folders of a multi-model API (``models: {dir | paths | path}``): its ModelSet watches them itself
    (new versions, models added or removed), so a change there reloads no API."""
    models = api.predictor.models if api.predictor is not None else None
    if models is None:
        return []
    places = [models.dir, models.path, *(entry.path for entry in models.paths)]
    return [(project / place).resolve() for place in places if place and "://" not in place]


class Watched:
    """The watch filter: which changed paths count (see the module doc)."""

    def __init__(self, project: Path, config_file: Path | None, models: list[Path], live: Sequence[Path] = ()) -> None:
        self.project = project.resolve()
        self.config_file = config_file.resolve() if config_file is not None else None
        self.models = models
        self.live = list(live)  # multi-model folders: their ModelSet's watcher reloads models, not this
        self.ignored = ignored(self.project, self.config_file)

    def __call__(self, change: object, path: str) -> bool:
        file = Path(path)
        if editor_temp(file.name) or any(file.is_relative_to(folder) for folder in self.live):
            return False  # an editor's temporary file (the save it makes counts), or a multi-model folder
        if file == self.config_file or any(file.is_relative_to(model) for model in self.models):
            return True
        if not file.is_relative_to(self.project):
            return False
        relative = file.relative_to(self.project).as_posix()
        if relative in (".env", *IGNORE_FILES, *REQUIREMENTS):
            return True
        try:
            return not self.ignored(file)
        except (OSError, ValueError):
            return False

    def classify(self, paths: list[str]) -> Changes:
        """Sort a batch of changed paths into what they touch."""
        changes = Changes()
        for path in sorted(set(paths)):  # a file saved twice in one batch is named once
            file = Path(path)
            relative = file.relative_to(self.project).as_posix() if file.is_relative_to(self.project) else path
            changes.files.append(relative)
            if file == self.config_file:
                changes.config = True
            elif relative == ".env":
                changes.environment = True
            elif relative in REQUIREMENTS:
                changes.requirements = True
            elif relative in IGNORE_FILES:
                changes.rules = True
            elif any(file.is_relative_to(model) for model in self.models):
                changes.models.add(file)
            else:
                changes.code = True
        return changes


class Reloader:
    """Watches the project of a serving App and reloads its APIs (see the module doc)."""

    def __init__(self, engine: Engine, config: ServeConfig, project: ProjectReload) -> None:
        self.engine = engine
        self.config = config
        self.project = project
        self.root = config.project
        self.generation = 0  # reloads done; /readyz shows it
        self.error: str | None = None  # the last reload's failure, until a good one
        self.changed: list[str] = []  # the files of the last reload (done or failed), the first SHOWN
        self.since: float | None = None  # when the reload under way began (time.monotonic()), or None
        self.watched = self._watched(config)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _watched(self, config: ServeConfig) -> Watched:
        models = [m for api in config.apis if (m := model_location(api, config.project)) is not None]
        live = [folder for api in config.apis for folder in live_model_folders(api, config.project)]
        return Watched(config.project, config.config_file, models, live)

    def status(self) -> dict[str, Any]:
        """For /readyz and the dashboard: reloads done, the error of the last one that failed (until fixed), and
        for how long a reload has been under way (``changed`` are its files then), or None."""
        running = None if self.since is None else round(time.monotonic() - self.since, 1)
        return {"generation": self.generation, "error": self.error, "changed": self.changed, "reloading_for_s": running}

    def start(self) -> None:
        """Watch from now on (on the running loop)."""
        logging.getLogger("watchfiles").setLevel(logging.WARNING)  # "1 change detected": our "reloaded" line says it
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        """Stop watching; a reload under way is cancelled (the version serving stays)."""
        self._stop.set()  # the watcher's thread sees it within STEP_MS
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_WAIT)

    async def _watch(self) -> None:
        paths = {self.root.resolve()}
        if self.watched.config_file is not None and not self.watched.config_file.is_relative_to(self.root.resolve()):
            paths.add(self.watched.config_file.parent)
        batches = self._batches(sorted(paths))
        # The first step of the generator makes the watcher (inotify's watches are set when it returns).
        waiting = asyncio.ensure_future(batches.__anext__())
        await asyncio.sleep(0)
        log.info("reload: watching %s for changes", ", ".join(str(p) for p in sorted(paths)))
        while True:
            try:
                paths_changed = await waiting
            except StopAsyncIteration:
                return
            await self.reload(self.watched.classify(paths_changed))
            waiting = asyncio.ensure_future(batches.__anext__())

    async def _batches(self, paths: list[Path]) -> AsyncIterator[list[str]]:
        from watchfiles import awatch

        async for batch in awatch(
            *paths, watch_filter=lambda change, path: self.watched(change, path), stop_event=self._stop, step=STEP_MS
        ):
            yield [path for _, path in batch]

    async def reload(self, changes: Changes) -> bool:
        """Reload what ``changes`` touched; False when it failed (the last good version serves on)."""
        self.since = time.monotonic()
        slow = asyncio.get_running_loop().call_later(SLOW, self._slow, changes)
        try:
            return await self._reload(changes)
        finally:
            slow.cancel()
            self.since = None

    def _slow(self, changes: Changes) -> None:
        log.warning(
            "reload: still under way %.0f s after %s changed (an import or a model load that hangs?); the last good "
            "version serves on, and saves made meanwhile are taken once it ends",
            SLOW,
            changes.named(),
        )

    async def _reload(self, changes: Changes) -> bool:
        start = time.perf_counter()
        self.changed = changes.files[:SHOWN]
        names: list[str] = []
        try:
            if changes.rules:
                self.watched = self._watched(self.config)  # the ignore files, read again (a bad pattern raises)
            config = await asyncio.to_thread(self.project.reload, requirements=changes.requirements)
            names = self.plan(config, changes)
            for name in names:
                await self.engine.replace_api(name, config.api(name))
        except Exception as exc:  # a bad edit must never take the server down
            self._failed(exc, changes)
            return False
        self.config = config
        self.watched = self._watched(config)
        self.generation += 1
        self.error = None
        reloaded = ", ".join(repr(name) for name in names) or "no API (none changed)"
        log.info(
            "reloaded %s in %.3f s after %s changed (generation %d)",
            reloaded,
            time.perf_counter() - start,
            changes.named(),
            self.generation,
        )
        return True

    def plan(self, config: ServeConfig, changes: Changes) -> list[str]:
        """The APIs to reload, in the config's order; a ConfigError when the APIs themselves changed."""
        serving = self.engine.apis
        if config.splitters != self.config.splitters:  # SplitterRoutes is built once, with the app
            raise ConfigError(
                f"{config.source}: a TrafficSplitter changed (added, removed, or its APIs or weights); "
                "a splitter's change needs a restart of serve."
            )
        names = [api.name for api in config.apis]
        if set(names) != set(serving):
            raise ConfigError(
                f"{config.source}: the config now names the APIs {', '.join(names) or 'none'} (serving: "
                f"{', '.join(serving)}); adding, removing or renaming an API needs a restart of serve."
            )
        everything = changes.code or changes.environment or changes.requirements
        chosen = []
        for api in config.apis:
            rt = serving[api.name]
            models = [m for m in (model_location(api, config.project), model_location(rt.api, config.project)) if m]
            touched = any(file.is_relative_to(model) for file in changes.models for model in models)
            if everything or touched or api != rt.api or rt.state != "ready":
                chosen.append(api.name)
        return chosen

    def _failed(self, exc: Exception, changes: Changes) -> None:
        """Log a failed reload once, with its traceback, and keep it for /readyz until the next good one."""
        details = exc.details if isinstance(exc, LocalServeError) else ""
        if not details:
            cause = exc.__cause__ if isinstance(exc, LocalServeError) else exc
            if cause is not None:
                details = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
        message = str(exc) if isinstance(exc, LocalServeError) else f"{type(exc).__name__}: {exc}"
        self.error = without_paths(message, self.root)
        log.error(
            "reload failed after %s changed; still serving the last good version: %s%s",
            changes.named(),
            message,
            f"\n{details.rstrip()}" if details else "",
        )

"""Project: the platform around user code, made on entry and undone on exit (``with Project(...) as config:``).

Example::

    with Project(config, ProjectSettings(environment={"K": "v"}), cache_dir) as config:
        app = create_app(config, options)       # user code runs in the project, as on the platform

On entry, in order: the packaged view; ``/mnt/project`` (a mount namespace needs a single-threaded process, so before
any thread starts); the project entered (cwd, ``sys.path``, ``.env``, ``--environment``, the platform's defaults); each
predictor's ``python_path``, ``env`` and ``log_level``; ``dependencies.sh``; the requirements. On exit everything is as
it was, so a command can run twice in one process (``CliRunner``, ``localserve.testing``), but what a process cannot
undo (a mount namespace entered, the packaged view until exit). User modules are let go, and same-named ones imported
before are set aside meanwhile (``compat.modules``).
"""

from __future__ import annotations

import builtins
import io
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from localserve.config import ServeConfig
from localserve.config.options import ProjectSettings
from localserve.errors import ConfigError, ProjectError
from localserve.project.compat.mnt import install_redirect, provide_mnt_project, redirect_target, uninstall_redirect
from localserve.project.compat.modules import forget_installed, forget_modules, put_back, set_aside_shadowed
from localserve.project.compat.platform import ABEJA_LOCAL_VALUES, run_dependencies_script
from localserve.project.compat.view import packaged_view, sync_view
from localserve.project.directory import (
    TRAINING_RESULT_DIR,
    activate_requirements,
    cached_requirements,
    enter_project,
    install_requirements,
)

log = logging.getLogger("localserve")
USER_LOGGER = "localserve.user"  # `from localserve import logger`: a predictor's log_level sets its level

# The Projects entered now, each with its thread: a Project sets process-wide state (cwd, sys.path, sys.modules,
# the environment), so they nest within one thread (stack-like) but never overlap across threads.
_ENTERED: dict[int, tuple[threading.Thread, Path]] = {}
_ENTERED_LOCK = threading.Lock()

# What compat.mnt's redirect replaces (builtins.open and io.open, and these of os).
_REDIRECTED_OS = ("open", "stat", "lstat", "access", "listdir", "scandir")


class Project:
    """The platform's surroundings of user code, entered by the process that serves (see the module doc)."""

    def __init__(
        self,
        config: ServeConfig,
        settings: ProjectSettings,
        cache_dir: Path,
        reread: Callable[[], ServeConfig] | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.cache_dir = cache_dir  # requirements are installed under it (ServeOptions.cache_dir)
        self.reread = reread  # the config read again as the command read it (its flags applied): serve --reload
        self._saved: dict[str, Any] = {}
        self._entered: ServeConfig | None = None  # what __enter__ returned: the workdir and /mnt/project mode

    def __enter__(self) -> ServeConfig:
        self._claim()
        try:
            self._save()
            try:
                return self._enter()
            except BaseException:
                self._restore()
                raise
        except BaseException:
            self._release()
            raise

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self._restore()
        finally:
            self._release()

    def _claim(self) -> None:
        """Register this Project as entered by the current thread; ProjectError when another thread has one."""
        here = threading.current_thread()
        with _ENTERED_LOCK:
            other = next(((t, p) for t, p in _ENTERED.values() if t is not here), None)
            if other is not None:
                raise ProjectError(
                    f"Project {str(self.config.project)!r} cannot be entered in thread {here.name!r}: project "
                    f"{str(other[1])!r} is in use by thread {other[0].name!r} of this process. A project sets the "
                    "working directory, sys.path, environment and modules of the whole process, so one thread at a "
                    "time may serve projects (localserve.testing.client and run): close the other first, or give "
                    "each its own process (pytest-xdist, localserve serve)."
                )
            _ENTERED[id(self)] = (here, self.config.project)

    def _release(self) -> None:
        with _ENTERED_LOCK:
            _ENTERED.pop(id(self), None)

    def _save(self) -> None:
        self._saved = {
            "cwd": os.getcwd(),
            "sys.path": list(sys.path),
            "modules": set(sys.modules),
            "environ": dict(os.environ),
            "getaddrinfo": socket.getaddrinfo,
            "open": (builtins.open, io.open),
            "os": {name: getattr(os, name) for name in _REDIRECTED_OS},
            "redirect": redirect_target(),  # an outer Project's redirect: kept (or put back) on exit
            "level": logging.getLogger(USER_LOGGER).level,
        }

    def _restore(self) -> None:
        saved = self._saved
        if not saved:
            return
        if saved["redirect"] is None:  # compat.mnt's redirect, installed on entry: every function it wrapped
            uninstall_redirect()
        elif redirect_target() != saved["redirect"]:  # an outer Project's: /mnt/project is its project again
            install_redirect(saved["redirect"])
        builtins.open, io.open = saved["open"]
        for name, func in saved["os"].items():
            setattr(os, name, func)
        socket.getaddrinfo = saved["getaddrinfo"]
        os.chdir(saved["cwd"])
        added = [p for p in sys.path if p and p not in saved["sys.path"]]
        forget_modules(saved["modules"], added + saved.get("own", []))
        put_back(saved.get("aside", {}))
        sys.path[:] = saved["sys.path"]
        _set_environ(saved["environ"])
        logging.getLogger(USER_LOGGER).setLevel(saved["level"])
        self._saved, self._entered = {}, None

    def _enter(self) -> ServeConfig:
        config, settings = self.config, self.settings
        workdir = config.project
        if not settings.raw_project and config.config_file is not None:
            workdir = packaged_view(config.project, config.config_file)
        mnt_mode = provide_mnt_project(workdir, project=config.project)
        self._enter_code(config, workdir)
        # The project's files, wherever sys.path had them before (pytest puts a test's folder there), are its own.
        self._saved["own"] = [str(workdir.resolve()), str(config.project.resolve())]
        self._saved["aside"] = {}
        self._set_aside_shadowed()
        for api in config.apis:
            image = api.predictor.image if api.predictor else None
            if image:
                log.info(
                    "api %r: image %s is not pulled; the current Python environment runs the predictor", api.name, image
                )
        run_dependencies_script(config.project, allowed=settings.system_deps)
        if settings.install:
            install_requirements(config.project, self.cache_dir, quiet=settings.quiet)
        self._entered = replace(config, workdir=workdir if workdir != config.project else None, mnt_mode=mnt_mode)
        return self._entered

    def _enter_code(self, config: ServeConfig, workdir: Path) -> None:
        """The working directory, sys.path and the environment of user code (.env, --environment, the predictors')."""
        defaults = {"ABEJA_TRAINING_RESULT_DIR": str(config.project / TRAINING_RESULT_DIR)}
        handlers = [api.handler for api in config.apis if api.handler]
        if handlers:
            defaults.update(ABEJA_LOCAL_VALUES)
        if len(handlers) == 1:
            defaults["HANDLER"] = handlers[0]
        if self.settings.url:
            defaults["LOCALSERVE_URL"] = self.settings.url
        if self.settings.quiet or any(api.model_format == "tensorflow" for api in config.apis):
            # TensorFlow reads it once, at its import: its C++ info and warning lines stay out of our logs
            # (and --quiet's) unless the user set it (a default: the environment, .env, --environment win).
            defaults["TF_CPP_MIN_LOG_LEVEL"] = "2"
        enter_project(workdir, self.settings.environment, defaults, dotenv=config.project / ".env")
        self._enter_predictors(config, workdir)

    def _set_aside_shadowed(self) -> None:
        """Set aside the modules imported from elsewhere that the project's files (as they are now) shadow."""
        saved = self._saved
        own = saved["own"]
        added = [p for p in sys.path if p and p not in saved["sys.path"]]
        for name, module in set_aside_shadowed([*added, *own], own + added).items():
            saved["aside"].setdefault(name, module)  # put back on exit

    def reload(self, *, requirements: bool) -> ServeConfig:
        """While inside (``serve --reload``): the config read again and the surroundings of user code made again.

        The packaged view, the environment and (with ``requirements``) the installed requirements are made again; user
        modules are let go with their bytecode, and newly shadowed ones set aside. An invalid config or ``.env``, or a
        failed install, is raised with the environment and sys.path as they were; ``dependencies.sh`` is not run again.
        """
        entered = self._entered
        if entered is None:
            raise RuntimeError("Project.reload outside the project")
        config = self.reread() if self.reread is not None else self.config
        environ, path = dict(os.environ), list(sys.path)
        try:
            reloaded = self._reenter(config, entered, requirements=requirements)
        except BaseException:
            _set_environ(environ)
            sys.path[:] = path
            raise
        self.config = config
        return reloaded

    def _reenter(self, config: ServeConfig, entered: ServeConfig, *, requirements: bool) -> ServeConfig:
        saved, settings = self._saved, self.settings
        workdir = entered.workdir or config.project
        if entered.workdir is not None:
            sync_view(config.project, config.config_file, workdir)
        added = [p for p in sys.path if p and p not in saved["sys.path"]]
        envs = [p for p in added if Path(p).parent == self.cache_dir / "envs"]
        forget_modules(saved["modules"], [*[p for p in added if p not in envs], str(config.project)], bytecode=True)
        _set_environ(saved["environ"])
        sys.path[:] = saved["sys.path"]
        self._enter_code(config, workdir)
        self._set_aside_shadowed()  # what files added since shadow, as on entry
        if settings.install:
            if requirements:
                install_requirements(config.project, self.cache_dir, quiet=settings.quiet)
            elif (target := cached_requirements(config.project, self.cache_dir)) is not None:
                activate_requirements(target)
        gone = [p for p in envs if p not in sys.path]
        kept = forget_installed(saved["modules"], gone) if gone else []
        if kept:
            log.warning(
                "requirements changed: %s, already imported with native code, stay as loaded until serve restarts",
                ", ".join(kept),
            )
        return replace(config, workdir=entered.workdir, mnt_mode=entered.mnt_mode)

    def _enter_predictors(self, config: ServeConfig, workdir: Path) -> None:
        """Each predictor's ``python_path`` on sys.path, its ``env`` exported, the most verbose ``log_level``."""
        api_env: dict[str, tuple[str, str]] = {}
        levels = []
        for api in config.apis:
            predictor = api.predictor
            if predictor is None:
                continue
            if predictor.python_path:
                folder = str((workdir / predictor.python_path).resolve())
                if folder not in sys.path:
                    sys.path.insert(1, folder)
            for key, value in predictor.env.items():
                if key in api_env and api_env[key][1] != value:
                    raise ConfigError(
                        f"{config.source}: apis {api_env[key][0]!r} and {api.name!r} set {key!r} to different values "
                        f"in 'env', but they share one process here; serve them apart with --api NAME."
                    )
                api_env[key] = (api.name, value)
            if predictor.log_level:
                levels.append(getattr(logging, predictor.log_level.upper()))
        os.environ.update({key: value for key, (_, value) in api_env.items() if key not in self.settings.environment})
        if levels:
            logging.getLogger(USER_LOGGER).setLevel(min(levels))


def _set_environ(environ: Mapping[str, str]) -> None:
    """Make ``os.environ`` exactly ``environ``."""
    for key in [key for key in os.environ if key not in environ]:
        del os.environ[key]
    os.environ.update(environ)

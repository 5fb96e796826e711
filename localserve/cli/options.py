"""Options shared by the commands, and the steps run and serve share: load the config, enter the project."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from localserve.config import ServeConfig
from localserve.errors import ConfigError, LocalServeError

F = Callable[..., Any]


def fail_on_errors(func: F) -> F:
    """LocalServeError → a click error (message, then the user's traceback if any), exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except LocalServeError as exc:
            message = str(exc)
            if exc.details:
                message += "\n\n" + exc.details.rstrip()
            raise click.ClickException(message) from None

    return wrapper


def project_options(func: F) -> F:
    """The ``--project`` and ``--config`` options of the commands that read a project."""
    options = [
        click.option(
            "--project",
            "-p",
            type=click.Path(file_okay=False, exists=True, path_type=Path),
            default=".",
            show_default=True,
            help="The project directory (working directory and sys.path of user code).",
        ),
        click.option(
            "--config",
            "-c",
            "config_file",
            type=click.Path(dir_okay=False, path_type=Path),
            help="API config file (default: localserve.yaml or cortex.yaml in the project).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True)
class ApiFlags:
    """The flags of `run` and `serve` that shape the APIs (the YAML keys of the one-API case)."""

    handler: str | None
    context_json: str | None
    environment: tuple[str, ...]
    no_install: bool
    threads_per_process: int | None
    max_queue: int | None
    timeout: float | None
    max_batch_size: int | None
    batch_interval: str | None
    allow_cpu_fallback: bool
    log_level: str
    log_format: str | None
    raw_project: bool
    system_deps: bool
    async_store: str | None


_HANDLER_HELP = 'ABEJA handler "module:function", e.g. main:handler (no config file needed).'
_API_OPTIONS = [
    click.option("--handler", help=_HANDLER_HELP),
    click.option("--context", "context_json", help="The handler's context dict as JSON, e.g. '{\"k\": 1}'."),
    click.option(
        "--environment",
        "-e",
        multiple=True,
        metavar="KEY:VALUE",
        help="Environment variable for user code (repeatable).",
    ),
    click.option("--no-install", is_flag=True, help="Do not install the project's requirements.txt / Pipfile."),
    click.option("--threads-per-process", type=click.IntRange(min=1), help="Worker threads per API (default 1)."),
    click.option("--max-queue", type=click.IntRange(min=1), help="Requests queued per API before 503 (default 100)."),
    click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds before 504 (default 60)."),
    click.option("--max-batch-size", type=click.IntRange(min=1), help="Dynamic batching: largest batch."),
    click.option("--batch-interval", help="Dynamic batching: longest wait for a batch to fill, e.g. 5ms."),
    click.option("--allow-cpu-fallback", is_flag=True, help="Run on CPU when a GPU is asked for but unusable."),
    click.option(
        "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
    ),
    click.option(
        "--log-format",
        type=click.Choice(["json", "text"]),
        help="Log format (default: text for run; for serve, json unless stderr is a terminal).",
    ),
    click.option(
        "--raw-project",
        is_flag=True,
        help="User code sees the project folder as it is, not as the platform packaged it (ignore rules applied).",
    ),
    click.option(
        "--system-deps",
        is_flag=True,
        help="Run the project's dependencies.sh before installing requirements (the Docker image does).",
    ),
    click.option(
        "--async-store",
        metavar="URL",
        help="Job store of the AsyncAPIs: redis://HOST:PORT/DB or sqlite:///PATH (default: SQLite in the cache folder).",
    ),
]


def api_options(func: F, *, handler_short: bool = False) -> F:
    """Add the ApiFlags options; the command receives them as one ``flags`` argument.

    ``handler_short``: ``-h`` means ``--handler``, as in ``abeja model run-local -h main:handler``.
    """
    names = list(ApiFlags.__dataclass_fields__)
    options = list(_API_OPTIONS)
    if handler_short:
        options[0] = click.option("--handler", "-h", "handler", help=_HANDLER_HELP)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = ApiFlags(**{name: kwargs.pop(name) for name in names})
        return func(*args, flags=flags, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def run_api_options(func: F) -> F:
    """api_options with ``-h`` for ``--handler`` (the ``run`` command, like ABEJA's run-local)."""
    return api_options(func, handler_short=True)


def load(project: Path, config_file: Path | None, flags: ApiFlags) -> ServeConfig:
    """The config file's APIs with the flags applied, or one API built from the flags."""
    from localserve.config import load_config

    context = None
    if flags.context_json is not None:
        try:
            context = json.loads(flags.context_json)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"Invalid --context {flags.context_json!r}: not JSON ({exc.msg}); expected e.g. '{{\"k\": 1}}'."
            ) from None
        if not isinstance(context, dict):
            raise ConfigError(f"Invalid --context {flags.context_json!r}: expected a JSON object.")
    batching = None
    if flags.max_batch_size is not None or flags.batch_interval is not None:
        if flags.max_batch_size is None:
            raise ConfigError("--batch-interval needs --max-batch-size.")
        batching = {"max_batch_size": flags.max_batch_size, "batch_interval": flags.batch_interval or "5ms"}
    config = load_config(
        project,
        config_file,
        handler=flags.handler,
        context=context,
        threads_per_process=flags.threads_per_process,
        max_queue=flags.max_queue,
        timeout=flags.timeout,
        batching=batching,
    )
    if flags.async_store is not None:
        from localserve.protocols.asyncapi.config import with_async_store

        config = with_async_store(config, flags.async_store)
    return config


def prepare(config: ServeConfig, flags: ApiFlags, *, quiet: bool, url: str | None) -> ServeConfig:
    """Recreate the platform around user code, in this order, and return the config that records it.

    Build the packaged view of the project; provide
    ``/mnt/project`` (a mount namespace needs a single-threaded process, so this comes before
    anything starts a thread); enter the project (cwd, sys.path, .env, --environment, defaults);
    apply each predictor's ``python_path``, ``env`` and ``log_level``; run ``dependencies.sh``
    (``--system-deps``); install requirements.
    """
    import logging
    import os
    import sys
    from dataclasses import replace

    from localserve.compat.mnt import provide_mnt_project
    from localserve.compat.platform import ABEJA_LOCAL_VALUES, run_dependencies_script
    from localserve.compat.view import packaged_view
    from localserve.project import TRAINING_RESULT_DIR, enter_project, install_requirements, parse_environment

    env = parse_environment(flags.environment)
    workdir = config.project
    if not flags.raw_project and config.config_file is not None:
        workdir = packaged_view(config.project, config.config_file)
    mnt_mode = provide_mnt_project(workdir, project=config.project)
    defaults = {"ABEJA_TRAINING_RESULT_DIR": str(config.project / TRAINING_RESULT_DIR)}
    handlers = [api.handler for api in config.apis if api.handler]
    if handlers:
        defaults.update(ABEJA_LOCAL_VALUES)
    if len(handlers) == 1:
        defaults["HANDLER"] = handlers[0]
    if url:
        defaults["LOCALSERVE_URL"] = url
    enter_project(workdir, env, defaults, dotenv=config.project / ".env")
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
    os.environ.update({key: value for key, (_, value) in api_env.items() if key not in env})
    if levels:
        from localserve.logs import logger

        logger.setLevel(min(levels))
    for api in config.apis:
        image = api.predictor.image if api.predictor else None
        if image:
            logging.getLogger("localserve").info(
                "api %r: image %s is not pulled; the current Python environment runs the predictor", api.name, image
            )
    run_dependencies_script(config.project, allowed=flags.system_deps)
    if not flags.no_install:
        install_requirements(config.project, quiet=quiet)
    return replace(config, workdir=workdir if workdir != config.project else None, mnt_mode=mnt_mode)


def setup_logging(flags: ApiFlags, *, quiet: bool = False, default_format: str | None = None) -> None:
    """Configure logging from the command's flags (``quiet``: errors only)."""
    from localserve.logs import configure_logging

    configure_logging(flags.log_format or default_format, "error" if quiet else flags.log_level)

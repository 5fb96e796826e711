"""Options shared by the commands, and what run and serve share: the config loaded, the settings built.

Two things come out of the flags of ``run`` and ``serve``, each built here once:

- the API config: ``ApiFlags`` holds the flags that shape it (the YAML keys of the one-API case,
  ``--context``, ``--async-store``), and ``load`` applies them. They are config, not settings:
  nothing past ``load`` sees them.
- the settings tree, ``ServeOptions`` (``serve_options``): every other flag and the environment
  variables localserve reads, with ``HttpLimits`` and ``ProjectSettings`` nested. The Project context
  gets its piece (``options.project`` and ``options.cache_dir``), each API an ``ApiOptions`` derived
  from the tree (``ApiOptions.of``), the HTTP wire ``options.limits``.

``ProjectSettings`` is part of the tree rather than a view of it because ``serve`` needs it before
the tree is whole: the Project is entered first, and the settings that the project's environment
may change (``.env``: ``OTEL_*``, ``CUDA_VISIBLE_DEVICES``, glibc's malloc variables) are read
inside it. So ``serve`` builds the project's piece and the cache folder before, and the tree nests
those very objects (``serve_options(project=..., cache_dir=...)``); ``run`` and ``localserve.testing``
build the whole tree first.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from localserve.cli.otel import trace_export
from localserve.config import ServeConfig, load_config
from localserve.config.options import HttpLimits, ProjectSettings, ServeOptions
from localserve.errors import ConfigError, LocalServeError
from localserve.logs import configure_logging, configured_logging
from localserve.project.directory import parse_environment
from localserve.protocols.asyncapi.config import with_async_store

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
    """The flags of ``run`` and ``serve`` that shape the API config (the YAML keys of the one-API case), for ``load``.

    The defaults are the flags' (``localserve.testing`` builds one from keyword arguments).
    """

    handler: str | None = None
    context_json: str | None = None
    threads_per_process: int | None = None
    max_queue: int | None = None
    timeout: float | None = None
    max_batch_size: int | None = None
    batch_interval: str | None = None
    async_store: str | None = None


# The settings among the flags of run and serve: named as the fields of ServeOptions and ProjectSettings,
# but --environment (KEY:VALUE pairs, parsed by project_settings) and --no-install (ProjectSettings.install).
SETTING_FLAGS = (
    *("environment", "no_install", "raw_project", "system_deps"),
    *("allow_cpu_fallback", "log_level", "log_format", "cache_dir"),
)


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
    click.option(
        "--cache-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where installed requirements, downloaded models and AsyncAPI jobs are kept "
        "(default: $XDG_CACHE_HOME/localserve, else ~/.cache/localserve).",
    ),
]


def api_options(func: F, *, handler_short: bool = False) -> F:
    """Add the options of run and serve; the command receives them as ``flags`` (ApiFlags, the config's) and
    ``settings`` (a dict: the SETTING_FLAGS, for ``serve_options``).

    ``handler_short``: ``-h`` means ``--handler``, as in ``abeja model run-local -h main:handler``.
    """
    names = list(ApiFlags.__dataclass_fields__)
    options = list(_API_OPTIONS)
    if handler_short:
        options[0] = click.option("--handler", "-h", "handler", help=_HANDLER_HELP)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = ApiFlags(**{name: kwargs.pop(name) for name in names})
        settings = {name: kwargs.pop(name) for name in SETTING_FLAGS}
        return func(*args, flags=flags, settings=settings, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def run_api_options(func: F) -> F:
    """api_options with ``-h`` for ``--handler`` (``run`` and ``serve``, like ABEJA's run-local)."""
    return api_options(func, handler_short=True)


def load(project: Path, config_file: Path | None, flags: ApiFlags) -> ServeConfig:
    """The config file's APIs with the flags applied, or one API built from the flags."""
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
        config = with_async_store(config, flags.async_store)
    return config


def project_settings(settings: dict[str, Any], *, quiet: bool = False, url: str | None = None) -> ProjectSettings:
    """How the Project context recreates the platform around user code, from the flags that shape it
    (taken out of ``settings``: ``environment``, ``no_install``, ``raw_project``, ``system_deps``)."""
    return ProjectSettings(
        environment=parse_environment(settings.pop("environment", ())),
        raw_project=settings.pop("raw_project", False),
        system_deps=settings.pop("system_deps", False),
        install=not settings.pop("no_install", False),
        quiet=quiet,
        url=url,
    )


def serve_options(environ: Mapping[str, str], **settings: Any) -> ServeOptions:
    """The settings tree of ``run``, ``serve`` and ``localserve.testing``: the command's ``settings`` (named as the
    fields of ServeOptions, and HttpLimits' and ProjectSettings' fields flat as their flags are, or a built
    ``project``), then the environment's. ``cache_dir`` is decided here (``cache_dir_of``) unless given."""
    limits = {name: settings.pop(name) for name in HttpLimits.__dataclass_fields__ if name in settings}
    if limits:
        settings["limits"] = HttpLimits(**limits)
    if "project" not in settings:
        settings["project"] = project_settings(
            settings, quiet=settings.pop("quiet", False), url=settings.pop("url", None)
        )
    settings["cache_dir"] = cache_dir_of(settings.get("cache_dir"), environ)
    return ServeOptions(**{**environment_settings(environ), **settings})


def cache_dir_of(flag: Path | None, environ: Mapping[str, str] = os.environ) -> Path:
    """The cache folder (installed requirements, downloaded models, AsyncAPI stores), decided here only:
    ``--cache-dir`` (``LOCALSERVE_CACHE_DIR``), else ``$XDG_CACHE_HOME/localserve`` (the freedesktop
    convention), else ``~/.cache/localserve``."""
    if flag is not None:
        return flag
    xdg = environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "localserve"


S3_ENDPOINT_VARIABLE = "LOCALSERVE_S3_ENDPOINT"  # deprecated: botocore reads AWS_ENDPOINT_URL_S3 itself


def environment_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings of ServeOptions that come from the environment rather than a flag (read here, never below).

    ``LOCALSERVE_S3_ENDPOINT`` still works, with a warning: botocore's own ``AWS_ENDPOINT_URL_S3``
    replaces it (and wins when both are set).
    """
    s3_endpoint = environ.get(S3_ENDPOINT_VARIABLE) or None
    if s3_endpoint is not None:
        import logging

        logging.getLogger("localserve").warning(
            "%s is deprecated: set AWS_ENDPOINT_URL_S3 instead (botocore reads it itself)%s",
            S3_ENDPOINT_VARIABLE,
            "; AWS_ENDPOINT_URL_S3 is set too, and wins" if environ.get("AWS_ENDPOINT_URL_S3") else "",
        )
        if environ.get("AWS_ENDPOINT_URL_S3"):
            s3_endpoint = None
    return {
        "on_kubernetes": bool(environ.get("KUBERNETES_SERVICE_HOST")),
        "tracing": trace_export(environ),
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "s3_endpoint": s3_endpoint,
    }


def setup_logging(
    settings: Mapping[str, Any], *, default_format: str | None = None, config_file: Path | None = None
) -> None:
    """Configure logging from the command's ``--log-format`` and ``--log-level`` (``config_file``: ``--log-config``)."""
    configure_logging(settings["log_format"] or default_format, settings["log_level"], config_file=config_file)


def logging_configured(
    settings: Mapping[str, Any], *, quiet: bool = False, default_format: str | None = None
) -> contextlib.AbstractContextManager[object]:
    """Logging configured for the time of a command (``quiet``: errors only): what it replaced is back afterwards
    (``CliRunner``)."""
    return configured_logging(settings["log_format"] or default_format, "error" if quiet else settings["log_level"])

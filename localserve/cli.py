"""The ``localserve`` command: flags in, calls out. Errors become click exceptions here only."""

from __future__ import annotations

import functools
import json
import mimetypes
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from localserve import __version__
from localserve.errors import ConfigError, LocalServeError

F = Callable[..., Any]


def _fail_on_errors(func: F) -> F:
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


def _project_options(func: F) -> F:
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


def _api_options(func: F) -> F:
    options = [
        click.option("--handler", help='ABEJA handler "module:function", e.g. main:handler (no config file needed).'),
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
        click.option(
            "--max-queue", type=click.IntRange(min=1), help="Requests queued per API before 503 (default 100)."
        ),
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
            help="Log line format (default: json when stderr is not a terminal).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _load(
    project: Path,
    config_file: Path | None,
    handler: str | None,
    context_json: str | None,
    threads_per_process: int | None,
    max_queue: int | None,
    timeout: float | None,
    max_batch_size: int | None,
    batch_interval: str | None,
) -> Any:
    from localserve.config import load_config

    context = None
    if context_json is not None:
        try:
            context = json.loads(context_json)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"Invalid --context {context_json!r}: not JSON ({exc.msg}); expected e.g. '{{\"k\": 1}}'."
            ) from None
        if not isinstance(context, dict):
            raise ConfigError(f"Invalid --context {context_json!r}: expected a JSON object.")
    batching = None
    if max_batch_size is not None or batch_interval is not None:
        if max_batch_size is None:
            raise ConfigError("--batch-interval needs --max-batch-size.")
        batching = {"max_batch_size": max_batch_size, "batch_interval": batch_interval or "5ms"}
    return load_config(
        project,
        config_file,
        handler=handler,
        context=context,
        threads_per_process=threads_per_process,
        max_queue=max_queue,
        timeout=timeout,
        batching=batching,
    )


def _prepare(config: Any, environment: tuple[str, ...], no_install: bool, quiet: bool, url: str | None) -> None:
    from localserve.project import TRAINING_RESULT_DIR, enter_project, install_requirements, parse_environment

    env = parse_environment(environment)
    defaults = {"ABEJA_TRAINING_RESULT_DIR": str(config.project / TRAINING_RESULT_DIR)}
    handlers = [api.handler for api in config.apis if api.handler]
    if len(handlers) == 1:
        defaults["HANDLER"] = handlers[0]
    if url:
        defaults["LOCALSERVE_URL"] = url
    enter_project(config.project, env, defaults)
    if not no_install:
        install_requirements(config.project, quiet=quiet)


def _setup_logging(level: str, fmt: str | None, quiet: bool = False) -> None:
    from localserve.logs import configure_logging

    configure_logging(fmt, "error" if quiet else level)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="localserve")
def main() -> None:
    """Run ABEJA Platform and Cortex model handlers on your own machine, as the platform would."""


@main.command()
@_project_options
@_api_options
@click.option("--api", "api_name", help="Which API of the config receives the request.")
@click.option("--input", "-i", "input_path", help="File to send as the request body ('-' for stdin).")
@click.option("--content-type", help="Content-Type of the body (default: guessed from the file's extension).")
@click.option("--method", "-X", default="POST", show_default=True)
@click.option("--header", "-H", "headers", multiple=True, metavar="K:V", help="Request header (repeatable).")
@click.option("--query", default="", help="Query string, e.g. debug=true.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the response body here instead of stdout.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but the response body.")
@_fail_on_errors
def run(
    project: Path,
    config_file: Path | None,
    handler: str | None,
    context_json: str | None,
    environment: tuple[str, ...],
    no_install: bool,
    threads_per_process: int | None,
    max_queue: int | None,
    timeout: float | None,
    max_batch_size: int | None,
    batch_interval: str | None,
    allow_cpu_fallback: bool,
    log_level: str,
    log_format: str | None,
    api_name: str | None,
    input_path: str | None,
    content_type: str | None,
    method: str,
    headers: tuple[str, ...],
    query: str,
    output: Path | None,
    quiet: bool,
) -> None:
    """Send one request to the handler in-process and print the response body.

    \b
    localserve run --handler main:handler --input cat.jpg --quiet > flipped.jpg
    localserve run --config cortex.yaml --api iris --input sample.json
    """
    from localserve.client import run_once
    from localserve.logs import capture_prints
    from localserve.server import ServeOptions, create_app

    _setup_logging(log_level, log_format or "text", quiet)
    body, guessed = _read_input(input_path)
    header_list = [_split_header(h) for h in headers]
    if not any(k.lower() == "content-type" for k, _ in header_list) and (content_type or guessed):
        header_list.append(("Content-Type", content_type or guessed or ""))
    config = _load(
        project,
        config_file,
        handler,
        context_json,
        threads_per_process,
        max_queue,
        timeout,
        max_batch_size,
        batch_interval,
    )
    api = config.api(api_name).name
    _prepare(config, environment, no_install, quiet, os.environ.get("LOCALSERVE_URL"))
    app = create_app(config, ServeOptions(allow_cpu_fallback=allow_cpu_fallback))
    with capture_prints() as real_stdout:  # what user code prints is logged, never mixed with the body
        status, response_headers, response_body = run_once(
            app, api=api, method=method, headers=header_list, body=body, query_string=query
        )
    if status >= 400:
        click.echo(f"Error: the handler answered {status}:", err=True)
        click.echo(response_body.decode("utf-8", "replace"), err=True)
        sys.exit(1)
    if output is not None:
        output.write_bytes(response_body)
        return
    response_type = next((v for k, v in response_headers if k == "content-type"), "")
    stdout = real_stdout.buffer
    if real_stdout.isatty() and response_type.startswith("application/json"):
        try:
            response_body = (json.dumps(json.loads(response_body), indent=4, ensure_ascii=False) + "\n").encode()
        except ValueError:
            pass
    stdout.write(response_body)
    stdout.flush()


def _read_input(input_path: str | None) -> tuple[bytes, str | None]:
    if input_path is None:
        return b"", None
    if input_path == "-":
        return sys.stdin.buffer.read(), "application/octet-stream"
    path = Path(input_path)
    if not path.is_file():
        raise ConfigError(f"--input {input_path!r}: no such file.")
    guessed, _ = mimetypes.guess_type(path.name)
    return path.read_bytes(), guessed or "application/octet-stream"


def _split_header(item: str) -> tuple[str, str]:
    key, sep, value = item.partition(":")
    if not sep or not key.strip():
        raise ConfigError(f"Invalid --header {item!r}: expected NAME:VALUE, e.g. 'Accept: application/json'.")
    return key.strip(), value.strip()


@main.command()
@_project_options
@_api_options
@click.option("--api", "api_names", multiple=True, help="Serve only this API of the config (repeatable).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 for all).")
@click.option("--port", default=8888, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--max-body-size",
    default=100 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Largest request body in bytes (413 beyond).",
)
@click.option(
    "--replicas", type=click.IntRange(min=1), help="Processes on one port (default compute.init_replicas or 1)."
)
@click.option(
    "--graceful-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds in-flight requests get to finish on SIGTERM/SIGINT.",
)
@click.option("--keep-going", is_flag=True, help="Keep serving the other APIs when one fails to load (it answers 503).")
@click.option("--access-log/--no-access-log", default=True, show_default=True, help="One log line per request.")
@click.option(
    "--metrics/--no-metrics",
    default=True,
    show_default=True,
    help="Prometheus metrics at /metrics (--no-metrics only to measure their cost).",
)
@_fail_on_errors
def serve(
    project: Path,
    config_file: Path | None,
    handler: str | None,
    context_json: str | None,
    environment: tuple[str, ...],
    no_install: bool,
    threads_per_process: int | None,
    max_queue: int | None,
    timeout: float | None,
    max_batch_size: int | None,
    batch_interval: str | None,
    allow_cpu_fallback: bool,
    log_level: str,
    log_format: str | None,
    api_names: tuple[str, ...],
    host: str,
    port: int,
    max_body_size: int,
    replicas: int | None,
    graceful_timeout: float,
    keep_going: bool,
    access_log: bool,
    metrics: bool,
) -> None:
    """Serve the project's APIs over HTTP (http://127.0.0.1:8888/ by default)."""
    from localserve.server import ServeOptions
    from localserve.supervisor import serve_forever

    _setup_logging(log_level, log_format)
    config = _load(
        project,
        config_file,
        handler,
        context_json,
        threads_per_process,
        max_queue,
        timeout,
        max_batch_size,
        batch_interval,
    )
    if api_names:
        config = config.only(api_names)
    display_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    _prepare(config, environment, no_install, False, f"http://{display_host}:{port}")
    options = ServeOptions(
        max_body_size=max_body_size,
        allow_cpu_fallback=allow_cpu_fallback,
        keep_going=keep_going,
        access_log=access_log,
        metrics=metrics,
    )
    code = serve_forever(
        config,
        options,
        host=host,
        port=port,
        replicas=replicas,
        graceful_timeout=graceful_timeout,
        log_format=log_format,
        log_level=log_level,
    )
    if code:
        sys.exit(code)


@main.command()
@_project_options
@click.option("--handler", help='ABEJA handler "module:function".')
@_fail_on_errors
def check(project: Path, config_file: Path | None, handler: str | None) -> None:
    """Validate the project's config and files without serving it."""
    from localserve.checks import check_project
    from localserve.config import load_config

    config = load_config(project, config_file, handler=handler)
    for line in check_project(config):
        click.echo(line)


@main.command()
@click.argument("api", required=False)
@click.option("--url", default="http://127.0.0.1:8888", show_default=True, help="The running server.")
@click.option("--json", "as_json", is_flag=True, help="Print the stats as JSON.")
@_fail_on_errors
def get(api: str | None, url: str, as_json: bool) -> None:
    """Show each API's status, request counts, latency and tracker stats (like `cortex get`)."""
    import urllib.error
    import urllib.request

    from localserve.status import render_get

    target = f"{url.rstrip('/')}/{api}/stats" if api else f"{url.rstrip('/')}/stats"
    try:
        with urllib.request.urlopen(target, timeout=10) as response:
            stats = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        raise LocalServeError(f"{target} answered {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LocalServeError(f"Cannot reach localserve at {url}: {reason}. Is `localserve serve` running?") from None
    if as_json:
        click.echo(json.dumps(stats, indent=2))
    else:
        click.echo(render_get(stats, api), nl=False)


@main.group()
def export() -> None:
    """Write deployment files: Kubernetes manifests, a .dockerignore."""


@export.command("kubernetes")
@_project_options
@click.option("--image", required=True, help="The image the cluster pulls, e.g. registry.example/iris:1.")
@click.option(
    "--graceful-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds in-flight requests get to finish; the pods' grace period is this plus 5.",
)
@_fail_on_errors
def export_kubernetes(project: Path, config_file: Path | None, image: str, graceful_timeout: float) -> None:
    """Print a Deployment, a Service api-<name> and a HorizontalPodAutoscaler per API.

    \b
    localserve export kubernetes --image registry.example/iris:1 > k8s.yaml && kubectl apply -f k8s.yaml
    """
    from localserve.config import find_config_file, load_config
    from localserve.export import kubernetes_manifests

    config = load_config(project, config_file)
    source = config_file if config_file is not None else find_config_file(config.project)
    click.echo(kubernetes_manifests(config, image, graceful_timeout=graceful_timeout, config_file=source), nl=False)


@export.command("dockerignore")
@_project_options
@_fail_on_errors
def export_dockerignore(project: Path, config_file: Path | None) -> None:
    """Print the .dockerignore that leaves out what the platform never packaged (seed 001)."""
    from localserve.config import find_config_file
    from localserve.export import dockerignore

    click.echo(dockerignore(project.resolve(), config_file or find_config_file(project.resolve())), nl=False)

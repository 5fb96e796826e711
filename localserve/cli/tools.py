"""`localserve check`, `get` and `export`: the commands around serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from localserve.cli.conventions import handler_command
from localserve.cli.get_tables import render_get
from localserve.cli.options import cache_dir_of, fail_on_errors, project_options
from localserve.config import find_config_file, load_config
from localserve.errors import LocalServeError
from localserve.export import dockerignore, kserve_manifests, kubernetes_manifests
from localserve.export.common import missing_config
from localserve.protocols.asyncapi.config import with_async_store

if TYPE_CHECKING:
    from localserve.config import ServeConfig


@handler_command()
@project_options
@click.option("--handler", "-h", "handler", help='ABEJA handler "module:function" (-h, as in `run`; help is --help).')
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where `run` and `serve` install the requirements (default: $XDG_CACHE_HOME/localserve, else ~/.cache/localserve).",
)
@click.option(
    "--grpc-port",
    type=click.IntRange(0, 65535),
    help="Check as `serve --grpc-port` would: grpcio and protobuf installed, and recent enough.",
)
@fail_on_errors
def check(
    project: Path, config_file: Path | None, handler: str | None, cache_dir: Path | None, grpc_port: int | None
) -> None:
    """Validate the project's config and files without serving it."""
    # lazy: numpy (the runtimes): every command loads this module, and serve's mount namespace needs no threads
    from localserve.checks import check_project

    config = load_config(project, config_file, handler=handler)
    for line in check_project(config, cache_dir_of(cache_dir), grpc=grpc_port is not None):
        click.echo(line)


@click.command()
@click.argument("api", required=False)
@click.option("--url", default="http://127.0.0.1:8888", show_default=True, help="The running server.")
@click.option("--json", "as_json", is_flag=True, help="Print the stats as JSON.")
@click.option("--api-key", help="The key of a server started with --api-key (sent as 'Authorization: Bearer <key>').")
@fail_on_errors
def get(api: str | None, url: str, as_json: bool, api_key: str | None) -> None:
    """Show each API's status, request counts, latency and tracker stats (like `cortex get`)."""
    import urllib.error
    import urllib.request

    target = f"{url.rstrip('/')}/{api}/stats" if api else f"{url.rstrip('/')}/stats"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(target, headers=headers), timeout=10) as response:
            stats = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        hint = ""
        if exc.code == 401:
            hint = " (give the server's key: --api-key KEY or LOCALSERVE_API_KEY)" if not api_key else " (wrong key?)"
        raise LocalServeError(f"{target} answered {exc.code}: {detail.strip()}{hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LocalServeError(f"Cannot reach localserve at {url}: {reason}. Is `localserve serve` running?") from None
    if as_json:
        click.echo(json.dumps(stats, indent=2))
    else:
        click.echo(render_get(stats, api))


def manifest_options(func: Any) -> Any:
    """``--name`` and ``--namespace``, shared by the manifest exporters."""
    func = click.option(
        "--namespace", help="Write this namespace into every object (default: none, kubectl's current one)."
    )(func)
    return click.option(
        "--name",
        help="The project's name in the cluster, carried by the ConfigMap, the ServingRuntime and every "
        "object's app.kubernetes.io/instance label (default: the project folder's name).",
    )(func)


ASYNC_STORE = click.option(
    "--async-store", metavar="URL", help="The job store the AsyncAPIs' pods share: redis://HOST:PORT/DB."
)


def _export_config(
    command: str, project: Path, config_file: Path | None, async_store: str | None
) -> tuple[ServeConfig, Path | None]:
    """The config an export ships, and its file; an export needs one (it has no --handler to build one from)."""
    source = config_file if config_file is not None else find_config_file(project.resolve())
    if source is None:
        raise missing_config(command, project.resolve())
    config = load_config(project, config_file)
    if async_store is not None:
        config = with_async_store(config, async_store)
    return config, source


@click.group()
def export() -> None:
    """Write deployment files: Kubernetes manifests, KServe InferenceServices, a .dockerignore."""


@export.command("kubernetes")
@project_options
@click.option("--image", required=True, help="The image the cluster pulls, e.g. registry.example/iris:1.")
@click.option(
    "--graceful-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds in-flight requests get to finish; the pods' grace period is this plus 5.",
)
@ASYNC_STORE
@click.option(
    "--keda-prometheus",
    metavar="URL",
    help="Scale on requests in flight per replica (target_replica_concurrency) with a KEDA ScaledObject "
    "asking this Prometheus, e.g. http://prometheus.monitoring:9090 (default: a CPU HorizontalPodAutoscaler). "
    "Implies --keda.",
)
@click.option(
    "--keda",
    is_flag=True,
    help="Scale AsyncAPI workers with KEDA on the length of their queue in the Redis store, to zero when idle "
    "(default: a CPU HorizontalPodAutoscaler).",
)
@manifest_options
@fail_on_errors
def export_kubernetes(
    project: Path,
    config_file: Path | None,
    image: str,
    graceful_timeout: float,
    async_store: str | None,
    keda_prometheus: str | None,
    keda: bool,
    name: str | None,
    namespace: str | None,
) -> None:
    """Print a Deployment, a Service api-<name> and a HorizontalPodAutoscaler per API.

    An AsyncAPI is a front api-<name> (submits and polls) and workers api-<name>-worker scaled on its queue.

    \b
    localserve export kubernetes --image registry.example/iris:1 > k8s.yaml && kubectl apply -f k8s.yaml
    """
    config, source = _export_config("kubernetes", project, config_file, async_store)
    text = kubernetes_manifests(
        config,
        image,
        graceful_timeout=graceful_timeout,
        config_file=source,
        name=name,
        namespace=namespace,
        keda_prometheus=keda_prometheus,
        keda=keda,
    )
    click.echo(text, nl=False)


@export.command("kserve")
@project_options
@click.option("--image", required=True, help="The image KServe runs, e.g. registry.example/iris:1.")
@click.option(
    "--protocol",
    type=click.Choice(["rest", "grpc"]),
    default="rest",
    show_default=True,
    help="The Open Inference Protocol's transport for model APIs: REST on port 8080 (v2) or gRPC on 8081 (grpc-v2).",
)
@ASYNC_STORE
@manifest_options
@fail_on_errors
def export_kserve(
    project: Path,
    config_file: Path | None,
    image: str,
    protocol: str,
    async_store: str | None,
    name: str | None,
    namespace: str | None,
) -> None:
    """Print a ServingRuntime and an InferenceService per API (Open Inference Protocol for model APIs).

    \b
    localserve export kserve --image registry.example/iris:1 > kserve.yaml && kubectl apply -f kserve.yaml
    localserve export kserve --image registry.example/iris:1 --protocol grpc   # gRPC (h2c) on 8081
    """
    config, source = _export_config("kserve", project, config_file, async_store)
    text = kserve_manifests(config, image, config_file=source, name=name, namespace=namespace, protocol=protocol)
    click.echo(text, nl=False)


@export.command("dockerignore")
@project_options
@fail_on_errors
def export_dockerignore(project: Path, config_file: Path | None) -> None:
    """Print the .dockerignore that leaves out what the platform never packaged (Cortex 0.25-0.33 docs, *Predictors*)."""
    click.echo(dockerignore(project.resolve(), config_file or find_config_file(project.resolve())), nl=False)

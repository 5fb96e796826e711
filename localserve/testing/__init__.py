"""``localserve.testing``: the app ``localserve serve`` builds, called in-process from a test suite.

Example::

    import localserve.testing

    def test_tax():
        with localserve.testing.client("handlers_examples/json_tax", handler="main:handler") as client:
            response = client.post("/", json={"total_without_tax": 100})
        assert response.json() == {"total": 108.0}

``client`` enters the project exactly as ``serve`` does (the one ``Project`` context), builds the same app, runs its
lifespan (a load failure is raised) and yields an ``httpx.Client`` that calls it without a socket
(``testing.transport``). On exit the app is shut down and the project's changes to the process undone, so the next
client starts clean. ``run`` is ``localserve run``: one request to one API, and what the command prints.

Settings are keyword arguments named as ``serve``'s flags (``timeout=5``, ``max_batch_size=8``, ``hide_errors=True``
...), plus ``context`` (the ABEJA handler's context dict), ``environment`` (for user code) and ``install`` (``False``
skips requirements.txt); nothing is read from ``LOCALSERVE_*`` variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localserve.cli.options import ApiFlags, cache_dir_of, load, serve_options
from localserve.cli.run import read_input, request_headers, send_one
from localserve.config.options import HttpLimits, ProjectSettings, ServeOptions
from localserve.errors import ConfigError
from localserve.processes.peers import Peers
from localserve.project.compat.context import Project
from localserve.project.compat.hosts import RUN_URL, install_api_hosts
from localserve.project.directory import parse_environment

if TYPE_CHECKING:
    import httpx

    from localserve.config import ServeConfig
    from localserve.server import App

__all__ = ["RunResult", "client", "run"]

THREADS_EXIT_WAIT = 10.0  # seconds the APIs' threads get to end once the app has shut down
_FLAGS = {f.name for f in fields(ApiFlags)} - {"context_json"}
_OPTIONS = (
    {f.name for f in fields(ServeOptions)} | {f.name for f in fields(HttpLimits)} | {"raw_project", "system_deps"}
)
# The supervisor's, flat here, or about a listening socket or a process that an in-process client has not.
_INTERNAL = {
    *("replica", "replicas", "metrics_dir", "accept_when_loaded", "limits", "project", "reload", "grpc_port"),
    *("uds", "ssl_keyfile", "ssl_certfile", "root_path", "log_config", "freeze_heap"),
}
_EXTRA = {"context", "environment", "install"}


@dataclass(frozen=True)
class RunResult:
    """What ``localserve run`` answers: the status, the headers and the body it prints (stdout, or stderr on error)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def exit_code(self) -> int:
        """``localserve run``'s exit status: 0, or 1 when the handler answered 400 or more."""
        return 0 if self.status < 400 else 1

    @property
    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


@contextlib.contextmanager
def client(
    project_dir: str | os.PathLike[str],
    handler: str | None = None,
    config: str | os.PathLike[str] | None = None,
    *,
    api: str | Iterable[str] | None = None,
    base_url: str = "http://testserver",
    **settings: Any,
) -> Iterator[httpx.Client]:
    """An ``httpx.Client`` bound to the app ``serve`` would build for the project, once every API has loaded.

    ``handler``: an ABEJA handler (``"main:handler"``) when the project has no config file; ``config``:
    the config file (relative to the project); ``api``: serve only this API, or these (``serve --api``).
    """
    flags, options = _settings(settings, "client")
    if options.get("replicas", 1) != 1:
        raise ValueError("localserve.testing.client() runs one replica in this process; test replicas with serve.")
    project, config_file = _where(project_dir, config)
    full = load(project, config_file, replace(flags, handler=handler))
    names = [api] if isinstance(api, str) else list(api or [])
    serving = serve_options(os.environ, **options)  # the environment as it is, before the project's
    # What user code prints stays on stdout (pytest shows it with the test), unlike serve's log lines.
    with Project(full.only(names) if names else full, serving.project, cache_dir_of(serving.cache_dir)) as entered:
        peers = replace(full, workdir=entered.workdir, mnt_mode=entered.mnt_mode)
        with _serving(entered, peers, serving, base_url) as test_client:
            yield test_client


@contextlib.contextmanager
def _serving(config: ServeConfig, full: ServeConfig, options: ServeOptions, base_url: str) -> Iterator[httpx.Client]:
    """Inside the project: the App's lifespan run and every API loaded, a client on it; the API threads joined after."""
    # lazy: numpy, imported in the project: it starts threads, and /mnt/project's mount namespace needs none
    from localserve.server.inprocess import peer_starter
    from localserve.server.runner import Runner

    httpx, transport = _transport_modules()
    runner = Runner(config, options)
    # http://api-<name>:8888 from user code: the API on a loopback server of its own, started on call (as run).
    peers = Peers((a.name for a in full.apis), peer_starter(full, options))
    install_api_hosts(peers.port_of)  # undone with the rest of the Project context
    # Host: api-<name> on / and /predict (Cortex 0.25-0.33 docs, *Predictors*), a TrafficSplitter's name too, as serve routes them
    runner.app.host_names = frozenset([*(a.name for a in config.apis), *(s.name for s in config.splitters)])
    try:
        with transport.AppLoop(runner.asgi()) as loop:
            loop.run(_loaded(runner.app))
            if runner.failure is not None:
                raise runner.failure
            with httpx.Client(transport=transport.InProcessTransport(loop), base_url=base_url) as http:
                yield http
    finally:
        busy = runner.app.join_threads(THREADS_EXIT_WAIT)
        peers.close()
        if busy:
            logging.getLogger("localserve").warning("these threads still run after the client closed: %s", busy)


def _transport_modules() -> tuple[Any, Any]:
    """httpx (the extra ``testing``) and the in-process transport, with a clear error when httpx is missing."""
    try:
        import httpx

        from localserve.testing import transport  # lazy: httpx, the testing extra
    except ModuleNotFoundError as exc:
        if exc.name != "httpx":
            raise
        raise ModuleNotFoundError(
            "localserve.testing.client() needs httpx, which is not installed: pip install 'localserve[testing]'.",
            name="httpx",
        ) from None
    return httpx, transport


async def _loaded(app: App) -> None:
    if app.loading is not None:
        await asyncio.wait({app.loading})


def run(
    project_dir: str | os.PathLike[str],
    input: bytes | str | os.PathLike[str] | None = None,
    handler: str | None = None,
    config: str | os.PathLike[str] | None = None,
    *,
    api: str | None = None,
    method: str = "POST",
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    content_type: str | None = None,
    query: str = "",
    **settings: Any,
) -> RunResult:
    """``localserve run``: one request to one API, in-process; what the command prints, with the status.

    ``input``: the body as bytes, or a file to send (its Content-Type guessed from its name, as
    ``--input FILE``); ``api``: which API of the config (``--api``).
    """
    flags, options = _settings(settings, "run")
    project, config_file = _where(project_dir, config)
    # An AsyncAPI's job runs at once; LOCALSERVE_URL/<other API> reaches the others, as under `localserve run`.
    settings = {"async_jobs": False, **options, "project": replace(options["project"], url=RUN_URL)}
    run_options = serve_options(os.environ, **settings)
    body, guessed = b"", None
    if isinstance(input, bytes):
        body = input
    elif input is not None:
        if not Path(input).is_file():
            raise ConfigError(f"input={str(input)!r}: no such file; pass the request body as bytes, or a file's path.")
        body, guessed = read_input(str(input), run_options.max_body_size)
    pairs = list(headers.items() if isinstance(headers, Mapping) else headers)
    status, response_headers, response_body = send_one(
        project,
        config_file,
        replace(flags, handler=handler),
        run_options,
        api_name=api,
        method=method,
        headers=request_headers(pairs, content_type or guessed),
        body=body,
        query=query,
    )
    return RunResult(status, response_headers, response_body)


def _where(project_dir: str | os.PathLike[str], config: str | os.PathLike[str] | None) -> tuple[Path, Path | None]:
    """The project folder and its config file (relative to it), each checked to exist."""
    project = Path(project_dir)
    if not project.is_dir():
        what = "is not a directory" if project.exists() else "does not exist"
        raise ConfigError(
            f"Project directory {str(project_dir)!r} {what}; expected the folder of your handler (main.py) "
            "or of cortex.yaml / localserve.yaml."
        )
    if config is None:
        return project, None
    config_file = Path(config) if Path(config).is_absolute() else project / config
    return project, config_file


def _settings(settings: dict[str, Any], where: str) -> tuple[ApiFlags, dict[str, Any]]:
    """The keyword settings split into the config's flags (ApiFlags) and the settings tree's fields (for
    ``serve_options``); a name of neither is a TypeError."""
    known = _FLAGS | _OPTIONS | _EXTRA
    for name in settings:
        if name not in known or name in _INTERNAL - {"replicas"}:
            close = difflib.get_close_matches(name, sorted(known - _INTERNAL), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"localserve.testing.{where}() got an unknown setting {name!r}{hint} Settings are serve's flags "
                "and ServeOptions' fields (timeout=5, hide_errors=True, ...), context, environment and install."
            )
    flags = ApiFlags(
        context_json=json.dumps(settings["context"]) if settings.get("context") is not None else None,
        **{name: value for name, value in settings.items() if name in _FLAGS},
    )
    options = {name: value for name, value in settings.items() if name in _OPTIONS and name not in _FLAGS}
    options["project"] = ProjectSettings(
        environment=parse_environment([f"{key}:{value}" for key, value in (settings.get("environment") or {}).items()]),
        raw_project=options.pop("raw_project", False),
        system_deps=options.pop("system_deps", False),
        install=settings.get("install", True),
    )
    return flags, options

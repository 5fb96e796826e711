"""Shared fixtures: projects written into tmp_path, the real app behind TestClient, a free port."""

from __future__ import annotations

import gc
import itertools
import os
import random
import socket
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from localserve.config import load_config
from localserve.server import ServeOptions, create_app

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "handlers_examples"
# No __pycache__ in the examples (pytest's rewritten test files, user code imported in-process): `check` lists
# what a project does not package, and the tests assert that list. Set before handlers_examples/ is collected.
sys.dont_write_bytecode = True
# tritonclient.http runs on gevent, whose default resolver starts a native thread pool, with a hub of its own, in the
# test worker on the first request, and keeps it: a gevent thread beside every later test's threads in that worker.
# The blocking resolver keeps gevent on the test's own thread (the tests name loopback addresses). Set before any
# test module imports gevent.
os.environ.setdefault("GEVENT_RESOLVER", "block")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two workers per core, at most 8: many tests wait on a server process or a browser, not on a CPU."""
    return min(8, 2 * len(os.sched_getaffinity(0)))


# The files that take longest (pytest --durations), slowest first: pytest-xdist hands a worker one file at a time
# in collection order, so these start first and no worker is left alone with one of them at the end.
SLOW_FILES = (
    "test_make_models.py",
    "test_browser.py",
    "test_e2e.py",
    "test_benchmarks.py",
    "test_examples.py",
    "protocols/asyncapi/test_processes.py",
    "engine/test_core.py",
    "test_fidelity.py",
    "cli/test_cli.py",
    "cli/test_settings.py",
    "metrics/test_observability.py",
    "server/test_openapi_fuzz.py",
    "test_hostile.py",
    "test_dockerfile.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(SLOW_FILES)}
    tests = Path(__file__).parent

    def slow_first(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.relative_to(tests).as_posix(), len(rank))
        except ValueError:
            return len(rank)

    items.sort(key=slow_first)  # stable: a file's tests keep their order


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Captured output may hold lone surrogates (a log line naming a file whose name is not UTF-8): escape them,
    or pytest-xdist cannot send the report from its worker (execnet's "strings must be utf-8 encodable")."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    report.sections = [
        (title, text.encode("utf-8", "backslashreplace").decode("utf-8")) for title, text in report.sections
    ]


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """User modules imported by one test never leak into the next; the cache is per test."""
    before = set(sys.modules)
    monkeypatch.setenv("LOCALSERVE_CACHE_DIR", str(tmp_path / "_cache"))  # the CLI's, in process or not
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "_xdg"))  # the CLI's default when a test unsets the one above
    yield
    for name in set(sys.modules) - before:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None) or ""
        if not name.startswith(("localserve", "tests")) and (file.startswith(str(tmp_path)) or str(EXAMPLES) in file):
            del sys.modules[name]


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Path]:
    """Write ``{relative path: text}`` into a fresh project directory and return it."""

    def make(files: dict[str, str | bytes], name: str = "proj") -> Path:
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(textwrap.dedent(content).lstrip("\n"))
        return root

    return make


@contextmanager
def serving(project: Path, monkeypatch: pytest.MonkeyPatch, options: ServeOptions | None = None, **flags: Any):
    """The real app for ``project`` behind Starlette's TestClient, once every API is loaded."""
    from starlette.testclient import TestClient

    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    config = load_config(project, **flags)
    options = options or ServeOptions()
    if options.cache_dir is None:  # the test's own, as the CLI would give (else a folder of this process)
        options = replace(options, cache_dir=Path(os.environ["LOCALSERVE_CACHE_DIR"]))
    app = create_app(config, options)
    with TestClient(app, raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 60
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, client.get("/readyz").json()
            time.sleep(0.01)
        yield client


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    def start(project: Path, options: ServeOptions | None = None, **flags: Any) -> Any:
        return serving(project, monkeypatch, options, **flags)

    return start


_gevent_garbage = False  # set by triton_http, cleared by pytest_runtest_logfinish


@contextmanager
def triton_http(url: str) -> Iterator[Any]:
    """An unmodified ``tritonclient.http`` client of ``url`` (``http://host:port``), closed at the end; the gevent
    objects it leaves in reference cycles are freed once the test is over (``pytest_runtest_logfinish``)."""
    import tritonclient.http as triton

    global _gevent_garbage
    _gevent_garbage = True
    client = triton.InferenceServerClient(url.removeprefix("http://"))
    try:
        yield client
    finally:
        client.close()


def pytest_runtest_logfinish() -> None:
    """After a test that made a ``triton_http`` client (and dropped its fixtures' values): a collection here, on the
    test's own thread, frees the gevent objects the client left in reference cycles. Left to a later collection,
    they would be freed on whatever thread triggers it (a server's, a handler's, in a later test), where gevent
    raises InvalidThreadUseError, reported against that test, or worse."""
    global _gevent_garbage
    if _gevent_garbage:
        _gevent_garbage = False
        gc.collect()


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Wait for a state (never a duration). ``timeout`` only catches a hang: a passing test never reaches it,
    so it is generous enough for a machine under heavy load."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened within {timeout} s: {what}"
        time.sleep(0.01)


def free_port() -> int:
    """A loopback port for a server a test starts, free when asked, and not one another test takes meanwhile.

    ``bind(0)`` alone picks from the kernel's ephemeral range, where every client socket of every xdist
    worker takes its own port too: a port released here could be taken before the server binds it (CI
    saw a server exit with uvicorn's "address in use" that way). So the ports come from below that
    range, each worker from its own share, each worker's in turn.
    """
    global _ports
    if _ports is None:  # read once xdist has named this worker
        _ports = _port_share()
    low, share = _ports
    for _ in range(share):
        port = low + next(_turn) % share
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {low}-{low + share - 1}")


def _port_share() -> tuple[int, int]:
    """(first port, count) of this xdist worker's share of the ports below the kernel's ephemeral range."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    base = 10000 if ephemeral > 12000 else 1024
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    share = max(1, (ephemeral - base) // workers)
    return base + worker * share, share


_ports: tuple[int, int] | None = None
_turn = itertools.count(random.randrange(1 << 16))


def wait_ready(url: str, proc: Any = None, timeout: float = 60) -> float:
    """Poll ``url``/readyz until 200; seconds it took. Fails at once if the server process ``proc`` exits."""
    import httpx

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc is not None and proc.poll() is not None:
            output = getattr(proc, "captured", None) or "(see the test's server output)"
            raise AssertionError(f"server exited with {proc.returncode}: {output}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return time.monotonic() - start
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} never became ready")


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for a localserve subprocess: this checkout first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("LOCALSERVE_URL", None)
    env.update(extra)
    return env

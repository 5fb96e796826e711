"""``localserve serve`` as a real process on a free port, spoken to over real HTTP."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import EXAMPLES, cli_env, free_port, wait_ready, wait_until

pytestmark = pytest.mark.slow


@contextmanager
def server(
    *args: str, cwd: Path | None = None, ready: bool = True, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    output = tempfile.TemporaryFile()  # noqa: SIM115  (closed in the finally below)
    proc = subprocess.Popen(
        [sys.executable, "-m", "localserve", "serve", "--port", str(port), "--log-format", "text", *args],
        cwd=cwd,
        env=cli_env(**env),
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    proc.output = output  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}"
    try:
        if ready:
            try:
                wait_ready(url, proc)
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {output_of(proc)}") from None
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.captured = output_of(proc)  # type: ignore[attr-defined]
        output.close()


def output_of(proc: subprocess.Popen[bytes]) -> str:
    """What the server printed so far (or in all, once it has stopped)."""
    if hasattr(proc, "captured"):
        return str(proc.captured)
    # pread, not seek and read: the server writes through the same open file, at its offset.
    fd = proc.output.fileno()  # type: ignore[attr-defined]
    return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")


def wait_loaded(proc: subprocess.Popen[bytes], apis: list[str], replicas: int) -> None:
    """Wait until every replica has loaded each of ``apis``: /readyz answered by one replica says nothing of
    another, which answers 503 while it loads."""
    wait_until(
        lambda: all(output_of(proc).count(f"api '{api}' loaded in") >= replicas for api in apis),
        f"{replicas} replicas loaded",
    )


def test_serve_json_tax_over_http() -> None:
    with server("--handler", "main:handler", cwd=EXAMPLES / "json_tax") as (url, _):
        response = httpx.post(url, json={"total_without_tax": 100})
        assert (response.status_code, response.json()) == (200, {"total": 108.0})
        response = httpx.post(f"{url}/predict", json={}, headers={"X-Request-ID": "e2e-1"})
        assert response.status_code == 400 and response.headers["x-request-id"] == "e2e-1"
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{url}/missing").status_code == 404


def test_serve_iris_onnx_and_sigterm_exits_0() -> None:
    sample = json.loads((EXAMPLES / "iris_onnx" / "sample.json").read_text())
    with server("--project", str(EXAMPLES / "iris_onnx")) as (url, proc):
        response = httpx.post(f"{url}/iris", json=sample)
        assert response.json()["class_label"] == "iris-setosa"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


GATED_HANDLER = """
import os, time

def handler(request, context):
    body = request.read().decode()
    with open({log!r}, "a") as f:
        f.write(body + "\\n")
    if body == {gated!r}:  # held until the test creates the gate file; the bound only catches a hang
        deadline = time.monotonic() + 120
        while not os.path.exists({gate!r}) and time.monotonic() < deadline:
            time.sleep(0.01)
    return {{"content": body}}
"""


def gated_project(make_project, tmp_path: Path, gated: str) -> tuple[Path, Path, Path]:
    """A handler that logs every body to a file and holds the request whose body is ``gated`` until the
    test creates the gate file: (project, log, gate)."""
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    project = make_project({"main.py": GATED_HANDLER.format(log=str(log), gate=str(gate), gated=gated)})
    return project, log, gate


def logged(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def metric(url: str, name: str) -> float:
    """The sum of the samples called ``name`` on the server's ``/metrics`` (0 when there are none)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics").text
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples if s.name == name)


def test_a_client_that_goes_away_is_never_started(make_project, tmp_path: Path) -> None:
    project, log, gate = gated_project(make_project, tmp_path, "slow")
    with server("-p", str(project), "--handler", "main:handler") as (url, _):
        port = int(url.rsplit(":", 1)[1])
        slow: dict = {}
        thread = threading.Thread(target=lambda: slow.setdefault("r", httpx.post(url, content=b"slow", timeout=120)))
        thread.start()
        wait_until(lambda: logged(log) == ["slow"], "the slow request holding the API's one thread")
        with socket.create_connection(("127.0.0.1", port)) as sock:  # queued behind "slow", then hangs up
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\ngone")
            wait_until(lambda: metric(url, "localserve_queue_depth") == 1, "the request queued behind slow")
        wait_until(lambda: request_counts(url) == {"499": 1}, "the server saw the client leave")
        gate.touch()  # only now may the API's thread take the next request
        thread.join(120)
        assert slow["r"].text == "slow"
        assert httpx.post(url, content=b"after").text == "after"
    assert logged(log) == ["slow", "after"]


def test_graceful_shutdown_finishes_the_request_in_flight(make_project, tmp_path: Path) -> None:
    project, log, gate = gated_project(make_project, tmp_path, "in-flight")
    with server("-p", str(project), "--handler", "main:handler", "--graceful-timeout", "60") as (url, proc):
        result: dict = {}
        thread = threading.Thread(
            target=lambda: result.setdefault("r", httpx.post(url, content=b"in-flight", timeout=120))
        )
        thread.start()
        wait_until(lambda: logged(log) == ["in-flight"], "the request running")
        proc.send_signal(signal.SIGTERM)
        # uvicorn's own line: the server has the signal and the shutdown is under way, the request still held.
        wait_until(lambda: "Shutting down" in output_of(proc), "the shutdown begun")
        gate.touch()
        thread.join(120)
        assert result["r"].text == "in-flight"
        assert proc.wait(60) == 0
    assert logged(log) == ["in-flight"]


def test_replicas_share_the_port_and_a_killed_one_is_restarted(make_project, tmp_path: Path) -> None:
    marker, loading, gate = tmp_path / "first-replicas-answered", tmp_path / "replacement-loading", tmp_path / "gate"
    project = make_project(
        {
            "main.py": f"""
            import os, pathlib, time

            if pathlib.Path({str(marker)!r}).exists():  # the replacement: it loads until the test makes the gate
                pathlib.Path({str(loading)!r}).write_text(str(os.getpid()))
                deadline = time.monotonic() + 120
                while not pathlib.Path({str(gate)!r}).exists() and time.monotonic() < deadline:
                    time.sleep(0.01)

            def handler(request, context):
                return {{'content': str(os.getpid())}}
            """
        }
    )

    def answer(url: str) -> tuple[int, str]:
        with httpx.Client() as client:  # a new connection each time: the kernel spreads them
            response = client.post(url)
        return response.status_code, response.text

    def both_answered(pids: set[int]) -> bool:
        status, text = answer(url)
        if status == 200:  # a replica started with the others answers 503 until it has loaded (as one server does)
            pids.add(int(text))
        return len(pids) == 2

    with server("-p", str(project), "--handler", "main:handler", "--replicas", "2") as (url, proc):
        pids: set[int] = set()
        wait_until(lambda: both_answered(pids), "both replicas answering")
        marker.touch()
        victim, survivor = sorted(pids)
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: loading.exists() and loading.read_text(), "the replacement replica loading")
        replacement = int(loading.read_text())
        assert replacement not in pids
        # While the replacement loads, the port keeps answering, from the survivor only (never "still loading").
        assert [answer(url) for _ in range(10)] == [(200, str(survivor))] * 10
        gate.touch()
        seen: list[tuple[int, str]] = []
        wait_until(lambda: seen.append(answer(url)) or seen[-1] == (200, str(replacement)), "the replacement answering")
        assert {status for status, _ in seen} == {200}
        assert {int(pid) for _, pid in seen} <= {survivor, replacement}, "the killed replica answered"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="SO_REUSEPORT spreads connections on Linux only")
def test_replicas_each_take_a_share_of_connections_opened_together(make_project) -> None:
    """64 clients connect at once, before any is accepted: every replica gets some (one socket each, in the
    port's SO_REUSEPORT group). On one shared socket the first replica to wake took most: 40 of 64, and
    one replica none, in three runs of three."""
    project = make_project(
        {"main.py": "import os\n\ndef handler(request, context):\n    return {'content': str(os.getpid())}\n"}
    )
    with server("-p", str(project), "--handler", "main:handler", "--replicas", "4", "--no-access-log") as (url, _):
        port = int(url.rsplit(":", 1)[1])
        ready: set[str] = set()

        def answered() -> bool:
            with httpx.Client() as client:  # a new connection each time
                response = client.post(url)
            if response.status_code == 200:  # not "still loading"
                ready.add(response.text)
            return len(ready) == 4

        wait_until(answered, "every replica answering")
        clients = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(64)]
        for client in clients:
            client.connect()  # the kernel completes each handshake: all 64 wait to be accepted
        for client in clients:
            client.request("POST", "/", body=b"")
        pids = [client.getresponse().read().decode() for client in clients]
        for client in clients:
            client.close()
    shares = sorted(pids.count(pid) for pid in ready)
    assert set(pids) == ready and shares[0] >= 2, shares  # fewer than 2 of 64: one chance in a million


def test_one_api_calls_another_through_localserve_url(make_project) -> None:
    project = make_project(
        {
            "localserve.yaml": """
            - kind: api
              name: upper
              predictor: {type: python, path: upper.py}
            - kind: api
              name: greet
              predictor: {type: python, path: greet.py}
            """,
            "upper.py": """
            class PythonPredictor:
                def __init__(self, config):
                    pass

                def predict(self, payload):
                    return payload.upper()
            """,
            "greet.py": """
            import os
            import urllib.request


            class PythonPredictor:
                def __init__(self, config):
                    self.url = os.environ["LOCALSERVE_URL"]

                def predict(self, payload):
                    request = urllib.request.Request(
                        f"{self.url}/upper", data=payload["name"].encode(), headers={"Content-Type": "text/plain"}
                    )
                    with urllib.request.urlopen(request, timeout=10) as response:
                        return {"greeting": "hello " + response.read().decode()}
            """,
        }
    )
    with server("-p", str(project)) as (url, _):
        response = httpx.post(f"{url}/greet", json={"name": "ada"}, timeout=20)
        assert response.json() == {"greeting": "hello ADA"}


def test_metrics_and_stats_add_up_across_replicas(make_project) -> None:

    project = make_project({"main.py": "def handler(request, context):\n    return {'content': 'ok'}\n"})
    with server("-p", str(project), "--handler", "main:handler", "--replicas", "2") as (url, proc):
        wait_loaded(proc, [project.name], 2)
        for _ in range(30):
            with httpx.Client() as client:  # new connections: both replicas answer
                assert client.post(url).status_code == 200
        wait_until(lambda: request_counts(url).get("200") == 30, "30 requests counted on /metrics")
        wait_until(lambda: httpx.get(f"{url}/stats").json()[0]["requests"]["2xx"] == 30, "30 requests on /stats")


def request_counts(url: str) -> dict[str | None, float]:
    """``localserve_requests_total`` by status code, from the server's ``/metrics``."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics").text
    return {
        s.labels.get("code"): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "localserve_requests_total"
    }


def test_a_stream_stops_when_its_client_leaves_and_a_failing_stream_is_cut(make_project, tmp_path: Path) -> None:
    log = tmp_path / "stream.log"
    project = make_project(
        {
            "main.py": f"""
            import itertools, time

            def endless():
                try:
                    for i in itertools.count():
                        with open({str(log)!r}, "a") as f:
                            f.write(f"{{i}}\\n")
                        time.sleep(0.01)
                        yield f"chunk {{i}}\\n"
                finally:
                    with open({str(log)!r}, "a") as f:
                        f.write("closed\\n")

            def failing():
                yield "first\\n"
                raise RuntimeError("broken stream")

            def handler(request, context):
                return {{"content": endless() if request.read() == b"endless" else failing()}}
            """
        }
    )
    with server("-p", str(project), "--handler", "main:handler") as (url, _):
        with httpx.Client() as client, client.stream("POST", url, content=b"endless") as response:
            lines = response.iter_lines()
            assert [next(lines) for _ in range(3)] == ["chunk 0", "chunk 1", "chunk 2"]
        wait_until(lambda: "closed" in log.read_text(), "the generator closed")
        produced = log.read_text()
        assert produced.splitlines()[-1] == "closed"
        with pytest.raises(httpx.RemoteProtocolError):  # cut short, not a complete 200
            httpx.post(url, content=b"failing").read()
        assert httpx.get(f"{url}/healthz").status_code == 200
        # Both began as 200s; they are recorded as what happened (the client left; the stream failed).
        wait_until(lambda: request_counts(url) == {"499": 1, "500": 1}, "a 499 and a 500 counted")
        # It stopped: the API's one thread has since served "failing", and the endless stream wrote no more.
        assert log.read_text() == produced


def test_a_204_from_a_handler_has_no_body_on_the_wire(make_project) -> None:
    """A 204 carrying bytes would put them where the next response's status line is expected."""
    import http.client

    project = make_project(
        {
            "main.py": "def handler(request, context):\n"
            "    if request.read() == b'none':\n"
            "        return {'status_code': 204, 'content_type': 'application/json', 'content': {}}\n"
            "    return {'content': 'after'}\n"
        }
    )
    with server("-p", str(project), "--handler", "main:handler") as (url, proc):
        host, port = url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            answers = []
            for body in (b"none", b"next"):  # one keep-alive connection
                connection.request("POST", "/", body=body)
                response = connection.getresponse()
                answers.append((response.status, response.getheader("content-length"), response.read()))
        finally:
            connection.close()
        assert answers == [(204, None, b""), (200, "5", b"after")], output_of(proc)

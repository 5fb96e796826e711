"""``localserve serve --reload`` as a real process: edits reload, bad edits never take it down.

Every step waits for an event (a line of the server's log read from its pipe, an answer seen by
the client), never for a duration.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from localserve.cli import main
from tests.conftest import cli_env, free_port, wait_ready, wait_until

pytestmark = pytest.mark.slow

WATCHING = r"reload: watching "
RELOADED = r"reloaded .* \(generation (\d+)\)"
FAILED = r"reload failed after "


class Served:
    """A ``serve --reload`` process and every line of its log, read from its pipe as they come."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc, self.url = proc, url
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self.changed:
                self.lines.append(raw.decode("utf-8", "replace"))
                self.changed.notify_all()
        with self.changed:
            self.lines.append("<exited>")
            self.changed.notify_all()

    def mark(self) -> int:
        """Where the log is now: ``wait_line`` after it sees only what comes next."""
        with self.changed:
            return len(self.lines)

    def wait_line(self, pattern: str, after: int = 0, timeout: float = 120) -> str:
        """The first line from ``after`` on that matches ``pattern``. ``timeout`` only catches a hang."""
        with self.changed:
            while True:
                for line in self.lines[after:]:
                    if re.search(pattern, line):
                        return line
                    if line == "<exited>":
                        raise AssertionError(f"the server exited: {''.join(self.lines)}")
                after = len(self.lines)
                assert self.changed.wait(timeout), f"no line matching {pattern!r}: {''.join(self.lines)}"

    def log(self) -> str:
        with self.changed:
            return "".join(self.lines)


@contextmanager
def serving(project: Path, *args: str, cwd: Path | None = None, **env: str) -> Iterator[Served]:
    """``serve --reload`` on ``project``; from ``cwd``, the project is given relative to it (as people type it)."""
    port = free_port()
    where = os.path.relpath(project, cwd) if cwd is not None else str(project)
    command = [sys.executable, "-m", "localserve", "serve", "-p", where, "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--reload", "--log-format", "text", *args],
        cwd=cwd,
        env=cli_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    served = Served(proc, f"http://127.0.0.1:{port}")
    try:
        served.wait_line(WATCHING)
        wait_ready(served.url, proc)
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        served.reader.join(10)
        assert proc.stdout is not None
        proc.stdout.close()


def edit(path: Path, text: str | bytes) -> None:
    """Save ``path`` as editors do: a whole new file put in its place (never a half-written one)."""
    staging = path.parent.parent / f".{path.name}.saving"
    staging.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.replace(staging, path)


def handler(version: str) -> str:
    return f'def handler(request, context):\n    return {{"content": "{version}"}}\n'


def readyz(url: str) -> dict:
    response = httpx.get(f"{url}/readyz")
    assert response.status_code == 200, response.text  # the last good version still serves
    return response.json()


def test_a_bad_edit_between_two_good_ones_fails_no_request(make_project, tmp_path: Path) -> None:
    project = make_project({"main.py": handler("v1")})
    main_py = project / "main.py"
    with serving(project, "--handler", "main:handler") as served:
        answers: list[tuple[int, str]] = []
        stop = threading.Event()

        def client() -> None:
            with httpx.Client(timeout=60) as http:
                while not stop.is_set():
                    response = http.post(served.url, content=b"x")
                    answers.append((response.status_code, response.text))

        loop = threading.Thread(target=client)
        loop.start()
        try:
            wait_until(lambda: answers and answers[-1][1] == "v1", "the client answered by v1")
            mark = served.mark()
            edit(main_py, handler("v2"))  # same size as v1, most likely in the same second: no stale bytecode
            assert re.search(RELOADED, served.wait_line(RELOADED, mark)).group(1) == "1"  # type: ignore[union-attr]
            wait_until(lambda: answers[-1][1] == "v2", "the client answered by v2")

            mark = served.mark()
            edit(main_py, 'def handler(request, context):\n    return {"content": "v3"\n')  # a syntax error
            failed = served.wait_line(FAILED, mark)
            assert "SyntaxError" in failed and "still serving the last good version" in failed
            seen = len(answers)
            wait_until(lambda: len(answers) > seen + 2, "the client answered while the edit was broken")
            detail = readyz(served.url)["reload"]
            assert detail["generation"] == 1 and "SyntaxError" in detail["error"] and detail["changed"] == ["main.py"]
            assert "SyntaxError" in httpx.get(f"{served.url}/dashboard/data").json()["reload"]["error"]

            mark = served.mark()
            edit(main_py, handler("v3"))
            assert re.search(RELOADED, served.wait_line(RELOADED, mark)).group(1) == "2"  # type: ignore[union-attr]
            wait_until(lambda: answers[-1][1] == "v3", "the client answered by v3")
        finally:
            stop.set()
            loop.join(60)
        reload = readyz(served.url)["reload"]
        assert reload == {"generation": 2, "error": None, "changed": ["main.py"], "reloading_for_s": None}
        log = served.log()
        assert log.count(FAILED) == 1 and log.count('    return {"content": "v3"\n') == 1  # once, with its traceback
    assert {status for status, _ in answers} == {200}
    versions = [text for _, text in answers]
    assert [v for i, v in enumerate(versions) if i == 0 or versions[i - 1] != v] == ["v1", "v2", "v3"]


GATED = """
import os, time

def handler(request, context):
    print("v1 holds a request")
    deadline = time.monotonic() + 120  # the bound only catches a hang
    while not os.path.exists({gate!r}) and time.monotonic() < deadline:
        time.sleep(0.01)
    return {{"content": "v1"}}
"""


def test_a_request_in_flight_finishes_on_the_old_code(make_project, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    project = make_project({"main.py": GATED.format(gate=str(gate))})
    with serving(project, "--handler", "main:handler") as served:
        held: dict[str, httpx.Response] = {}
        thread = threading.Thread(target=lambda: held.setdefault("r", httpx.post(served.url, timeout=120)))
        mark = served.mark()
        thread.start()
        served.wait_line("v1 holds a request", mark)
        mark = served.mark()
        edit(project / "main.py", handler("v2"))
        served.wait_line(RELOADED, mark)
        assert httpx.post(served.url).text == "v2"  # the old version's only thread is still busy
        assert thread.is_alive()
        gate.touch()
        thread.join(120)
        assert (held["r"].status_code, held["r"].text) == (200, "v1")
        assert httpx.post(served.url).text == "v2"


def test_a_reload_whose_import_blocks_shows_on_readyz_and_ends_when_it_does(make_project, tmp_path: Path) -> None:
    """An import that never returns cannot be ended: /readyz says a reload is under way, the last good version
    answers meanwhile, and the save once it returns is taken."""
    gate = tmp_path / "gate"
    project = make_project({"main.py": handler("v1")})
    blocking = f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.01)\n" + handler("v2")
    with serving(project, "--handler", "main:handler") as served:
        edit(project / "main.py", blocking)
        wait_until(lambda: readyz(served.url)["reload"]["reloading_for_s"] is not None, "a reload under way")
        assert readyz(served.url)["reload"]["changed"] == ["main.py"]
        assert httpx.post(served.url).text == "v1"
        mark = served.mark()
        gate.touch()
        assert re.search(RELOADED, served.wait_line(RELOADED, mark)).group(1) == "1"  # type: ignore[union-attr]
        assert httpx.post(served.url).text == "v2"
        assert readyz(served.url)["reload"]["reloading_for_s"] is None


PREDICTOR = """
class PythonPredictor:
    def __init__(self, config):
        self.greeting = config["greeting"]

    def predict(self, payload):
        return {"greeting": self.greeting}
"""
CONFIG = """
- name: greet
  kind: RealtimeAPI
  predictor:
    type: python
    path: predictor.py
    config:
      greeting: {greeting}
"""


def test_config_edits_and_a_failing_init_keep_the_last_good_version(make_project, tmp_path: Path) -> None:
    project = make_project({"predictor.py": PREDICTOR, "cortex.yaml": CONFIG.format(greeting="hello")})
    # --project and --config relative to the working directory: each reload reads them from inside the project
    config = os.path.relpath(project / "cortex.yaml", tmp_path)
    with serving(project, "--config", config, cwd=tmp_path) as served:

        def greeting() -> str:
            response = httpx.post(f"{served.url}/greet", json={})
            assert response.status_code == 200, response.text
            return str(response.json()["greeting"])

        assert greeting() == "hello"
        mark = served.mark()
        edit(project / "cortex.yaml", CONFIG.format(greeting="hi"))
        assert "reloaded 'greet'" in served.wait_line(RELOADED, mark)
        assert greeting() == "hi"

        mark = served.mark()
        edit(
            project / "predictor.py",
            PREDICTOR.replace('self.greeting = config["greeting"]', 'raise RuntimeError("no")'),
        )
        failed = served.wait_line(FAILED, mark)
        assert "PythonPredictor.__init__ raised RuntimeError: no" in failed
        served.wait_line(r'raise RuntimeError\("no"\)', mark)  # its traceback, with the user's line
        assert greeting() == "hi"
        assert "RuntimeError: no" in readyz(served.url)["reload"]["error"]

        mark = served.mark()
        edit(project / "predictor.py", 'raise RuntimeError("broken at import")\n' + PREDICTOR)  # at import
        failed = served.wait_line(FAILED, mark)
        assert "broken at import" in failed and "still serving the last good version" in failed
        served.wait_line(r'raise RuntimeError\("broken at import"\)', mark)  # its traceback, with the user's line
        assert greeting() == "hi"
        assert "broken at import" in readyz(served.url)["reload"]["error"]

        mark = served.mark()
        edit(project / "cortex.yaml", CONFIG.format(greeting="hi") + "  bogus_key: 1\n")  # a broken config
        assert "bogus_key" in served.wait_line(FAILED, mark)
        assert greeting() == "hi"
        assert "bogus_key" in readyz(served.url)["reload"]["error"]

        mark = served.mark()
        edit(project / "predictor.py", PREDICTOR)
        served.wait_line(FAILED, mark)  # the config is still broken
        mark = served.mark()
        edit(project / "cortex.yaml", CONFIG.format(greeting="hello again"))
        served.wait_line(RELOADED, mark)
        assert greeting() == "hello again"
        assert readyz(served.url)["reload"]["error"] is None


def wheel(folder: Path, version: str, value: int) -> Path:
    """A real (tiny) pure-Python wheel of ``lsreload``, so installing it needs no index."""
    path = folder / f"lsreload-{version}-py3-none-any.whl"
    info = f"lsreload-{version}.dist-info"
    files = {
        "lsreload/__init__.py": f"VALUE = {value}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: lsreload\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


ENV_HANDLER = """
import os
import lsreload

def handler(request, context):
    return {"content": f"{os.environ['GREETING']} {lsreload.VALUE}"}
"""


def test_requirements_and_env_edits_reload(make_project, tmp_path: Path) -> None:
    first, second = wheel(tmp_path, "1.0", 1), wheel(tmp_path, "2.0", 2)
    project = make_project({"main.py": ENV_HANDLER, "requirements.txt": f"{first}\n", ".env": "GREETING=hello\n"})
    with serving(project, "--handler", "main:handler", PIP_NO_INDEX="1") as served:
        assert httpx.post(served.url).text == "hello 1"
        mark = served.mark()
        edit(project / "requirements.txt", f"{second}\n")
        served.wait_line(RELOADED, mark)
        assert "Successfully installed lsreload-2.0" in served.log()
        assert httpx.post(served.url).text == "hello 2"
        mark = served.mark()
        edit(project / ".env", "GREETING=bonjour\n")
        served.wait_line(RELOADED, mark)
        assert httpx.post(served.url).text == "bonjour 2"


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_reload_refuses_replicas(make_project, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    project = make_project({"main.py": handler("v1")})
    args = ["serve", "-p", str(project), "--handler", "main:handler", "--replicas", "2"]
    if how == "flag":
        args.append("--reload")
    else:
        monkeypatch.setenv("LOCALSERVE_RELOAD", "1")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "--reload serves from one process, which it reloads in place; drop --replicas 2." in result.output


MODEL_CONFIG = """
- name: linear
  kind: api
  model: model.onnx
  request_handler: handler.py
"""
LOGITS_HANDLER = """
def pre_inference(sample, metadata):
    return sample["x"]

def post_inference(prediction, metadata):
    return {"logits": prediction[1].tolist()}
"""


def test_a_model_file_edit_reloads_its_api_and_an_ignored_file_reloads_nothing(make_project, tmp_path: Path) -> None:
    from tests.models import onnx_linear

    models = tmp_path / "models"
    models.mkdir()
    first = onnx_linear(models / "first.onnx", bias=[0.0, 0.0, 0.0])
    second = onnx_linear(models / "second.onnx", bias=[10.0, 20.0, 30.0])
    project = make_project(
        {
            "cortex.yaml": MODEL_CONFIG,
            "handler.py": LOGITS_HANDLER,
            "model.onnx": first.read_bytes(),
            ".cortexignore": "notes/\n",
            "notes/todo.txt": "v1",
        }
    )
    x = [[1.0, 0.0, 0.0, 0.0]]  # row 0 of W: (0 - j) / 4 = [0, -0.25, -0.5]
    with serving(project) as served:

        def logits() -> list[float]:
            response = httpx.post(f"{served.url}/linear", json={"x": x})
            assert response.status_code == 200, response.text
            return [round(v, 4) for v in response.json()["logits"][0]]

        assert logits() == [0.0, -0.25, -0.5]
        mark = served.mark()
        (project / "notes/todo.txt").write_text("v2")  # ignored (.cortexignore): no reload of its own
        edit(project / "model.onnx", second.read_bytes())
        line = served.wait_line(RELOADED, mark)
        # generation 1, after the model alone: the ignored file was neither a reload nor part of this one
        assert re.search(r"reloaded 'linear' in [\d.]+ s after model\.onnx changed \(generation 1\)", line), line
        assert logits() == [10.0, 19.75, 29.5]

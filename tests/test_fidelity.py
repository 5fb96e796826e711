"""The platform documents' own code and commands run unchanged (the code is in tests/seeds/, copied from the seeds).

The documents' commands are run as written, as real processes; ``serve`` listens on a real port."""

from __future__ import annotations

import io
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from localserve.config import load_config
from localserve.errors import ConfigError
from localserve.messages.request import Request
from tests.cli.test_cli import in_process
from tests.conftest import EXAMPLES, cli_env, free_port, wait_ready

SEEDS = Path(__file__).parent / "seeds"
IRIS_SAMPLE = {"sepal_length": 5.2, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3}


def localserve(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "localserve", *args],
        cwd=cwd,
        capture_output=True,
        env=cli_env(**env),
        timeout=180,
        check=False,
    )


def seed(name: str) -> str:
    return (SEEDS / name).read_text()


def json_lines(stderr: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]


# -- 1. the ABEJA command line --------------------------------------------------------------------


def test_seed_004_run_local_command_line_writes_the_flipped_jpeg(tmp_path: Path) -> None:
    project = tmp_path / "image_flip"
    shutil.copytree(EXAMPLES / "image_flip", project)
    # $ abeja model run-local -h main:handler -i abeja/all-cpu:19.04 --input cat.jpg --quiet > flipped_cat.jpg
    done = in_process(
        "run", "-h", "main:handler", "-i", "abeja/all-cpu:19.04", "--input", "cat.jpg", "--quiet", cwd=project
    )
    assert done.returncode == 0, done.stderr
    original = np.asarray(Image.open(project / "cat.jpg")).astype(int)
    flipped = np.asarray(Image.open(io.BytesIO(done.stdout))).astype(int)
    assert np.abs(flipped - original[:, ::-1]).mean() < 3
    # Without --quiet the log says that the image is not used.
    done = in_process("run", "-h", "main:handler", "--image", "abeja/all-cpu:19.04", "--input", "cat.jpg", cwd=project)
    assert done.returncode == 0, done.stderr
    assert (
        b"--image abeja/all-cpu:19.04: localserve runs the handler in the current Python environment, not in that image"
        in done.stderr
    )
    assert localserve("run", "--help").stdout.startswith(b"Usage: python -m localserve run [OPTIONS]")


# -- 2. the ABEJA request -------------------------------------------------------------------------

MULTIPART = (
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="file1"\r\n'
    b"Content-Type: application/json\r\n\r\n"
    b'{"foo": "bar"}\r\n'
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="image"; filename="cat.jpg"\r\n'
    b"Content-Type: image/jpeg\r\n\r\n"
    b"jpeg\r\n"
    b"--XyZ--\r\n"
)


def test_seed_004_multipart_request_is_a_dict_with_the_bare_media_type(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "main.py").write_text(seed("seed004_multipart.py"))
    (project / "body.bin").write_bytes(MULTIPART)
    done = in_process(
        "run", "-h", "main:handler", "--input", "body.bin", "--content-type", "multipart/form-data; boundary=XyZ",
        "--no-install", "-e", "TRAINING_JOB_ID:42", cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "is_dict": True,
        "http_method": "POST",
        "content_type": "multipart/form-data",
        "parts": [["application/json", "file1", None, '{"foo": "bar"}'], ["image/jpeg", "image", "cat.jpg", "jpeg"]],
        "env": {"ABEJA_ORGANIZATION_ID": "0000000000000", "TRAINING_JOB_ID": "42", "HANDLER": "main:handler"},
    }


SECRET = "Bearer s3cr3t-t0ken"
PROXY_SECRET = "Basic cHJveHk6cGFzcw=="


def _every_view(request: Request) -> list[str]:
    """repr of every public attribute of the request (methods called when they need no argument)."""
    seen = []
    for name in dir(request):
        if name.startswith("_") or name in ("clear", "popitem"):  # they empty the dict
            continue
        value = getattr(request, name)
        if callable(value):
            try:
                value = value()
            except TypeError:  # needs an argument: header(), seek(), pop() ...
                continue
        seen.append(f"{name}={value!r}")
    seen.append(repr(dict(request)))
    seen.append(repr(request["http_headers"].get_all("authorization")))
    seen += [repr(h) for h in request["headers"]]
    return seen


@pytest.mark.parametrize("name", [b"authorization", b"Authorization"])
def test_authorization_is_in_no_view_of_the_request(name: bytes) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (name, SECRET.encode()),
        (b"proxy-authorization", PROXY_SECRET.encode()),
        (b"x-kept", b"yes"),
    ]
    request = Request("POST", headers, b"{}", query_string=b"debug=true")
    assert request.header(b"authorization") is None
    assert request.header(b"proxy-authorization") is None
    assert request.header(b"x-kept") == "yes"
    assert request.raw_headers == [(b"content-type", b"application/json"), (b"x-kept", b"yes")]
    views = _every_view(Request("POST", headers, b"{}", query_string=b"debug=true"))
    assert any("x-kept" in view for view in views)
    leaks = [view for view in views if "s3cr3t" in view or "cHJveHk" in view or "uthorization" in view]
    assert leaks == []


def test_authorization_never_reaches_a_handler_or_the_debug_log(serve, make_project, caplog) -> None:
    project = make_project(
        {
            "main.py": "def handler(request, context):\n    return {'content': repr(vars(request)) + repr(request.raw_headers)}\n"
        }
    )
    with caplog.at_level(logging.DEBUG, logger="localserve"), serve(project, handler="main:handler") as client:
        response = client.post("/?debug=true", headers={"Authorization": SECRET, "Proxy-Authorization": PROXY_SECRET})
    assert response.status_code == 200
    assert "s3cr3t" not in response.text and "cHJveHk" not in response.text
    assert "s3cr3t" not in caplog.text and "authorization" not in caplog.text.lower()
    assert "debug: request POST" in caplog.text


# -- 3. both Cortex config generations ------------------------------------------------------------

BOTH_GENERATIONS = """\
- kind: api
  name: iris
  model: iris.onnx
  request_handler: handler.py
- name: text-generator
  kind: RealtimeAPI
  predictor:
    type: python
    path: generator.py
    config: {greeting: hi}
    python_path: lib
    env: {MODE: local}
    log_level: debug
    server_side_batching: {max_batch_size: 8, batch_interval: 10ms}
    processes_per_replica: 2
    threads_per_process: 3
  compute: {cpu: 1, mem: 1Gi}
  autoscaling: {min_replicas: 1, max_replicas: 5, init_replicas: 2, target_replica_concurrency: 4, max_replica_concurrency: 16, window: 60s}
  networking: {endpoint: /gen}
- name: classifier
  kind: AsyncAPI
  predictor:
    type: tensorflow
    path: predictor.py
    models: {path: s3://bucket/model/, signature_key: serving_default}
"""


def test_both_config_generations_in_one_file(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text(BOTH_GENERATIONS)
    iris, generator, classifier = load_config(tmp_path).apis
    assert (iris.api_kind, iris.is_async, iris.model_format, iris.processes) == ("api", False, "onnx", 1)
    assert generator.api_kind == "RealtimeAPI" and not generator.is_async
    assert generator.predictor is not None and generator.predictor.config == {"greeting": "hi"}
    assert (generator.predictor.python_path, generator.predictor.env, generator.predictor.log_level) == (
        "lib",
        {"MODE": "local"},
        "debug",
    )
    assert generator.batching is not None
    assert (generator.batching.max_batch_size, generator.batching.batch_interval) == (8, 0.01)
    assert (generator.threads_per_process, generator.processes_per_replica) == (3, 2)
    assert (generator.compute.min_replicas, generator.compute.max_replicas, generator.compute.init_replicas) == (
        1,
        5,
        2,
    )
    assert generator.processes == 4  # init_replicas x processes_per_replica
    assert (generator.max_queue, generator.max_replica_concurrency, generator.target_replica_concurrency) == (
        16,
        16,
        4.0,
    )
    assert classifier.is_async and classifier.api_kind == "AsyncAPI"
    assert classifier.predictor is not None and classifier.predictor.model_path == "s3://bucket/model/"
    assert (classifier.model_format, classifier.tf_signature_key) == ("tensorflow", "serving_default")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- name: a\n  kind: RealtimeAPI\n  predictor: {type: python, path: p.py}\n  autoscaling: {max_replica_concurency: 3}\n",
            "cortex.yaml: api 'a': unknown key 'max_replica_concurency' in 'autoscaling'. Did you mean 'max_replica_concurrency'?",
        ),
        (
            "- name: a\n  kind: RealtimeAPI\n  predictor: {type: python, path: p.py, server_side_batchin: {}}\n",
            "cortex.yaml: api 'a': unknown key 'server_side_batchin' in 'predictor'. Did you mean 'server_side_batching'?",
        ),
        (
            "- name: a\n  kind: RealtimeApi\n  predictor: {type: python, path: p.py}\n",
            "cortex.yaml: api 'a': invalid value 'RealtimeApi' for 'kind'; expected one of 'api', 'RealtimeAPI', 'AsyncAPI', 'TrafficSplitter'. Did you mean 'RealtimeAPI'?",
        ),
        (
            "- name: a\n  kind: RealtimeAPI\n  model: m.onnx\n  predictor: {type: python, path: p.py}\n",
            "cortex.yaml: api 'a': 'model' belongs to 'kind: api' (Cortex 0.8-0.11); with 'kind: RealtimeAPI' use 'models: {path: ...}' in 'predictor'.",
        ),
        (
            "- name: a\n  kind: RealtimeAPI\n  predictor:\n    type: onnx\n    path: p.py\n    models:\n      paths: [{name: x, path: x.onnx}]\n      cache_size: 1\n",
            "cortex.yaml: api 'a': 'cache_size' and 'disk_cache_size' in 'models' go together (Cortex's model cache); set 'disk_cache_size' too, or neither.",
        ),
        (
            "- kind: api\n  name: a\n  model: m.onnx\n  compute:\n    cpu: 1\n    inf: 1\n",
            "cortex.yaml, line 6: api 'a': 'inf: 1' in 'compute' asks for AWS Inferentia chips, which no local machine has; remove 'inf' (the model runs on CPU, or on a GPU with 'gpu: 1').",
        ),
        (
            "- kind: api\n  name: a\n  model: model.bin\n",
            "cortex.yaml, line 3: api 'a': cannot tell the format of the model 'model.bin' from its name ('.onnx' is ONNX; a folder or a '.zip' is a TensorFlow SavedModel); set 'model_format: onnx' or 'model_format: tensorflow'.",
        ),
        (
            "- kind: api\n  name: a\n  model: m.onnx\n  autoscaling: {min_replicas: 1}\n",
            "cortex.yaml: api 'a': 'autoscaling' belongs to the Cortex 0.25+ generation of the config (kind: RealtimeAPI or AsyncAPI); with 'kind: api' use 'compute' for replicas, or write 'kind: RealtimeAPI'.",
        ),
    ],
)
def test_config_errors_name_the_key_and_the_fix(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "cortex.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("https://bucket.s3.amazonaws.com/iris.onnx?X-Amz-Signature=abc&X-Amz-Expires=60", "onnx"),
        ("s3://bucket/models/iris.onnx", "onnx"),
        ("s3://bucket/models/iris/", "tensorflow"),
        ("models/iris_savedmodel", "tensorflow"),
        ("https://example.com/model.zip?token=1", "tensorflow"),
    ],
)
def test_model_format_is_read_from_the_path_without_the_query(tmp_path: Path, model: str, expected: str) -> None:
    (tmp_path / "cortex.yaml").write_text(f"- kind: api\n  name: a\n  model: '{model}'\n")
    assert load_config(tmp_path).apis[0].model_format == expected


# -- 4-9 under `run`: /mnt/project, api-<name>, the logger, run --api X, the packaged view, dependencies.sh ---


def cortex_project(root: Path) -> Path:
    root.mkdir()
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", root / "iris.onnx")
    (root / "handler.py").write_text(seed("seed000_handler.py"))
    (root / "config.json").write_text(json.dumps({"labels": "from /mnt/project"}))
    (root / "caller.py").write_text(seed("seed001_caller.py"))
    (root / "generator.py").write_text(seed("seed001_logger.py"))
    (root / "broken.py").write_text("raise RuntimeError('this API is broken')\n")
    (root / "cortex.yaml").write_text(
        "- kind: api\n  name: iris\n  model: iris.onnx\n  request_handler: handler.py\n"
        "- name: caller\n  kind: RealtimeAPI\n  predictor: {type: python, path: caller.py}\n"
        "- name: text-generator\n  kind: RealtimeAPI\n  predictor: {type: python, path: generator.py}\n"
        "- name: broken\n  kind: RealtimeAPI\n  predictor: {type: python, path: broken.py}\n"
    )
    (root / "sample.json").write_text(json.dumps(IRIS_SAMPLE))
    return root


@pytest.mark.slow
def test_run_seed_000_reads_mnt_project_and_run_api_loads_only_that_api(tmp_path: Path) -> None:
    project = cortex_project(tmp_path / "proj")
    done = in_process("run", "--api", "iris", "--input", "sample.json", "--log-format", "json", cwd=project)
    assert done.returncode == 0, done.stderr  # the broken API is never loaded
    assert json.loads(done.stdout)["class_label"] == "iris-setosa"
    messages = [line["message"] for line in json_lines(done.stderr)]
    assert (
        "{'labels': 'from /mnt/project'}" not in messages
    )  # Cortex 0.8-0.9's example reads it at import; pre_inference prints nothing
    assert not any("broken" in m for m in messages)
    mnt = [m for m in messages if m.startswith("/mnt/project:")]
    assert (
        mnt
        in (
            ["/mnt/project: the project is mounted there in a private mount namespace"],
            [m for m in mnt if "redirecting Python's file functions" in m],
        )
        and mnt
    )


@pytest.mark.slow
def test_run_seed_001_calls_another_api_by_its_cortex_host_name(tmp_path: Path) -> None:
    project = cortex_project(tmp_path / "proj")
    (project / "payload.json").write_text("{}")
    done = in_process("run", "--api", "caller", "--input", "payload.json", "--log-format", "json", cwd=project)
    assert done.returncode == 0, done.stderr
    received = [line for line in json_lines(done.stderr) if line["message"] == "received payload"]
    assert [(line["payload"], line["levelname"]) for line in received] == [({"text": "machine learning is"}, "INFO")]
    assert {"asctime", "process", "request_id"} <= set(received[0])


@pytest.mark.slow
def test_serve_seed_000_and_001_on_any_port(tmp_path: Path) -> None:
    project = cortex_project(tmp_path / "proj")
    (project / "cortex.yaml").write_text("\n".join((project / "cortex.yaml").read_text().splitlines()[:-3]) + "\n")
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "localserve", "serve", "--port", str(port), "--log-format", "json"],
        cwd=project,
        env=cli_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        iris = httpx.post(f"{url}/iris", json=IRIS_SAMPLE, timeout=30)
        assert iris.status_code == 200 and iris.json()["class_label"] == "iris-setosa"
        assert httpx.post(f"{url}/caller", json={}, timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    lines = json_lines((tmp_path / "server.log").read_bytes())
    received = [line["payload"] for line in lines if line.get("message") == "received payload"]
    assert received == [{"text": "machine learning is"}]
    routed = [line for line in lines if line.get("api") == "text-generator" and line.get("status") == 200]
    assert [line["path"] for line in routed] == ["/text-generator/predict"]


def test_api_host_names_resolve_only_for_known_apis() -> None:
    import socket

    from localserve.project.compat import hosts

    previous = socket.getaddrinfo
    try:
        hosts.install_api_hosts(lambda name: 45678 if name == "known" else None)
        assert socket.getaddrinfo("api-known", 8888, type=socket.SOCK_STREAM)[0][4] == ("127.0.0.1", 45678)
        assert socket.getaddrinfo("api-known", 9999, type=socket.SOCK_STREAM)[0][4] == ("127.0.0.1", 9999)
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("api-unknown.invalid", 8888)
        assert socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)[0][4][1] == 80
    finally:
        socket.getaddrinfo = previous  # type: ignore[assignment]
    assert hosts.api_name_of("api-text-generator:8888") == "text-generator"
    assert hosts.api_name_of("api-x.example.com") is None
    assert hosts.api_name_of("text-generator") is None


def test_mnt_project_redirect_fallback(tmp_path: Path) -> None:
    """Where no mount namespace is allowed, Python's file functions see the project at /mnt/project."""
    (tmp_path / "config.json").write_text('{"k": 1}')
    probe = (
        "import json, os, pathlib\n"
        "from localserve.project.compat.mnt import install_redirect\n"
        f"install_redirect(pathlib.Path({str(tmp_path)!r}))\n"
        "with open('/mnt/project/config.json', 'r') as f: print(json.load(f))\n"
        "print(os.path.exists('/mnt/project/config.json'), pathlib.Path('/mnt/project/config.json').read_text())\n"
        "print(sorted(os.listdir('/mnt/project')), os.path.exists('/mnt/projectx'))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=cli_env(), timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == ["{'k': 1}", 'True {"k": 1}', "['config.json'] False"]


@pytest.mark.slow
def test_packaged_view_dependencies_sh_and_raw_project(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "predictor.py").write_text(seed("seed001_values.py"))
    (project / "values.json").write_text('{"v": 1}')
    (project / "cortex.yaml").write_text(
        "- name: values\n  kind: RealtimeAPI\n  predictor: {type: python, path: predictor.py}\n"
    )
    (project / ".cortexignore").write_text("# not packaged\nvalues.json\n")
    (project / "dependencies.sh").write_text('echo "system deps ran" > "$MARKER"\n')
    marker = tmp_path / "marker"
    done = in_process("run", "--no-install", cwd=project, MARKER=str(marker))
    assert done.returncode == 1
    assert b"FileNotFoundError: [Errno 2] No such file or directory: 'values.json'" in done.stderr
    assert f"{project / 'dependencies.sh'} is not run: it installs system packages".encode() in done.stderr
    assert not marker.exists()
    done = in_process("run", "--no-install", "--raw-project", "--system-deps", cwd=project, MARKER=str(marker))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"v": 1}
    assert marker.read_text() == "system deps ran\n"
    check = localserve("check", cwd=project)
    assert check.returncode == 0, check.stderr
    assert check.stdout.decode().splitlines() == [
        "ok  values: PythonPredictor in predictor.py",
        "not packaged (user code cannot read them; --raw-project to allow): .cortexignore, cortex.yaml, values.json",
        "dependencies.sh: runs at start only with --system-deps (the Docker image passes it)",
        "cortex.yaml: 1 API(s) valid.",
    ]


def test_check_names_the_package_of_a_missing_module(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "main.py").write_text("import lsfidelity_missing_zz\n\ndef handler(request, context):\n    pass\n")
    done = localserve("check", "--handler", "main:handler", cwd=project)
    assert done.returncode == 1
    assert done.stderr.decode().strip() == (
        "Error: command line: api 'proj': main imports 'lsfidelity_missing_zz', which is not installed; "
        "add the package that provides 'lsfidelity_missing_zz' to requirements.txt (check its name on PyPI first)."
    )
    from localserve.checks.probe import package_for

    assert (package_for("cv2"), package_for("PIL.Image"), package_for("dill")) == ("opencv-python", "Pillow", "dill")


def test_asyncapi_runs_its_job_at_once_with_run(tmp_path: Path) -> None:
    (tmp_path / "predictor.py").write_text(
        "class PythonPredictor:\n    def predict(self, payload, request_id):\n        return {'id': request_id}\n"
    )
    (tmp_path / "cortex.yaml").write_text(
        "- name: jobs\n  kind: AsyncAPI\n  predictor: {type: python, path: predictor.py}\n"
    )
    done = in_process("run", "--no-install", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert list(json.loads(done.stdout)) == ["id"]  # the job's id, given to predict as request_id


# -- 10. a TensorFlowPredictor on a model with several signatures ---------------------------------


@pytest.mark.slow
def test_tensorflow_predictor_with_several_signatures_loads_without_a_key(serve, tmp_path: Path) -> None:
    from tests.models import linear_reference, tf_savedmodel

    project = tmp_path / "proj"
    project.mkdir()
    tf_savedmodel(project / "model", {"a": "linear", "b": "linear"})
    (project / "predictor.py").write_text(seed("seed001_tensorflow.py"))
    (project / "cortex.yaml").write_text(
        "- name: tf\n  kind: RealtimeAPI\n  predictor:\n    type: tensorflow\n    path: predictor.py\n"
        "    models: {path: model}\n"
    )
    x = [[1.0, 2.0, 3.0, 4.0]]
    with serve(project) as client:
        response = client.post("/tf", json={"x": x})
    assert response.status_code == 200, response.text
    expected = linear_reference(x)[0].tolist()
    np.testing.assert_allclose(response.json()["a"], expected, rtol=1e-6)
    np.testing.assert_allclose(response.json()["b"], expected, rtol=1e-6)


# -- libraries where they are right ----------------------------------------------------------------


def test_dotenv_is_read_as_the_shell_would(tmp_path: Path) -> None:
    from localserve.project.directory import read_dotenv

    env = tmp_path / ".env"
    env.write_text('A=1 # note\nB="two words"\nexport C=3\n# comment\n\nD=${C}4\n')
    assert read_dotenv(env) == {"A": "1", "B": "two words", "C": "3", "D": "34"}
    env.write_text("A=1\nnot a variable line\n")
    with pytest.raises(ConfigError) as info:
        read_dotenv(env)
    assert str(info.value) == ".env, line 2: expected VARIABLE=value, got 'not a variable line'."


def test_a_bad_ignore_pattern_names_the_file_and_line(tmp_path: Path) -> None:
    from localserve.project.ignore import ignored

    (tmp_path / ".cortexignore").write_text("[]]\n# fine so far\nlogs\\\n")
    with pytest.raises(ConfigError) as info:
        ignored(tmp_path, None)
    assert str(info.value) == (
        ".cortexignore, line 3: invalid pattern 'logs\\\\' (Invalid git pattern: 'logs\\\\'); expected gitignore "
        "syntax: *, ?, [a-z], ** and a trailing / for folders, \\ to escape a character."
    )
    (tmp_path / ".cortexignore").write_text("build/\n[z-a]\n")  # a range backwards: re's error, named
    with pytest.raises(ConfigError) as info:
        ignored(tmp_path, None)
    assert str(info.value) == (
        ".cortexignore, line 2: invalid pattern '[z-a]' (bad character range z-a); expected gitignore "
        "syntax: *, ?, [a-z], ** and a trailing / for folders, \\ to escape a character."
    )
    (tmp_path / ".cortexignore").write_text("[]]\nbuild/\n!build/keep.txt\n")
    (tmp_path / "build").mkdir()
    is_ignored = ignored(tmp_path, None)
    assert (is_ignored(Path("]")), is_ignored(Path("build/keep.txt")), is_ignored(Path("a.py"))) == (True, True, False)


def test_pipfile_extras_and_markers(tmp_path: Path) -> None:
    from localserve.errors import ProjectError
    from localserve.project.directory import pipfile_requirements

    pipfile = tmp_path / "Pipfile"
    pipfile.write_text(
        "[packages]\n"
        'Pillow = "==6.0.0"\n'
        'requests = {version = ">=2", extras = ["socks", "security"]}\n'
        'pywinusb = {version = "*", sys_platform = "== \'win32\'"}\n'
        'numpy = {version = "<2", markers = "python_version < \'3.12\'", platform_machine = "== \'x86_64\'"}\n'
    )
    assert pipfile_requirements(pipfile) == [
        "Pillow==6.0.0",
        "requests[socks,security]>=2",
        "pywinusb ; sys_platform == 'win32'",
        "numpy<2 ; (python_version < '3.12') and (platform_machine == 'x86_64')",
    ]
    pipfile.write_text('[packages]\nprivate = {version = "*", index = "internal"}\n')
    with pytest.raises(ProjectError) as info:
        pipfile_requirements(pipfile)
    assert str(info.value) == (
        "Pipfile: [packages] private: localserve cannot install a package with 'index' (packages from another "
        "[[source]] are not supported; install it with pip yourself); the keys it understands: version, extras, "
        "markers, path, editable, git, ref, file and PEP 508 marker names."
    )

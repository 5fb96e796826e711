"""``localserve run`` (in this process: the Project context undoes what it does) / ``check`` / ``export`` / ``--help``.

Real processes only where the behaviour is the process's: what a fresh Python imports (``--help``, ABEJA
handlers: no heavy runtime), ``serve`` bound to the port and host of the environment, and ``run`` exiting
past a model still running."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from PIL import Image

from localserve.cli import main
from tests.conftest import EXAMPLES, cli_env
from tests.models import onnx_linear, onnx_mlp


def localserve(
    *args: str, cwd: Path | None = None, stdin: bytes | None = None, **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "localserve", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=cli_env(**env),
        timeout=120,
        check=False,
    )


def in_process(
    *args: str, cwd: Path | None = None, stdin: bytes | None = None, **env: str
) -> subprocess.CompletedProcess[bytes]:
    """``localserve`` run by click's CliRunner in this process, answering like ``localserve()``'s process."""
    before = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args), input=stdin, env=env, catch_exceptions=False)
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout_bytes, result.stderr_bytes)


def cli(*args: str) -> Result:
    """A command that needs no process of its own (it enters no project), run in this one."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_run_json_tax_prints_the_body() -> None:
    done = in_process(
        "run", "--handler", "main:handler", "--input", "request.json", "--quiet", cwd=EXAMPLES / "json_tax"
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b'{"total":108.0}', b"")


def test_run_error_status_exits_1_with_status_and_body_on_stderr() -> None:
    done = in_process("run", "--handler", "main:handler", "--input", "bad_request.json", cwd=EXAMPLES / "json_tax")
    assert done.returncode == 1
    assert done.stdout == b""
    assert b'Error: the handler answered 400:\n{"message":"total_without_tax is need"}' in done.stderr


def test_run_exits_1_when_a_streamed_body_fails(make_project) -> None:
    """A generator that raises (or calls sys.exit) mid-stream: the body is cut short, so run fails."""
    project = make_project(
        {
            "main.py": "import sys\n"
            "def chunks(how):\n"
            "    yield 'a'\n"
            "    if how == b'exit':\n"
            "        sys.exit(2)\n"
            "    raise RuntimeError('broken stream')\n"
            "def handler(request, context):\n"
            "    return {'content': chunks(request.read())}\n",
            "raise.txt": "raise",
            "exit.txt": "exit",
        }
    )
    for name in ("raise.txt", "exit.txt"):
        done = in_process("run", "--handler", "main:handler", "--input", name, cwd=project)
        assert (done.returncode, done.stdout) == (1, b""), done.stderr
        assert (
            b'Error: the handler answered 500:\n{"error": "The response was cut short after 1 bytes of its body: the '
            b'stream failed (see the log)."}' in done.stderr
        )


def test_run_image_flip_writes_the_mirrored_jpeg(tmp_path: Path) -> None:
    project = EXAMPLES / "image_flip"
    done = in_process(
        "run",
        "--project",
        str(project),
        "--handler",
        "main:handler",
        "--input",
        str(project / "cat.jpg"),
        "--quiet",
        "--no-install",
    )
    assert done.returncode == 0, done.stderr
    original = np.asarray(Image.open(project / "cat.jpg")).astype(int)
    flipped = np.asarray(Image.open(io.BytesIO(done.stdout))).astype(int)
    assert np.abs(flipped - original[:, ::-1]).mean() < 3
    out = tmp_path / "out.jpg"
    done = in_process(
        "run",
        "-p",
        str(project),
        "--handler",
        "main:handler",
        "--input",
        str(project / "cat.jpg"),
        "--no-install",
        "--output",
        str(out),
    )
    assert done.returncode == 0 and done.stdout == b""
    assert out.read_bytes()[:2] == b"\xff\xd8"


ECHO = """
import json, os

def handler(request, context):
    print("printed by the handler")
    return {
        "content_type": "application/json",
        "content": {
            "method": request["http_method"],
            "content_type": request["content_type"],
            "body": request.read().decode(),
            "x": request["http_headers"]["X-Thing"],
            "context": context,
            "env": {k: os.environ.get(k) for k in ("FROM_DOTENV", "FROM_FLAG", "HANDLER", "ABEJA_TRAINING_RESULT_DIR", "OVERRIDE")},
            "cwd": os.getcwd(),
        },
    }
"""


def test_run_flags_env_and_project(make_project) -> None:
    project = make_project({"main.py": ECHO, ".env": "FROM_DOTENV=dot\nOVERRIDE=dotenv\n# comment\n"})
    done = in_process(
        "run",
        "-p",
        str(project),
        "--handler",
        "main:handler",
        "--input",
        "-",
        "--content-type",
        "text/plain",
        "-H",
        "X-Thing: hello",
        "-e",
        "FROM_FLAG:a:b",
        "-e",
        "OVERRIDE:flag",
        "--context",
        '{"k": 1}',
        stdin=b"from stdin",
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["method"] == "POST" and seen["content_type"] == "text/plain" and seen["body"] == "from stdin"
    assert seen["x"] == "hello" and seen["context"] == {"k": 1}
    assert seen["env"] == {
        "FROM_DOTENV": "dot",
        "FROM_FLAG": "a:b",
        "HANDLER": "main:handler",
        "ABEJA_TRAINING_RESULT_DIR": str(project / "abejainc_training_result"),
        "OVERRIDE": "flag",
    }
    assert seen["cwd"] == str(project)
    assert b"printed by the handler" in done.stderr and b"printed by the handler" not in done.stdout
    quiet = in_process(
        "run", "-p", str(project), "--handler", "main:handler", "--method", "GET", "--query", "a=1", "-q"
    )
    assert json.loads(quiet.stdout)["body"] == "a=1" and quiet.stderr == b""


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        (
            {},
            ["--handler", "main"],
            "Error: localserve.yaml: api 'proj': invalid value 'main' for 'handler'; it must look like \"<module>:<function>\", e.g. \"main:handler\".",
        ),
        (
            {},
            ["--handler", "missing:handler"],
            'Error: Could not import module "missing" for handler "missing:handler": no missing.py (or package) in the project directory',
        ),
        (
            {"main.py": "import not_installed_pkg\n"},
            ["--handler", "main:handler"],
            "Error: Importing 'main' failed (main.py, line 1): ModuleNotFoundError: No module named 'not_installed_pkg'",
        ),
        (
            {"main.py": "import sys\nsys.exit(2)\n"},
            ["--handler", "main:handler"],
            "Error: Importing 'main' failed (main.py, line 2): SystemExit: 2",
        ),
        (
            {"main.py": "def handle(request, context):\n    pass\n"},
            ["--handler", "main:handler"],
            'Error: Handler "main:handler": module "main" has no attribute "handler". Did you mean "handle"?',
        ),
        (
            {"main.py": "def handler(request):\n    pass\n"},
            ["--handler", "main:handler"],
            'Error: Handler "main:handler" must accept 2 parameters (request, context); it accepts 1.',
        ),
        (
            {"main.py": ""},
            ["--handler", "main:handler", "-e", "1BAD:x"],
            "Error: Invalid --environment '1BAD:x': the key '1BAD' must match [A-Za-z_][A-Za-z0-9_]* (letters, digits and underscores, not starting with a digit).",
        ),
        (
            {"main.py": ""},
            ["--handler", "main:handler", "--context", "{bad"],
            "Error: Invalid --context '{bad': not JSON",
        ),
    ],
)
def test_load_errors_are_precise(make_project, files, args, message) -> None:
    project = make_project(files)
    done = in_process("run", "-p", str(project), *args)
    assert done.returncode == 1
    stderr = done.stderr.decode().replace("command line", "localserve.yaml")
    assert message in stderr, stderr
    assert stderr.count(message.removeprefix("Error: ")) == 1, stderr  # said once, not logged before it too


LSDEMO_HANDLER = "import lsdemo\n\ndef handler(request, context):\n    return {'content': str(lsdemo.VALUE)}\n"


def run_offline(project: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`localserve run` of main:handler with its own cache and no package index (installs must be local), in process."""
    return in_process(
        "run", "-p", str(project), "--handler", "main:handler", *args, LOCALSERVE_CACHE_DIR=str(cache), PIP_NO_INDEX="1"
    )


def _wheel(tmp_path: Path) -> Path:
    """A real (tiny) wheel built by hand, so installing it needs no index."""
    wheel = tmp_path / "lsdemo-1.0-py3-none-any.whl"
    files = {
        "lsdemo/__init__.py": b"VALUE = 42\n",
        "lsdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: lsdemo\nVersion: 1.0\n",
        "lsdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append("lsdemo-1.0.dist-info/RECORD,,")
        archive.writestr("lsdemo-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


def test_requirements_are_installed_once_into_the_cache(make_project, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    project = make_project(
        {
            "main.py": LSDEMO_HANDLER,
            "requirements.txt": f"{wheel}\n",
        }
    )
    cache = tmp_path / "cache"
    first = run_offline(project, cache)
    assert (first.returncode, first.stdout) == (0, b"42"), first.stderr
    assert b"installing requirements.txt" in first.stderr and b"Successfully installed lsdemo-1.0" in first.stderr
    second = run_offline(project, cache)
    assert (second.returncode, second.stdout) == (0, b"42")
    assert b"already installed" in second.stderr and b"Successfully installed" not in second.stderr
    skipped = run_offline(project, tmp_path / "empty", "--no-install")
    assert skipped.returncode == 1 and b"No module named 'lsdemo'" in skipped.stderr


def test_failed_install_names_the_package(make_project, tmp_path: Path) -> None:
    project = make_project(
        {"main.py": "def handler(request, context):\n    return {}\n", "requirements.txt": "nonexistent-pkg-zzz==1.0\n"}
    )
    done = run_offline(project, tmp_path / "c")
    assert done.returncode == 1
    assert (
        b"Error: Installing requirements.txt failed: pip could not install the package 'nonexistent-pkg-zzz==1.0'."
        in done.stderr
    )
    assert not any((tmp_path / "c" / "envs").glob("*/.complete"))


def test_help_and_abeja_handlers_do_not_import_heavy_runtimes(make_project) -> None:
    probe = "import sys, localserve.cli, localserve.server; print(sorted(m for m in ('onnxruntime', 'tensorflow', 'onnx') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=cli_env(), check=True)
    assert done.stdout.strip() == b"[]"
    project = make_project(
        {
            "main.py": "import sys\n\ndef handler(request, context):\n    return {'content': str([m for m in ('onnxruntime', 'tensorflow') if m in sys.modules])}\n"
        }
    )
    done = localserve("run", "-p", str(project), "--handler", "main:handler", "-q")
    assert done.stdout == b"[]"
    assert localserve("--help").returncode == 0


def test_a_command_imports_its_own_module_only() -> None:
    # `serve` starts without the modules of `run`, `check`, `get` and `export`; `--help` lists them all the same.
    probe = (
        "import sys, click\n"
        "from localserve.cli import main\n"
        "main.get_command(click.Context(main), 'serve')\n"
        "print(sorted(m for m in ('localserve.cli.serving', 'localserve.cli.run', 'localserve.cli.tools', "
        "'localserve.export') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=cli_env(), check=True)
    assert done.stdout.strip() == b"['localserve.cli.serving']"
    listed = localserve("--help").stdout.decode()
    for name in ("check", "export", "get", "run", "serve"):
        assert f"\n  {name} " in listed, name


# The heavy dependencies (and slow imports) an API imports only when it uses them (localserve's own modules are
# imported at start-up; tests/test_layers.py holds each in-function import to one of these).
DEFERRED = (
    "boto3",  # a model on disk, not s3://
    "redis",  # no AsyncAPI with a Redis store
    "grpc",  # no --grpc-port
    "tensorflow",  # an ONNX model
    "httpx",  # localserve.testing's client only
    "importlib.metadata",  # no --grpc-port: the installed grpcio and protobuf are looked up only then
    "zipfile",  # a model file, not a .zip
    "csv",  # no text/csv answer
    "decimal",  # no Decimal in an answer (which only code that imported decimal can make)
)


def test_what_a_request_handler_api_does_not_use_is_not_imported(make_project) -> None:
    probe = f"import sys\nPROBE = {DEFERRED!r}\n\ndef pre_inference(sample, metadata):\n    return sample\n\n"
    probe += "def post_inference(prediction, metadata):\n    return [m for m in PROBE if m in sys.modules]\n"
    project = make_project({"handler.py": probe})
    onnx_linear(project / "model.onnx")
    config = "- kind: api\n  name: api\n  model: model.onnx\n  request_handler: handler.py\n"
    (project / "localserve.yaml").write_text(config)
    (project / "sample.json").write_text("[[1, 2, 3, 4]]")
    done = localserve("run", "-p", str(project), "--input", str(project / "sample.json"), "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_check_validates_without_serving(make_project) -> None:
    project = make_project({"cortex.yaml": "- kind: api\n  name: iris\n  model: missing.onnx\n"})
    done = cli("check", "-p", str(project))
    assert done.exit_code == 1
    assert done.stderr.startswith(
        "Error: cortex.yaml: api 'iris': model 'missing.onnx' does not exist in the project directory"
    )
    done = cli("check", "-p", str(EXAMPLES / "iris_onnx"))
    assert done.exit_code == 0
    assert (
        done.stdout == "ok  iris: onnx model iris.onnx with request handler handler.py\n"
        "not packaged (user code cannot read them; --raw-project to allow): cortex.yaml\n"
        "cortex.yaml: 1 API(s) valid.\n"
    )
    done = cli("check", "-p", str(EXAMPLES / "python_predictor"))
    assert done.stdout.splitlines()[0] == "ok  tax: PythonPredictor in predictor.py"
    done = cli("check", "-p", str(EXAMPLES / "json_tax"), "--handler", "main:handler")
    assert done.stdout.splitlines()[0] == "ok  json-tax: ABEJA handler main:handler"


def test_pipfile_packages_are_installed(make_project, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    project = make_project(
        {
            "main.py": LSDEMO_HANDLER,
            "Pipfile": f'[packages]\nlsdemo = {{path = "{wheel}"}}\n',
        }
    )
    done = run_offline(project, tmp_path / "c")
    assert (done.returncode, done.stdout) == (0, b"42"), done.stderr


def test_export_kubernetes_and_dockerignore_commands() -> None:
    import kubernetes_validate
    import yaml

    done = cli("export", "kubernetes", "-p", str(EXAMPLES / "iris_onnx"), "--image", "registry.example/iris:1")
    assert done.exit_code == 0, done.stderr
    documents = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert [d["kind"] for d in documents] == ["ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler"]
    for document in documents:
        kubernetes_validate.validate(document, "1.30.0", strict=True)
    assert documents[2]["metadata"]["name"] == "api-iris" and documents[2]["spec"]["ports"][0]["port"] == 8888
    ignore = cli("export", "dockerignore", "-p", str(EXAMPLES / "iris_onnx"))
    assert ignore.stdout.splitlines()[1:3] == ["cortex.yaml", "**/.*"]


def test_every_flag_is_also_a_localserve_variable_named_after_it() -> None:
    serve_help = cli("serve", "--help").output
    for name in (
        "LOCALSERVE_PORT",
        "LOCALSERVE_HOST",
        "LOCALSERVE_CONFIG",
        "LOCALSERVE_MAX_BODY_SIZE",
        "LOCALSERVE_METRICS",
    ):
        assert f"env var: {name}" in " ".join(serve_help.split()), name
    assert "LOCALSERVE_SERVE_" not in serve_help and "LOCALSERVE_CONFIG_FILE" not in serve_help
    assert "env var: LOCALSERVE_INPUT" in " ".join(cli("run", "--help").output.split())
    assert "env var: LOCALSERVE_IMAGE" in " ".join(cli("export", "kubernetes", "--help").output.split())


@pytest.mark.slow
def test_serve_listens_on_the_port_and_host_of_the_environment() -> None:
    import httpx

    from tests.conftest import free_port, wait_ready

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "localserve", "serve", "--handler", "main:handler"],
        cwd=EXAMPLES / "json_tax",
        env=cli_env(LOCALSERVE_PORT=str(port), LOCALSERVE_HOST="0.0.0.0", LOCALSERVE_LOG_FORMAT="text"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        response = httpx.post(f"http://127.0.0.1:{port}/predict", json={"total_without_tax": 100})
        assert (response.status_code, response.json()) == (200, {"total": 108.0})
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert f"at http://0.0.0.0:{port} (/json-tax)".encode() in stderr, stderr


def test_run_past_its_timeout_exits_1_while_the_model_still_runs(make_project, tmp_path: Path) -> None:
    """The request is answered 504 but its thread stays in onnxruntime: the interpreter's normal exit would
    pull the library from under it (exit 134, "terminate called without an active exception")."""
    model = onnx_mlp(tmp_path / "mlp.onnx", sizes=(256, 1024, 1024, 10))
    project = make_project(
        {
            "main.py": "import numpy as np, onnxruntime\n"
            f"session = onnxruntime.InferenceSession({str(model)!r}, providers=['CPUExecutionProvider'])\n"
            "x = np.ones((64, 256), np.float32)\n"
            "def handler(request, context):\n"
            "    while True:  # never answers: always in the model when run stops\n"
            "        session.run(None, {'x': x})\n",
        }
    )

    done = localserve("run", "--handler", "main:handler", "--timeout", "1", cwd=project)

    assert done.returncode == 1, done.stderr[-3000:]
    assert b"Error: the handler answered 504:" in done.stderr
    assert b"exiting while these threads still run: localserve-" in done.stderr

"""Clear messages instead of tracebacks for bad config files and outputs.

Real processes only where the behaviour is the process's: ``run`` under an address-space limit reading
/dev/zero, and what a child process of user code writes to ``run``'s stdout."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.errors import ConfigError
from tests.cli.test_cli import localserve
from tests.conftest import cli_env

HANDLER = "def handler(request, context):\n    return {'content': 'ok'}\n"


def test_a_config_file_that_is_not_utf8_is_a_config_error(make_project) -> None:
    project = make_project({"cortex.yaml": b"- name: x\n  kind: RealtimeAPI\n  # caf\xe9\n", "main.py": HANDLER})
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value) == "cortex.yaml: line 3: not UTF-8 text (byte 0xe9 at offset 37); save the file as UTF-8."


def test_a_cortex_yaml_that_is_an_empty_list_is_a_config_error(make_project) -> None:
    project = make_project({"cortex.yaml": "[]\n", "main.py": HANDLER})
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value) == "cortex.yaml: the list of APIs is empty; expected at least one '- name: ...' entry."
    done = localserve("serve", "--port", "0", cwd=project)
    assert (done.returncode, done.stderr.decode().splitlines()[-1]) == (
        1,
        "Error: cortex.yaml: the list of APIs is empty; expected at least one '- name: ...' entry.",
    )


def test_run_into_a_folder_that_does_not_exist_says_so_before_running(make_project, tmp_path: Path) -> None:
    project = make_project({"main.py": "open('ran', 'w').close()\n" + HANDLER})
    missing = tmp_path / "nonexistent" / "x"
    done = localserve("run", "--handler", "main:handler", "-o", str(missing), cwd=project)
    assert (done.returncode, done.stdout, done.stderr.decode()) == (
        1,
        b"",
        f"Error: --output {missing}: the folder {missing.parent} does not exist; create it, or write elsewhere.\n",
    )
    assert not (project / "ran").exists()


MISSING = "import nosuchpkg_xyz\n" + HANDLER
MISSING_MESSAGE = (
    "Importing 'main' failed (main.py, line 1): ModuleNotFoundError: No module named 'nosuchpkg_xyz'; "
    "add the package that provides 'nosuchpkg_xyz' to requirements.txt (check its name on PyPI first)"
)


def test_a_failed_import_shows_its_traceback_once_and_names_the_package(make_project) -> None:
    project = make_project({"main.py": MISSING})
    done = localserve("run", "--handler", "main:handler", "--quiet", cwd=project)
    stderr = done.stderr.decode()
    assert (done.returncode, done.stdout) == (1, b"")
    assert stderr.count("    import nosuchpkg_xyz\n") == 1, stderr  # the user's frame, in the log only
    assert stderr.endswith(f"Error: {MISSING_MESSAGE}\n"), stderr
    assert stderr.count(MISSING_MESSAGE) == 1, stderr  # the error says it; no log line before it
    served = localserve("serve", "--handler", "main:handler", "--port", "0", cwd=project)
    assert served.returncode == 1
    assert served.stderr.decode().splitlines()[-1] == f"Error: The server stopped: {MISSING_MESSAGE}"


def test_a_pipfile_asking_for_another_python_is_warned_of_once(tmp_path: Path, caplog) -> None:
    import sys

    from localserve.project.directory import pipfile_requirements

    pipfile = tmp_path / "Pipfile"
    pipfile.write_text('[packages]\nrequests = "*"\n\n[requires]\npython_version = "3.6"\n')
    assert pipfile_requirements(pipfile) == pipfile_requirements(pipfile) == ["requests"]
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert [r.getMessage() for r in caplog.records] == [
        f"Pipfile: [requires] python_version = '3.6', but localserve runs Python {running}: the packages are "
        "installed for it (pipenv would refuse; localserve does not switch Pythons)"
    ]
    same = tmp_path / "same" / "Pipfile"
    same.parent.mkdir()
    same.write_text(f'[packages]\n\n[requires]\npython_version = "{running}"\n')
    assert pipfile_requirements(same) == []
    assert len(caplog.records) == 1


NOISY = """
import os, subprocess, sys

def handler(request, context):
    sys.stdout.buffer.write("bytes caf\\u00e9\\n".encode())
    os.write(1, b"raw write to fd 1\\n")
    os.write(sys.stdout.fileno(), b"raw write to stdout's fileno\\n")
    subprocess.run(["echo", "from a subprocess"], stdout=sys.stdout, check=True)
    print("printed")
    return {"content_type": "text/plain", "content": "the body"}
"""


def test_under_run_stdout_carries_the_body_and_nothing_else(make_project) -> None:
    """Print capture has ``.buffer`` and ``.fileno``; fd 1 is stderr while user code runs."""
    project = make_project({"main.py": NOISY})
    done = localserve("run", "--handler", "main:handler", "--log-format", "text", cwd=project)
    stderr = done.stderr.decode()
    assert (done.returncode, done.stdout) == (0, b"the body"), stderr
    for line in (
        "] bytes café\n",
        "\nraw write to fd 1\n",
        "\nraw write to stdout's fileno\n",
        "\nfrom a subprocess\n",
        "] printed\n",
    ):
        assert line in stderr, stderr


CALLER = """
import os, urllib.request

def handler(request, context):
    url = os.environ["LOCALSERVE_URL"] + "/callee"
    with urllib.request.urlopen(urllib.request.Request(url, data=b"hi", method="POST")) as answer:
        return {"content_type": "text/plain", "content": "callee said " + answer.read().decode()}
"""
CALLEE = (
    "def handler(request, context):\n    return {'content_type': 'text/plain', 'content': request.read().decode()}\n"
)


def test_under_run_localserve_url_reaches_the_other_apis(make_project) -> None:
    """As under serve, user code following the README calls ``$LOCALSERVE_URL/<api>``."""
    config = "- kind: api\n  name: caller\n  handler: caller:handler\n- kind: api\n  name: callee\n  handler: callee:handler\n"
    project = make_project({"localserve.yaml": config, "caller.py": CALLER, "callee.py": CALLEE})
    done = localserve("run", "--api", "caller", "--quiet", cwd=project)
    assert (done.returncode, done.stdout) == (0, b"callee said hi"), done.stderr.decode()


def test_run_quiet_on_a_tensorflow_model_keeps_tensorflows_first_lines_out(make_project) -> None:
    """TensorFlow prints two lines before its logging starts, ignoring TF_CPP_MIN_LOG_LEVEL:
    ``run --quiet`` (which sets it to 2) leaves stderr without them."""
    pytest.importorskip("tensorflow")
    from tests.models import tf_savedmodel

    project = make_project({"cortex.yaml": "- kind: api\n  name: tf\n  model: model\n  model_format: tensorflow\n"})
    tf_savedmodel(project / "model")
    done = localserve(
        "run",
        "--quiet",
        "--input",
        "-",
        "--content-type",
        "application/json",
        stdin=b'{"x": [[1.0, 2.0, 3.0, 4.0]]}',
        cwd=project,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "absl::InitializeLog" not in stderr and "oneDNN custom operations" not in stderr, stderr


PREDICTOR = "class PythonPredictor:\n    def __init__(self, config):\n        pass\n\n    def predict(self, payload):\n        return payload\n"
BAD_IGNORE_MESSAGE = (
    "Error: .cortexignore, line 2: invalid pattern '[z-a]' (bad character range z-a); expected gitignore syntax: *, "
    "?, [a-z], ** and a trailing / for folders, \\ to escape a character."
)


@pytest.mark.parametrize("command", [("check",), ("serve", "--port", "0"), ("export", "dockerignore")])
def test_a_cortexignore_pattern_re_cannot_compile_is_a_config_error(make_project, command: tuple[str, ...]) -> None:
    """``[z-a]`` was a raw ``re.error`` traceback in check, serve and export dockerignore."""
    project = make_project(
        {
            "cortex.yaml": "- name: ign\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: p.py\n",
            "p.py": PREDICTOR,
            ".cortexignore": "build/\n[z-a]\n",
        }
    )
    done = localserve(*command, cwd=project)
    stderr = done.stderr.decode()
    assert (done.returncode, stderr.splitlines()[-1]) == (1, BAD_IGNORE_MESSAGE), stderr
    assert "Traceback" not in stderr


def test_run_input_from_dev_zero_ends_with_the_limit_not_memory_error(make_project) -> None:
    """The command itself, under a 2 GiB address-space limit (what reading /dev/zero to the end would pass)."""
    project = make_project({"main.py": HANDLER})
    done = subprocess.run(
        [sys.executable, "-m", "localserve", "run", "--handler", "main:handler", "--input", "/dev/zero"],
        cwd=project,
        capture_output=True,
        env=cli_env(),
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)),
    )
    assert (done.returncode, done.stderr.decode().splitlines()[-1]) == (
        1,
        "Error: The request body is too large: at least 104857601 bytes; the limit is 100 MiB "
        "(104857600 bytes, --max-body-size).",
    )

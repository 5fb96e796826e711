"""Every example's README command, run as written (from the repository root) as a real process."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT, cli_env, free_port, wait_ready

EXPECTED = {
    "json_tax": {"total": 108.0},
    "iris_onnx": lambda out: out["class_label"] == "iris-setosa" and out["class_index"] == 0,
    "iris_labels": "iris-virginica",
    "iris_models": {"model": "iris", "version": "latest", "class_label": "iris-setosa", "probability": 0.9989},
    "python_predictor": {"total": 1320.0, "currency": "JPY"},
    "tf_savedmodel": lambda out: out["class_label"] == "iris-versicolor",
    "tf_predictor": {"text": "HELLO LOCALSERVE!", "length": 16},
    "keras_training_result": lambda out: out["label"] == "iris-virginica",
    # An AsyncAPI: `run` runs the job at once and prints its result; "job" is the job id given to predict.
    "async_words": lambda out: out.pop("job").isalnum() and out == {"words": 12, "top": ["the", "cat", "saw"]},
}
SLOW = {"tf_savedmodel", "tf_predictor", "keras_training_result"}


def readme_commands(name: str) -> list[str]:
    """The shell commands of an example's README (indented lines, continuations joined)."""
    text = (EXAMPLES / name / "README.md").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if re.match(r"\s{4}(localserve|curl) ", line)]


def as_process(command: str, **replace: str) -> list[str]:
    for old, new in replace.items():
        command = command.replace(old, new)
    args = shlex.split(command)
    return [sys.executable, "-m", "localserve", *args[1:]] if args[0] == "localserve" else args


@contextlib.contextmanager
def readme_server(name: str) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """The example's README ``serve`` command on a free port, ready: its URL, and its README ``curl`` (the output)."""
    serve, curl = readme_commands(name)
    port = str(free_port())
    proc = subprocess.Popen(
        [*as_process(serve), "--port", port],
        cwd=ROOT,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def run_curl() -> bytes:
        command = [*as_process(curl, **{"localhost:8888": f"localhost:{port}"}), "-s"]
        return subprocess.run(command, cwd=ROOT, capture_output=True, timeout=30, check=True).stdout

    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        yield url, run_curl
    finally:
        proc.terminate()
        proc.wait(20)


def test_every_example_is_listed_here_or_below() -> None:
    assert {p.name for p in EXAMPLES.iterdir() if p.is_dir()} == {
        *EXPECTED,
        "image_flip",
        "multipart_echo",
        "iris_splitter",
    }


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in EXPECTED])
def test_readme_run_command(name: str) -> None:
    (command,) = readme_commands(name)
    done = subprocess.run(as_process(command), cwd=ROOT, capture_output=True, env=cli_env(), timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode()
    body = done.stdout.decode()
    expected = EXPECTED[name]
    if isinstance(expected, str):
        assert body == expected
    elif callable(expected):
        assert expected(json.loads(body)), body
    else:
        assert json.loads(body) == expected


def test_readme_image_flip(tmp_path: Path) -> None:
    from PIL import Image

    (command,) = readme_commands("image_flip")
    command, _, target = command.partition(" > ")
    # Pillow is a test dependency; installing requirements.txt is tested in test_cli with a local wheel.
    done = subprocess.run(
        [*as_process(command), "--no-install"], cwd=ROOT, capture_output=True, env=cli_env(), timeout=120, check=True
    )
    assert target == "flipped.jpg"
    (tmp_path / target).write_bytes(done.stdout)
    original = Image.open(EXAMPLES / "image_flip" / "cat.jpg")
    flipped = Image.open(tmp_path / target)
    assert flipped.format == "JPEG" and flipped.size == original.size
    left_original = original.getpixel((2, 24))
    right_flipped = flipped.getpixel((original.width - 3, 24))
    assert all(abs(a - b) < 12 for a, b in zip(left_original, right_flipped, strict=True))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="the README uses curl")
def test_readme_multipart_echo_serve_and_curl() -> None:
    with readme_server("multipart_echo") as (_, run_curl):
        parts = json.loads(run_curl())["parts"]
    assert [(p["form_name"], p["file_name"], p["content_type"]) for p in parts] == [
        ("meta", None, "application/json"),
        ("image", "cat.jpg", "image/jpeg"),
    ]
    assert parts[1]["size"] == (EXAMPLES / "image_flip" / "cat.jpg").stat().st_size


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("curl") is None, reason="the README uses curl")
def test_readme_iris_splitter_serve_and_curl() -> None:
    import httpx

    from tests.conftest import wait_until

    with readme_server("iris_splitter") as (url, run_curl):
        head, _, body = run_curl().decode().partition("\r\n\r\n")
        served = re.search(r"(?im)^x-localserve-api: (\S+)", head)
        assert served is not None and json.loads(body) == {"class_label": "iris-setosa", "api": served.group(1)}
        sample = json.loads((EXAMPLES / "iris_splitter" / "sample.json").read_text())
        with httpx.Client(base_url=url) as client:
            for _ in range(19):
                response = client.post("/iris", json=sample)
                assert response.json() == {"class_label": "iris-setosa", "api": response.headers["x-localserve-api"]}

            def splitter() -> dict:
                return next(e for e in client.get("/stats").json() if e["api"] == "iris")

            wait_until(lambda: splitter()["shadow"]["answered"] == 20, "every copy answered by the shadow")
            entry = splitter()
            routed = {name: t["requests"]["2xx"] for name, t in entry["targets"].items()}
            assert sum(routed.values()) == 20 and set(routed) == {"iris-onnx", "iris-rules"}
            assert entry["shadow"] == {
                "api": "iris-candidate",
                "weight": 100,
                "answered": 20,
                "failed": 0,
                "dropped": 0,
            }

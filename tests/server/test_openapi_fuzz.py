"""Bounded schemathesis runs against ``localserve serve``: nothing it can send from /openapi.json gets a 5xx, and
with every check of its CLI, the document and the server agree."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.conftest import EXAMPLES, cli_env
from tests.models import onnx_two_inputs
from tests.test_e2e import server

pytestmark = pytest.mark.slow


@pytest.fixture
def api_schema(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """The document of a server with a raw two-input ONNX model and an ABEJA handler that takes any body.

    (A user handler that raises on a payload it did not expect answers 500 by design, so the APIs
    here are the ones whose every answer is localserve's own or a handler's deliberate one.)
    """
    project = tmp_path / "project"
    project.mkdir()
    (project / "cortex.yaml").write_text(
        "- kind: api\n  name: two\n  model: two.onnx\n- kind: api\n  name: echo\n  handler: echo:handler\n"
    )
    onnx_two_inputs(project / "two.onnx")
    shutil.copy(EXAMPLES / "multipart_echo" / "main.py", project / "echo.py")
    with server("--project", str(project), "--no-access-log") as (url, _):
        yield url, schemathesis.openapi.from_url(f"{url}/openapi.json")


def test_no_route_answers_5xx(api_schema: tuple[str, Any]) -> None:
    url, schema = api_schema
    failures, operations = server_errors(schema)
    documented = {f"{method.upper()} {path}" for path, item in schema.raw_schema["paths"].items() for method in item}
    assert {operation.label for operation in operations} == documented - {"GET /openapi.json"}  # its own source
    # the model API really met generated bodies: good ones (200) and bad ones (400), never a 5xx
    stats = {entry["api"]: entry["requests"] for entry in httpx.get(f"{url}/stats").json()}
    assert stats["two"]["2xx"] > 0 and stats["two"]["4xx"] > 0 and stats["two"]["5xx"] == 0, stats
    assert failures == {}


@pytest.mark.parametrize(
    ("example", "api"),
    [
        ("iris_onnx", "iris"),
        ("iris_labels", "iris-labels"),
        ("python_predictor", "tax"),
        ("iris_models", "iris-models"),
        ("iris_splitter", "iris-rules"),
    ],
)
def test_the_examples_answer_no_generated_request_with_a_5xx(example: str, api: str) -> None:
    """The bundled examples are what users copy: whatever the document allows, they answer with a 2xx or a 4xx."""
    with server("--project", str(EXAMPLES / example), "--no-access-log") as (url, _):
        failures, _operations = server_errors(schemathesis.openapi.from_url(f"{url}/openapi.json"))
        stats = {entry["api"]: entry["requests"] for entry in httpx.get(f"{url}/stats").json()}
    assert failures == {}
    assert stats[api]["4xx"] > 0 and stats[api]["5xx"] == 0, stats


def server_errors(schema: Any) -> tuple[dict[str, str], list[Any]]:
    """Each operation of ``schema`` whose generated requests met a 5xx, with what failed; and the operations."""
    # Driven by hand, one Hypothesis run per operation (schemathesis' pytest plugin's lazy fixtures do not
    # run under pytest 9).
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in operations:

        @settings(
            max_examples=8,  # bounded for a 2-core CI: ~30 operations, a couple of hundred requests in all
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            case.call_and_validate(checks=[not_a_server_error])

        try:
            run()
        except Exception as exc:
            failures[operation.label] = f"{type(exc).__name__}: {exc}"
    return failures, operations


ANY_BODY = """
def handler(request, context):
    return {"status_code": 200, "content_type": "application/json", "content": {"method": request["http_method"]}}
"""


def test_schemathesis_with_every_check_finds_nothing(tmp_path: Path) -> None:
    """schemathesis' CLI with all its checks (its coverage phase sends the methods the document does not list):
    iris's ONNX model, raw (so its V2 routes too), and an ABEJA handler that takes any request.

    Positive data acceptance is schemathesis' own but for one rule JSON Schema cannot state
    (tests/server/schemathesis_hooks.py). Bounded and deterministic: 20 examples an operation, no seed.
    """
    project = tmp_path / "project"
    project.mkdir()
    (project / "cortex.yaml").write_text(
        "- kind: api\n  name: iris\n  model: iris.onnx\n- kind: api\n  name: echo\n  handler: echo:handler\n"
    )
    shutil.copy(EXAMPLES / "iris_onnx" / "iris.onnx", project / "iris.onnx")
    (project / "echo.py").write_text(ANY_BODY)
    st = [sys.executable, "-c", "from schemathesis.cli import schemathesis; schemathesis()"]
    with server("--project", str(project), "--no-access-log") as (url, _):
        done = subprocess.run(
            [
                *st,
                "run",
                f"{url}/openapi.json",
                "--checks",
                "all",
                "--exclude-checks",
                "positive_data_acceptance",  # replaced by the hooks' positive_data_accepted
                "--phases",
                "examples,coverage,fuzzing",
                "--max-examples",
                "20",
                "--generation-deterministic",
                "--continue-on-failure",
                "--workers",
                "1",
                "--no-color",
            ],
            cwd=tmp_path,  # schemathesis keeps its .schemathesis/ there; the hooks come through PYTHONPATH
            env=cli_env(SCHEMATHESIS_HOOKS="tests.server.schemathesis_hooks"),
            capture_output=True,
            text=True,
            timeout=500,
            check=False,
        )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    selected = re.search(r"Selected: (\d+)/", done.stdout)
    assert selected is not None and f"Tested: {selected.group(1)}\n" in done.stdout, done.stdout[-3000:]

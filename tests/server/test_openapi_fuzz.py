"""A bounded schemathesis run against ``localserve serve``: nothing it can send from /openapi.json gets a 5xx."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.conftest import EXAMPLES
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
    documented = {f"{method.upper()} {path}" for path, item in schema.raw_schema["paths"].items() for method in item}
    assert {operation.label for operation in operations} == documented - {"GET /openapi.json"}  # its own source
    # the model API really met generated bodies: good ones (200) and bad ones (400), never a 5xx
    stats = {entry["api"]: entry["requests"] for entry in httpx.get(f"{url}/stats").json()}
    assert stats["two"]["2xx"] > 0 and stats["two"]["4xx"] > 0 and stats["two"]["5xx"] == 0, stats
    assert failures == {}

"""Whether tracing is on, read from OTEL_* by the CLI alone; nothing of OpenTelemetry is imported when it is off.

What is imported is checked in a fresh Python: what this session imported already would hide an import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from localserve.cli.otel import trace_export
from localserve.config.options import TraceExport
from localserve.errors import ConfigError
from localserve.server import ServeOptions
from localserve.server.banner import banner_lines
from tests.conftest import EXAMPLES, cli_env

HTTP = "http/protobuf"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, None),  # no exporter, no endpoint: off
        ({"OTEL_TRACES_EXPORTER": "otlp"}, TraceExport("otlp", HTTP, "http://localhost:4318/v1/traces")),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, TraceExport("otlp", HTTP, "http://c:4318/v1/traces")),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/t"}, TraceExport("otlp", HTTP, "http://c:9/t")),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            TraceExport("otlp", "grpc", "http://c:4317"),
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            TraceExport("otlp", "grpc", "http://localhost:4317"),
        ),
        ({"OTEL_TRACES_EXPORTER": "console"}, TraceExport("console", HTTP, "")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, None),
        ({"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, None),  # the SDK's own switch wins
    ],
)
def test_tracing_is_on_when_an_otel_variable_names_an_exporter_or_an_endpoint(
    environ: dict[str, str], expected: TraceExport | None
) -> None:
    assert trace_export(environ) == expected


def test_an_exporter_or_protocol_the_sdk_lacks_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as caught:
        trace_export({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert str(caught.value) == (
        "OTEL_TRACES_EXPORTER=zipkin: localserve sends spans with 'otlp' or 'console' (an OTLP collector such as "
        "Jaeger's or Tempo's takes them), not 'zipkin'."
    )
    with pytest.raises(ConfigError) as caught:
        trace_export({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert str(caught.value) == (
        "OTEL_EXPORTER_OTLP_PROTOCOL=http/json: the OTLP exporter of OpenTelemetry's Python SDK speaks "
        "'http/protobuf' or 'grpc'."
    )


def test_the_banner_says_where_spans_go() -> None:
    otlp = ServeOptions(metrics=False, tracing=TraceExport("otlp", "grpc", "http://c:4317"))
    assert banner_lines("x", [], otlp, port=1, grpc_port=None)[-1] == "  traces: OTLP grpc to http://c:4317"
    console = ServeOptions(metrics=False, tracing=TraceExport("console"))
    assert banner_lines("x", [], console, port=1, grpc_port=None)[-1] == "  traces: stderr (console)"
    assert (
        banner_lines("x", [], ServeOptions(metrics=False), port=1, grpc_port=None)[-1]
        == "  dashboard: http://127.0.0.1:1/dashboard"
    )


def test_with_tracing_off_a_served_request_imports_no_opentelemetry_module() -> None:
    probe = (
        "import sys, localserve.testing\n"
        f"with localserve.testing.client({str(EXAMPLES / 'json_tax')!r}, handler='main:handler') as client:\n"
        "    assert client.post('/', json={'price': 1}).status_code < 500\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in cli_env().items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines()[-1] == "[]"


def test_with_tracing_on_the_sdk_is_what_serves_and_a_missing_one_is_named(tmp_path: Path) -> None:
    """The same probe with OTEL_TRACES_EXPORTER=console imports the SDK (so the probe above can fail)."""
    probe = (
        "import sys, localserve.testing\n"
        f"with localserve.testing.client({str(EXAMPLES / 'json_tax')!r}, handler='main:handler') as client:\n"
        "    client.post('/', json={'price': 1})\n"
        "print('opentelemetry.sdk.trace' in sys.modules)\n"
    )
    env = {**cli_env(), "OTEL_TRACES_EXPORTER": "console"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=env, timeout=120, check=False)
    assert done.stdout.decode().splitlines() == ["True"], done.stderr.decode()  # stdout: the probe's line alone
    assert '"name": "POST /"' in done.stderr.decode()  # the console exporter's JSON of the request's span
    hidden = tmp_path / "no_otel"
    hidden.mkdir()
    (hidden / "opentelemetry.py").write_text("raise ImportError('hidden by the test', name='opentelemetry')\n")
    env["PYTHONPATH"] = f"{hidden}:{env['PYTHONPATH']}"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=env, timeout=120, check=False)
    assert done.returncode != 0
    assert (
        "Tracing is on (an OTEL_* variable asks for the 'console' exporter) but opentelemetry is not installed; "
        in (done.stderr.decode())
    )


def test_settings_the_sdk_refuses_are_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from localserve.tracing import start_tracing

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")  # below the export batch's 512
    with pytest.raises(ConfigError) as caught:
        start_tracing(TraceExport())
    assert str(caught.value) == (
        "The OpenTelemetry SDK refused its OTEL_* settings: max_export_batch_size must be less than or equal to "
        "max_queue_size."
    )

"""The documentation site: it builds strictly, has the four sections, and its reference pages list what
the code has (every flag, config key, metric family, error class), so a change to the code that the
pages miss fails here (the ``site`` fixture: conftest.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from localserve.cli import main
from localserve.config import schema
from localserve.config.models import MODEL_PATH_KEYS
from localserve.config.splitter import SPLIT_KEYS, SPLITTER_KEYS
from tests.docs.site import text_of

pytestmark = pytest.mark.slow


def reference(site: Path, name: str) -> str:
    return text_of(site / "reference" / name / "index.html")


def every_command(command: click.Command = main) -> Iterator[click.Command]:
    yield command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            yield from every_command(command.get_command(ctx, name))


def test_the_site_has_the_four_sections_and_a_home(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    for section in ("tutorials", "how-to", "reference", "explanation"):
        assert (site / section / "index.html").is_file(), section
        assert f'href="{section}/"' in home, section


def test_every_flag_of_every_command_is_in_the_cli_reference(site: Path) -> None:
    page = reference(site, "cli")
    missing = []
    for command in every_command():
        for param in command.params:
            for name in [*param.opts, *param.secondary_opts]:
                if name.startswith("-") and name not in page:
                    missing.append(f"{command.name} {name}")
            envvar = getattr(param, "envvar", None)
            for var in [envvar] if isinstance(envvar, str) else list(envvar or []):
                if var not in page:
                    missing.append(f"{command.name} {var}")
    assert missing == []
    assert "LOCALSERVE_MAX_BODY_SIZE" in reference(site, "environment")


def test_every_key_of_the_config_schema_is_in_the_config_reference(site: Path) -> None:
    page = reference(site, "config")
    keys = {
        *schema.API_KEYS,
        *schema.REALTIME_KEYS,
        *schema.PREDICTOR_KEYS,
        *schema.MODELS_KEYS,
        *MODEL_PATH_KEYS,
        *schema.AUTOSCALING_KEYS,
        *schema.COMPUTE_KEYS,
        *schema.BATCHING_KEYS,
        *schema.TRACKER_KEYS,
        *schema.CUDA_OPTION_KEYS,
        *schema.NETWORKING_KEYS,
        *schema.UPDATE_STRATEGY_KEYS,
        *SPLITTER_KEYS,
        *SPLIT_KEYS,
    }
    rows = set(re.findall(r"^\s*(\w+)\s*$", page, re.M))  # each key is its table row's first cell
    assert sorted(keys - rows) == []
    for key in (
        "target_cpu_utilization",
        "max_batch_size",
        "batch_interval",
        "threads_per_process",
        "processes_per_replica",
        "max_replica_concurrency",
        "signature_key",
        "cache_size",
        "disk_cache_size",
        "tracker",
        "shadow",
        "tf_signature_key",
        "model_format",
    ):
        assert key in rows, key


def test_every_metric_family_a_server_exposes_is_in_the_metrics_reference(site: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    import localserve.testing
    from tests.conftest import ROOT

    with localserve.testing.client(ROOT / "handlers_examples" / "iris_onnx") as client:
        assert (
            client.post(
                "/iris", json={"sepal_length": 5.2, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3}
            ).status_code
            == 200
        )
        exposed = {family.name for family in text_string_to_metric_families(client.get("/metrics").text)}
    page = reference(site, "metrics")
    assert "localserve_requests" in exposed
    assert sorted(name for name in exposed if name not in page) == []


def test_every_error_class_rpc_and_route_is_in_the_reference(site: Path) -> None:
    from localserve import errors

    page = reference(site, "errors")
    classes = [n for n, c in vars(errors).items() if isinstance(c, type) and issubclass(c, errors.LocalServeError)]
    assert [n for n in classes if n not in page] == []
    grpc = reference(site, "grpc")
    assert all(rpc in grpc for rpc in ("ServerLive", "ModelInfer", "ModelConfig", "ModelStatistics"))
    http = reference(site, "http-api")
    assert all(route in http for route in ("POST /iris", "/v2/models/iris/infer", "GET /readyz", "GET /metrics"))
    assert "localserve.testing.client" in reference(site, "python-api")

"""What run and serve share: the cache folder, the settings tree built from flags over the environment, and
the environment's settings, read by the CLI alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.config.options import ProjectSettings


def test_the_cache_folder_is_decided_by_the_cli_alone(tmp_path: Path) -> None:
    from localserve.cli.options import cache_dir_of

    assert cache_dir_of(tmp_path / "flag", {"XDG_CACHE_HOME": "/xdg"}) == tmp_path / "flag"
    assert cache_dir_of(None, {"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/localserve")
    assert cache_dir_of(None, {}) == Path.home() / ".cache" / "localserve"


def test_the_settings_tree_nests_the_project_and_the_limits_and_a_setting_given_wins_over_the_environment(
    tmp_path: Path,
) -> None:
    from localserve.cli.options import serve_options
    from localserve.config.options import HttpLimits

    environ = {"CUDA_VISIBLE_DEVICES": "1", "XDG_CACHE_HOME": str(tmp_path)}
    options = serve_options(
        environ, environment=("K:v",), no_install=True, raw_project=True, cuda_visible_devices="0", max_headers=5
    )
    assert options.project == ProjectSettings(environment={"K": "v"}, install=False, raw_project=True)
    assert options.limits == HttpLimits(max_headers=5)
    assert options.cuda_visible_devices == "0"  # localserve.testing's keyword, over the environment's
    assert options.cache_dir == tmp_path / "localserve"  # decided once, by cache_dir_of
    assert serve_options(environ).cuda_visible_devices == "1"


def test_environment_settings_are_read_by_the_cli(caplog: pytest.LogCaptureFixture) -> None:
    from localserve.cli.options import environment_settings
    from localserve.config.options import TraceExport

    assert environment_settings({}) == {
        "on_kubernetes": False,
        "cuda_visible_devices": None,
        "s3_endpoint": None,
        "tracing": None,
    }
    found = environment_settings(
        {
            "KUBERNETES_SERVICE_HOST": "10.0.0.1",
            "CUDA_VISIBLE_DEVICES": "1,2",
            "LOCALSERVE_S3_ENDPOINT": "http://s3:9",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
        }
    )
    assert found == {
        "on_kubernetes": True,
        "cuda_visible_devices": "1,2",
        "s3_endpoint": "http://s3:9",
        "tracing": TraceExport("otlp", "http/protobuf", "http://otel:4318/v1/traces"),
    }
    assert caplog.messages == [
        "LOCALSERVE_S3_ENDPOINT is deprecated: set AWS_ENDPOINT_URL_S3 instead (botocore reads it itself)"
    ]
    caplog.clear()
    both = environment_settings({"LOCALSERVE_S3_ENDPOINT": "http://s3:9", "AWS_ENDPOINT_URL_S3": "http://aws:9"})
    assert both["s3_endpoint"] is None  # botocore's own variable wins, read by botocore itself
    assert caplog.messages == [
        "LOCALSERVE_S3_ENDPOINT is deprecated: set AWS_ENDPOINT_URL_S3 instead (botocore reads it itself); "
        "AWS_ENDPOINT_URL_S3 is set too, and wins"
    ]

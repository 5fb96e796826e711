"""What one API gets besides its config (``ApiOptions.of``): the server's settings and the API's own, together."""

from __future__ import annotations

from pathlib import Path

from localserve.config import ApiConfig, load_config
from localserve.config.options import ApiOptions, ServeOptions


def test_an_apis_options_take_the_servers_settings_and_the_apis_own(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text(
        "- kind: api\n  name: a\n  model: m.onnx\n  compute: {gpu: 1}\n  model_threads: 3\n  threads_per_process: 2\n"
        "  batching: {max_batch_size: 4, batch_interval: 5ms}\n  cuda_options: {use_tf32: '0'}\n"
    )
    (api,) = load_config(tmp_path).apis
    server = ServeOptions(replicas=2, allow_cpu_fallback=True, cache_dir=tmp_path / "cache", s3_endpoint="http://s3:9")
    options = ApiOptions.of(api, server, tmp_path)
    assert options == ApiOptions(
        project=tmp_path,
        cache_dir=tmp_path / "cache",
        s3_endpoint="http://s3:9",
        threads=3,
        gpu=True,
        allow_cpu_fallback=True,
        cuda_options={"use_tf32": "0"},
        replicas=2,
        api_threads=2,
        batch_interval=0.005,
        batching=True,
    )
    alone = ApiOptions.of(ApiConfig(name="b"), ServeOptions(), tmp_path)
    assert (alone.gpu, alone.batching, alone.batch_interval, alone.threads, alone.replicas) == (
        False,
        False,
        0.0,
        None,
        1,
    )

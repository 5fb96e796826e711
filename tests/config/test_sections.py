"""The small sections of an API (tracker, compute, batching, cuda_options): their values, defaults and refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localserve.config import load_config
from localserve.config.schema import BatchingConfig, ComputeConfig, TrackerConfig
from localserve.config.sections import parse_batching, parse_compute, parse_tracker
from localserve.errors import ConfigError
from tests.config.test_validate import write

WHERE = "cortex.yaml: api 'iris'"


def test_absent_sections_take_their_defaults() -> None:
    assert parse_tracker(None, WHERE) is None
    assert parse_batching(None, WHERE) is None
    assert parse_compute(None, WHERE) == ComputeConfig(1, 100, None, 80, "200m", 0, None, False)


def test_a_tracker_names_its_key_and_type() -> None:
    assert parse_tracker({"key": "label", "model_type": "regression"}, WHERE) == TrackerConfig("regression", "label")
    with pytest.raises(ConfigError) as caught:
        parse_tracker(["label"], WHERE)
    assert str(caught.value) == f"{WHERE}: 'tracker' must be a mapping with 'key' and 'model_type', got list."
    with pytest.raises(ConfigError) as caught:
        parse_tracker({"key": 3, "model_type": "regression"}, WHERE)
    assert str(caught.value) == f"{WHERE}: 'key' in 'tracker' must be a string, got int 3."


def test_compute_reads_replicas_cpu_gpu_and_memory() -> None:
    compute = parse_compute({"min_replicas": 2, "init_replicas": 3, "cpu": 1, "gpu": 1, "mem": "2Gi"}, WHERE)
    assert compute == ComputeConfig(2, 100, 3, 80, "1", 1, "2Gi", False)
    assert compute.replicas == 3
    assert parse_compute({"min_replicas": 150}, WHERE).max_replicas == 150  # the default max follows min
    assert parse_compute({"target_cpu_utilization": 50}, WHERE).target_cpu_utilization_given


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"min_replicas": 3, "max_replicas": 2}, "'max_replicas' in 'compute' (2) is below 'min_replicas' (3)."),
        (
            {"target_cpu_utilization": 101},
            "invalid value 101 for 'target_cpu_utilization' in 'compute'; expected a percentage 1-100.",
        ),
        ({"cpu": "0"}, "invalid value '0' for 'cpu' in 'compute'; expected a number of cores like 1, 0.5 or '200m'."),
        ({"cpu": True}, "invalid value True for 'cpu' in 'compute'; expected a number of cores like 1, 0.5 or '200m'."),
        ({"mem": "2GB"}, "invalid value '2GB' for 'mem' in 'compute'; expected a quantity like '2Gi' or '512Mi'."),
        ({"gpu": -1}, "invalid value -1 for 'gpu' in 'compute'; expected an integer >= 0."),
        (
            {"max_replicas": 1001},
            "invalid value 1001 for 'max_replicas' in 'compute'; expected an integer from 1 to 1,000.",
        ),
    ],
)
def test_compute_refusals_name_the_key_and_what_was_expected(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_compute(raw, WHERE)
    assert str(caught.value) == f"{WHERE}: {message}"


def test_inferentia_chips_are_refused_with_what_to_do_instead() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_compute({"inf": 1}, WHERE)
    assert str(caught.value) == (
        f"{WHERE}: 'inf: 1' in 'compute' asks for AWS Inferentia chips, which no local machine has; remove 'inf' "
        "(the model runs on CPU, or on a GPU with 'gpu: 1')."
    )


def test_batching_reads_the_size_interval_and_buckets() -> None:
    assert parse_batching({"max_batch_size": 8}, WHERE) == BatchingConfig(8, 0.005, None)
    assert parse_batching({"max_batch_size": 8, "batch_interval": "20ms", "batch_sizes": [1, 8]}, WHERE) == (
        BatchingConfig(8, 0.02, (1, 8))
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"batch_interval": "5ms"}, "'max_batch_size' in 'batching' is required."),
        (
            {"max_batch_size": 0},
            "invalid value 0 for 'max_batch_size' in 'batching'; expected an integer from 1 to 4,096.",
        ),
        (
            {"max_batch_size": 8, "batch_sizes": [1, 4]},
            "'batch_sizes' in 'batching' must include max_batch_size (8); got [1, 4].",
        ),
        (
            {"max_batch_size": 8, "batch_sizes": [1, 16]},
            "invalid value [1, 16] for 'batch_sizes' in 'batching'; expected a list of whole numbers from 1 to "
            "max_batch_size (8), e.g. [1, 4, 8].",
        ),
        (
            {"max_batch_size": 8, "batch_interval": "soon"},
            "invalid value 'soon' for 'batch_interval' in 'batching'; expected a duration like 5ms, 0.5s or 60 (seconds).",
        ),
    ],
)
def test_batching_refusals_name_the_key_and_what_was_expected(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_batching(raw, WHERE)
    assert str(caught.value) == f"{WHERE}: {message}"


CUDA_VALUES = {
    "cudnn_conv_algo_search: fast": "'cuda_options.cudnn_conv_algo_search' must be one of EXHAUSTIVE, HEURISTIC, "
    "DEFAULT; got 'fast'.",
    "arena_extend_strategy: 2": "'cuda_options.arena_extend_strategy' must be one of kNextPowerOfTwo, "
    "kSameAsRequested; got 2.",
    "gpu_mem_limit: 8G": "'cuda_options.gpu_mem_limit' must be a number of bytes above 0 (e.g. 8589934592 for "
    "8 GiB); got '8G'.",
    "use_tf32: yes please": "'cuda_options.use_tf32' is a switch: true or false (1 or 0); got 'yes please'.",
    "enable_cuda_graph: true": "'cuda_options.enable_cuda_graph': CUDA graphs are not supported: onnxruntime replays "
    "them only on inputs bound to fixed GPU buffers (IOBinding), and localserve feeds each request's arrays. Leave "
    "it out.",
}


@pytest.mark.parametrize("option", list(CUDA_VALUES))
def test_a_cuda_option_value_onnxruntime_would_refuse_is_a_config_error(tmp_path: Path, option: str) -> None:
    """onnxruntime checks them only when the session is made, and then runs on the CPU instead."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, f"- kind: api\n  name: iris\n  model: m.onnx\n  cuda_options: {{{option}}}\n"))
    assert str(info.value) == f"cortex.yaml: api 'iris': {CUDA_VALUES[option]}"


def test_cuda_option_values_are_spelled_as_onnxruntime_wants_them(tmp_path: Path) -> None:
    options = "{cudnn_conv_algo_search: exhaustive, arena_extend_strategy: ksameasrequested, gpu_mem_limit: 1024, "
    options += "prefer_nhwc: 1, use_tf32: true, enable_cuda_graph: false}"
    api = load_config(write(tmp_path, f"- kind: api\n  name: iris\n  model: m.onnx\n  cuda_options: {options}\n")).apis[
        0
    ]
    assert dict(api.cuda_options) == {
        "cudnn_conv_algo_search": "EXHAUSTIVE",
        "arena_extend_strategy": "kSameAsRequested",
        "gpu_mem_limit": "1024",
        "prefer_nhwc": "1",
        "use_tf32": "1",
        "enable_cuda_graph": "0",
    }

"""API config validation: every problem names the file, the API, the key, the bad value, what is expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "cortex.yaml") -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


def test_full_config_and_inference(tmp_path: Path) -> None:
    project = write(
        tmp_path,
        """
- kind: api
  name: iris
  model: s3://bucket/iris.onnx
  request_handler: handler.py
  tracker: {key: class_label, model_type: classification}
  compute: {min_replicas: 2, max_replicas: 5, init_replicas: 3, target_cpu_utilization: 70, cpu: 500m, gpu: 1, mem: 2Gi}
  metadata: {labels: [a, b]}
  batching: {max_batch_size: 16, batch_interval: 5ms}
  timeout: 2.5s
- kind: api
  name: tf
  model: models/saved/
  tf_signature_key: predict
- kind: api
  name: tax
  predictor: {type: python, path: predictor.py, config: {rate: 0.1}}
- kind: api
  name: abeja
  handler: main:handler
  context: {k: 1}
""",
    )
    config = load_config(project)
    iris, tf, tax, abeja = config.apis
    assert (iris.kind, iris.model_format, iris.compute.replicas, iris.compute.cpu, iris.compute.gpu) == (
        "request_handler",
        "onnx",
        3,
        "500m",
        1,
    )
    assert iris.batching is not None and iris.batching.batch_interval == pytest.approx(0.005)
    assert iris.timeout == 2.5 and iris.tracker is not None and iris.tracker.key == "class_label"
    assert (tf.model_format, tf.tf_signature_key, tf.compute.replicas) == ("tensorflow", "predict", 1)
    assert tax.kind == "predictor" and tax.predictor is not None and tax.predictor.class_name == "PythonPredictor"
    assert (abeja.kind, dict(abeja.context)) == ("abeja", {"k": 1})
    assert config.source == "cortex.yaml"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  batching: {max_batchsize: 4}\n",
            "cortex.yaml: api 'iris': unknown key 'max_batchsize' in 'batching'. Did you mean 'max_batch_size'?",
        ),
        (
            "- kind: api\n  name: iris\n  modle: m.onnx\n",
            "cortex.yaml: api 'iris': unknown key 'modle'. Did you mean 'model'?",
        ),
        (
            "- kind: api\n  name: Iris\n  model: m.onnx\n",
            "cortex.yaml: api 'Iris': invalid name 'Iris'; expected lower-case letters, digits and '-' (starting and ending with a letter or digit, at most 63 characters).",
        ),
        (
            "- kind: api\n  model: m.onnx\n",
            "cortex.yaml: api #1: 'name' is required and must be a string, got nothing.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  model_format: pytorch\n",
            "cortex.yaml: api 'iris': invalid value 'pytorch' for 'model_format'; expected 'onnx' or 'tensorflow'.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  tracker: {model_type: clasification}\n",
            "cortex.yaml: api 'iris': invalid value 'clasification' for 'model_type' in 'tracker'; expected 'classification' or 'regression'.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  compute: {gpu: -1}\n",
            "cortex.yaml: api 'iris': invalid value -1 for 'gpu' in 'compute'; expected an integer >= 0.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  compute: {cpu: lots}\n",
            "cortex.yaml: api 'iris': invalid value 'lots' for 'cpu' in 'compute'; expected a number of cores like 1, 0.5 or '200m'.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  compute: {mem: 2GB}\n",
            "cortex.yaml: api 'iris': invalid value '2GB' for 'mem' in 'compute'; expected a quantity like '2Gi' or '512Mi'.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  compute: {min_replicas: 3, max_replicas: 2}\n",
            "cortex.yaml: api 'iris': 'max_replicas' in 'compute' (2) is below 'min_replicas' (3).",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  compute: {init_replicas: 9, max_replicas: 4}\n",
            "cortex.yaml: api 'iris': invalid value 9 for 'init_replicas' in 'compute'; expected between min_replicas (1) and max_replicas (4).",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  batching: {max_batch_size: 4, batch_interval: soon}\n",
            "cortex.yaml: api 'iris': invalid value 'soon' for 'batch_interval' in 'batching'; expected a duration like 5ms, 0.5s or 60 (seconds).",
        ),
        (
            "- kind: api\n  name: iris\n  request_handler: h.py\n",
            "cortex.yaml: api 'iris': 'request_handler' needs a 'model' to run between pre_inference and post_inference.",
        ),
        (
            "- kind: api\n  name: iris\n",
            "cortex.yaml: api 'iris': nothing to serve; set 'handler', 'predictor', or 'model' (with 'request_handler').",
        ),
        (
            "- kind: api\n  name: iris\n  handler: main:handler\n  model: m.onnx\n",
            "cortex.yaml: api 'iris': 'handler' and 'model' cannot be combined; an API is either an ABEJA 'handler', a 'predictor', or a 'model' with an optional 'request_handler'.",
        ),
        (
            "- kind: api\n  name: iris\n  handler: main:handler\n  batching: {max_batch_size: 4}\n",
            "cortex.yaml: api 'iris': 'batching' does not apply to an ABEJA 'handler' (each call answers one request); remove it, or serve the model through a 'request_handler' or a 'predictor'.",
        ),
        (
            "- kind: api\n  name: iris\n  predictor: {type: pytorch, path: p.py}\n",
            "cortex.yaml: api 'iris': invalid value 'pytorch' for 'type' in 'predictor'; expected one of 'python', 'onnx', 'tensorflow'. Did you mean 'python'?",
        ),
        (
            "- kind: api\n  name: iris\n  predictor: {type: onnx, path: p.py}\n",
            "cortex.yaml: api 'iris': a predictor of type 'onnx' needs a model; set 'model_path' in 'predictor'.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  tf_signature_key: predict\n",
            "cortex.yaml: api 'iris': 'tf_signature_key' only applies to TensorFlow models (model_format: tensorflow).",
        ),
        (
            "- kind: api\n  name: metrics\n  model: m.onnx\n",
            "cortex.yaml: api 'metrics': the name 'metrics' is reserved by localserve (its own route /metrics); choose another.",
        ),
        (
            "- kind: api\n  name: docs\n  model: m.onnx\n",
            "cortex.yaml: api 'docs': the name 'docs' is reserved by localserve (its own route /docs); choose another.",
        ),
        (
            "- kind: api\n  name: dashboard\n  handler: main:handler\n",
            "cortex.yaml: api 'dashboard': the name 'dashboard' is reserved by localserve (its own route /dashboard); choose another.",
        ),
        (
            "- kind: api\n  name: openapi.json\n  handler: main:handler\n",
            "cortex.yaml: api 'openapi.json': invalid name 'openapi.json'; expected lower-case letters, digits and '-' (starting and ending with a letter or digit, at most 63 characters).",
        ),
        (
            "- kind: api\n  name: a\n  model: m.onnx\n- kind: api\n  name: a\n  model: m.onnx\n",
            "cortex.yaml: api 'a' is defined twice; API names must be unique.",
        ),
        (
            "- kind: job\n  name: a\n  model: m.onnx\n",
            "cortex.yaml: api 'a': invalid value 'job' for 'kind'; expected one of 'api', 'RealtimeAPI', 'AsyncAPI', 'TrafficSplitter'.",
        ),
        ("name: [", None),
        ("", "cortex.yaml: the file is empty; expected a list of '- kind: api' entries."),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  timeout: 0\n",
            "cortex.yaml: api 'iris': invalid value 0 for 'timeout'; expected a duration above 0, like 0.5s or 60 (seconds).",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  async_retention: 1d\n",
            "cortex.yaml: api 'iris': 'async_retention' belongs to the Cortex 0.25+ generation of the config (kind: RealtimeAPI or AsyncAPI); with 'kind: api' write 'kind: AsyncAPI'.",
        ),
        (
            "- kind: RealtimeAPI\n  name: iris\n  predictor: {type: onnx, path: p.py, model_path: m.onnx}\n"
            "  cuda_options: {cudnn_conv_algo: HEURISTIC}\n",
            "cortex.yaml: api 'iris': unknown key 'cudnn_conv_algo' in 'cuda_options'. Did you mean 'cudnn_conv_algo_search'?",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  threads_per_process: 100000000000000000000\n",
            "cortex.yaml: api 'iris': invalid value 100000000000000000000 for 'threads_per_process'; expected an integer from 1 to 1,024.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  batching: {max_batch_size: 1000000000000, batch_interval: 1ms}\n",
            "cortex.yaml: api 'iris': invalid value 1000000000000 for 'max_batch_size' in 'batching'; expected an integer from 1 to 4,096.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  timeout: .nan\n",
            "cortex.yaml: api 'iris': invalid value nan for 'timeout'; expected a finite duration.",
        ),
        (
            "- kind: api\n  name: iris\n  model: m.onnx\n  timeout: -3\n",
            "cortex.yaml: api 'iris': invalid value -3 for 'timeout'; expected a duration like 5ms, 0.5s or 60 (seconds).",
        ),
    ],
)
def test_errors_are_exact(tmp_path: Path, text: str, message: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    if message is None:
        assert str(info.value).startswith("cortex.yaml: not valid YAML:")
    else:
        assert str(info.value) == message


def test_model_format_inferred_as_seed_003_says(tmp_path: Path) -> None:
    text = "".join(
        f"- kind: api\n  name: m{i}\n  model: {m}\n" for i, m in enumerate(["a.onnx", "b.zip", "dir/", "s3://b/k"])
    )
    formats = [api.model_format for api in load_config(write(tmp_path, text)).apis]
    assert formats == ["onnx", "tensorflow", "tensorflow", "tensorflow"]


def test_localserve_yaml_wins_and_flags_build_one_api(tmp_path: Path) -> None:
    write(tmp_path, "- kind: api\n  name: from-cortex\n  model: m.onnx\n")
    write(tmp_path, "- kind: api\n  name: from-localserve\n  model: m.onnx\n", "localserve.yaml")
    assert load_config(tmp_path).apis[0].name == "from-localserve"
    flags = load_config(tmp_path, handler="main:handler", threads_per_process=2)
    assert flags.source == "command line" and flags.apis[0].threads_per_process == 2
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path).api("nope")
    assert str(info.value) == "localserve.yaml: no API named 'nope'; the APIs are: from-localserve."


def test_no_config_and_no_handler(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value).endswith(
        "there is no localserve.yaml / cortex.yaml and no --handler; pass --handler main:handler for an ABEJA handler, or --config FILE."
    )


@pytest.mark.parametrize("kind", ["api", "RealtimeAPI", "AsyncAPI"])
def test_cuda_options_are_taken_by_every_kind(tmp_path: Path, kind: str) -> None:
    model = "model: m.onnx" if kind == "api" else "predictor: {type: onnx, path: p.py, model_path: m.onnx}"
    text = f"- kind: {kind}\n  name: iris\n  {model}\n  cuda_options: {{cudnn_conv_algo_search: DEFAULT, use_tf32: false}}\n"
    api = load_config(write(tmp_path, text)).apis[0]
    assert dict(api.cuda_options) == {"cudnn_conv_algo_search": "DEFAULT", "use_tf32": "0"}

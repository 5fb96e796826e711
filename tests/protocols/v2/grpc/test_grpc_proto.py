"""The committed inference_pb2 modules are what the pinned grpcio-tools makes of inference.proto, the code of the
oldest protobuf the grpc extra admits, and speak the wire of the published protocol: the messages of tritonclient's
own generated modules parse ours and ours theirs.

grpcio-tools' code generator runs as its own process, as the committed modules were made."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import pytest

from localserve.protocols.v2.grpc import inference_pb2 as pb
from localserve.protocols.v2.grpc.versions import MINIMUM
from tests.protocols.v2.grpc.test_versions import pinned

PACKAGE = Path(pb.__file__).parent
GENERATED = ("inference_pb2.py", "inference_pb2.pyi")


def test_the_generated_modules_match_the_proto(tmp_path: Path) -> None:
    generator = pinned("test", "grpcio-tools")
    try:
        installed = version("grpcio-tools")
    except PackageNotFoundError:
        pytest.skip(f"grpcio-tools {generator} is not installed (it has no wheels for Python 3.13 and later)")
    assert installed == generator, f"grpcio-tools {installed} is installed; the test extra pins {generator}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PACKAGE}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            str(PACKAGE / "inference.proto"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name in GENERATED:
        assert (tmp_path / name).read_text() == (PACKAGE / name).read_text(), (
            f"{name} is not what grpcio-tools {generator} makes of inference.proto: regenerate it with the command "
            "in the proto's header"
        )


def test_the_code_is_that_of_the_oldest_protobuf_admitted() -> None:
    """A protobuf runtime may be newer than the code it loads, never older: the code's version is the floor."""
    header = (PACKAGE / "inference_pb2.py").read_text().splitlines()[3]
    assert header == f"# Protobuf Python Version: {MINIMUM['protobuf']}"


def test_the_messages_are_the_protocols_on_the_wire() -> None:
    from tritonclient.grpc import model_config_pb2, service_pb2

    theirs = service_pb2.ModelInferRequest(model_name="mlp", model_version="1", id="r1")
    given = theirs.inputs.add(name="x", datatype="FP16", shape=[2, 2])
    given.parameters["p"].int64_param = 7
    theirs.outputs.add(name="y").parameters["classification"].int64_param = 2
    theirs.raw_input_contents.append(np.arange(4, dtype="<f2").tobytes())
    ours = pb.ModelInferRequest.FromString(theirs.SerializeToString())
    assert (ours.model_name, ours.model_version, ours.id) == ("mlp", "1", "r1")
    assert (ours.inputs[0].name, ours.inputs[0].datatype, list(ours.inputs[0].shape)) == ("x", "FP16", [2, 2])
    assert ours.inputs[0].parameters["p"].int64_param == 7
    assert ours.outputs[0].parameters["classification"].int64_param == 2
    assert ours.raw_input_contents[0] == theirs.raw_input_contents[0]

    answer = pb.ModelInferResponse(model_name="mlp", model_version="1", id="r1")
    answer.outputs.add(name="y", datatype="BOOL", shape=[2]).contents.bool_contents.extend([True, False])
    read = service_pb2.ModelInferResponse.FromString(answer.SerializeToString())
    assert list(read.outputs[0].contents.bool_contents) == [True, False]

    config = pb.ModelConfig(name="mlp", platform="onnx_onnxv1", backend="onnx", max_batch_size=8)
    config.input.add(name="x", data_type=pb.TYPE_FP16, dims=[256])
    config.dynamic_batching.SetInParent()
    read_config = model_config_pb2.ModelConfig.FromString(config.SerializeToString())
    assert (read_config.backend, read_config.max_batch_size) == ("onnx", 8)
    assert model_config_pb2.DataType.Name(read_config.input[0].data_type) == "TYPE_FP16"
    assert read_config.WhichOneof("scheduling_choice") == "dynamic_batching"

    stats = pb.ModelStatistics(name="mlp", version="1", inference_count=3)
    stats.inference_stats.success.count = 2
    read_stats = service_pb2.ModelStatistics.FromString(stats.SerializeToString())
    assert (read_stats.inference_count, read_stats.inference_stats.success.count) == (3, 2)

"""The gRPC reference, from the ``.proto`` localserve serves and the status table of its renderer."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import localserve

GRPC = Path(localserve.__file__).parent / "protocols" / "v2" / "grpc"
RPC_RE = re.compile(r"rpc (\w+)\((\w+)\) returns \((\w+)\)")
WHAT = {
    "ServerLive": "Whether the server is alive (open without `--api-key`).",
    "ServerReady": "Whether every API is loaded; false once a stop is asked for (open without `--api-key`).",
    "ModelReady": "Whether a model is loaded; false while it loads or after it failed; NOT_FOUND for no such model.",
    "ServerMetadata": "Name `localserve`, its version, extensions `model_configuration` and `statistics`.",
    "ModelMetadata": "A model's inputs and outputs, as `GET /v2/models/<m>`.",
    "ModelInfer": "Run the model: the API's queue, batches, deadline, figures and access log, as REST's infer.",
    "ModelConfig": "Triton's model configuration, as `GET /v2/models/<m>/config` (perf_analyzer reads it).",
    "ModelStatistics": "Triton's statistics, as `GET /v2/models/<m>/stats`.",
}

INTRO = """# gRPC services

`localserve serve --grpc-port 8081` (or `LOCALSERVE_GRPC_PORT=8081`; the `grpc` extra) serves the Open
Inference Protocol over gRPC: `inference.GRPCInferenceService`, KServe's RPCs and Triton's `ModelConfig`
and `ModelStatistics`, so `tritonclient.grpc` and `perf_analyzer -i grpc` work unchanged. Generated from
the `.proto` file localserve serves (`localserve/protocols/v2/grpc/inference.proto`).

Tensors come typed (the `InferTensorContents` field of their datatype, integers range-checked) or raw
(`raw_input_contents`, one entry per input, as tritonclient sends them; FP16 only raw). The answer is raw
when the request was, or when an output is FP16, else typed. The request `id` is echoed, `model_version`
is `"1"`. The request id comes from `x-request-id` metadata (or a new one) and goes back in the trailing
metadata. With `--api-key`, every RPC but ServerLive and ServerReady needs `authorization: Bearer <key>`
metadata.
"""


def rpcs(proto: str) -> list[tuple[str, str, str]]:
    """The service's RPCs: (name, request, response)."""
    return RPC_RE.findall(proto)


def status_codes() -> dict[int, str]:
    """HTTP status -> gRPC status code, read from the renderer (``status.CODES``) without importing grpc."""
    tree = ast.parse((GRPC / "status.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CODES":
            assert isinstance(node.value, ast.Dict)
            return {
                ast.literal_eval(k): v.attr  # type: ignore[arg-type, attr-defined]
                for k, v in zip(node.value.keys, node.value.values, strict=True)
            }
    raise RuntimeError("no CODES in localserve/protocols/v2/grpc/status.py")


def render() -> str:
    """The page: the RPCs, the statuses, then the messages as declared."""
    proto = (GRPC / "inference.proto").read_text(encoding="utf-8")
    out = [INTRO, "## RPCs", "", "| RPC | request → response | what it does |", "|---|---|---|"]
    for name, request, response in rpcs(proto):
        out.append(f"| `{name}` | `{request}` → `{response}` | {WHAT.get(name, '')} |")
    out += [
        "",
        "## Statuses",
        "",
        "An error is a status whose details are the words the REST error would carry (cut to 4 KiB once "
        "percent-encoded). A full queue is `RESOURCE_EXHAUSTED`; a message over `--max-body-size` too. "
        "A request message that does not parse is `INVALID_ARGUMENT`; a client's own deadline is "
        "`DEADLINE_EXCEEDED` and drops work not yet started; another 5xx is `INTERNAL` "
        "(`--hide-errors` hides its text).",
        "",
        "| HTTP status of the same error | gRPC status |",
        "|---|---|",
    ]
    out += [f"| {http} | `{code}` |" for http, code in sorted(status_codes().items())]
    body = proto[proto.index("syntax") :]
    out += ["", "## Messages", "", "```protobuf", body.strip(), "```", ""]
    return "\n".join(out)

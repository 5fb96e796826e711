"""The servers of the image workloads, for one device: how to start each one on an image model.

Every server runs the same user code (benchmarks/apps/image_handler.py). localserve gets a project
written into the work directory: the model, that file as handler.py, and a localserve.yaml.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from onnx_models import BenchModel
from servers import APPS, Launch, ServerSpec, localserve_env

LaunchFn = Callable[[BenchModel, int, Path, Path], Launch]

LOCALSERVE_YAML = """\
- kind: api
  name: {name}
  model: {model}
  request_handler: handler.py
"""


def _starlette(device: str, workers: int) -> LaunchFn:
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        cmd = [sys.executable, "-m", "uvicorn", "image_app:create_app", "--factory", "--app-dir", str(APPS)]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers), "--no-access-log"]
        cmd += ["--log-level", "warning", "--loop", "uvloop", "--http", "httptools"]
        env = {**os.environ, "IMAGE_MODEL": str(model.path), "IMAGE_DEVICE": device, "IMAGE_WORKERS": str(workers)}
        return Launch(cmd, "/predict", env=env)

    return launch


def _litserve(device: str, workers: int) -> LaunchFn:
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        cmd = [sys.executable, str(APPS / "litserve_image_app.py"), "--model", str(model.path), "--device", device]
        cmd += ["--port", str(port), "--max-batch-size", "32", "--batch-timeout", "0.005", "--workers", str(workers)]
        body = json.dumps({"image": base64.b64encode(model.body).decode()}).encode()
        return Launch(cmd, "/predict", cwd=workdir, body=body, content_type="application/json")

    return launch


QUEUE = 512
"""``max_queue`` of every variant: room for the highest concurrency measured. The default (100 per replica,
Cortex's ``max_replica_concurrency``) answers the rest 503 at once, as Cortex did, and a one-replica
server at c=128 then counts quick 503s as throughput; the peers queue without bound."""


def localserve_config(
    model: BenchModel, device: str, batching: str | None, threads: int, cuda_options: str | None = None
) -> str:
    """The localserve.yaml of one variant, as a user would write it for this many clients."""
    config = LOCALSERVE_YAML.format(name=model.name, model=model.path.name) + f"  max_queue: {QUEUE}\n"
    if device == "cuda":
        config += "  compute: {gpu: 1}\n"
    if cuda_options and device == "cuda":
        config += f"  cuda_options: {cuda_options}\n"
    if batching:
        config += f"  batching: {batching}\n"
    if threads > 1:
        config += f"  threads_per_process: {threads}\n"
    return config


def _localserve(
    variant: str, device: str, batching: str | None, threads: int, replicas: int, cuda_options: str | None = None
) -> LaunchFn:
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        project = workdir / f"{variant}-{model.name}"
        project.mkdir(parents=True, exist_ok=True)
        target = project / model.path.name
        if not target.exists():
            target.symlink_to(model.path)  # ResNet-50 is 100 MB: not copied per variant
        shutil.copyfile(APPS / "image_handler.py", project / "handler.py")
        (project / "localserve.yaml").write_text(localserve_config(model, device, batching, threads, cuda_options))
        cmd = [sys.executable, "-m", "localserve", "serve", "--project", str(project), "--port", str(port)]
        # Always said: a GPU API without --replicas gets one replica per 4 cores (the default), which
        # would make the "one process" variants several.
        cmd += ["--host", "127.0.0.1", "--no-install", "--replicas", str(replicas)]
        return Launch(cmd, f"/{model.name}", env=localserve_env(root), cwd=project)

    return launch


def image_servers(device: str, replicas: int, workers: int) -> dict[str, ServerSpec]:
    """Every image server by name; ``replicas`` and ``workers`` size the multi-process variants."""
    b32 = "{max_batch_size: 32, batch_interval: 2ms}"
    b8 = "{max_batch_size: 8, batch_interval: 2ms}"
    specs = [
        ServerSpec(
            "starlette", "minimal Starlette + uvicorn, decode and session.run inline", False, _starlette(device, 1)
        ),
        ServerSpec("starlette-workers", f"the same, {workers} uvicorn workers", False, _starlette(device, workers)),
        ServerSpec(
            "litserve-batched",
            "LitServe, batching 32 / 5 ms, 4 workers, base64 JSON body",
            True,
            _litserve(device, 4),
        ),
        ServerSpec("localserve", "localserve serve, no batching", False, _localserve("plain", device, None, 1, 1)),
        ServerSpec(
            "localserve-exhaust",
            "localserve serve, no batching, cuda_options {cudnn_conv_algo_search: EXHAUSTIVE} (onnxruntime's default)",
            False,
            _localserve("exhaustive", device, None, 1, 1, "{cudnn_conv_algo_search: EXHAUSTIVE}"),
        ),
        ServerSpec(
            "localserve-batched",
            f"localserve serve, batching 32 / 2 ms, threads_per_process 4, --replicas {replicas}",
            True,
            _localserve("batched", device, b32, 4, replicas),
        ),
        ServerSpec(
            "localserve-batch-r1",
            "localserve serve, batching 32 / 2 ms, one replica, one thread: batching alone against localserve",
            True,
            _localserve("batch-r1", device, b32, 1, 1),
        ),
        ServerSpec(
            "localserve-t1",
            "localserve serve, batching 8 / 2 ms, threads_per_process 1",
            True,
            _localserve("t1", device, b8, 1, 1),
        ),
        ServerSpec(
            "localserve-t2",
            "localserve serve, batching 8 / 2 ms, threads_per_process 2",
            True,
            _localserve("t2", device, b8, 2, 1),
        ),
    ]
    return {spec.name: spec for spec in specs}

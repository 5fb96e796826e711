"""The peers that conflict with each other (MLServer, BentoML, Ray Serve), each in its own virtual environment.

    python benchmarks/peers.py setup [mlserver|bentoml|ray|all]     # make the venvs from PyPI (minutes)
    python benchmarks/peers.py status                                # which venvs are ready
    python benchmarks/peers.py smoke [mlserver|bentoml|ray|all]      # each peer, with and without batching, 1 s

The venvs live in ``$LOCALSERVE_PEERS_DIR`` (default ``~/.cache/localserve-peers``), one per peer; run.py
starts each peer with its own venv's Python, so none of them needs to import in the benchmark's own
environment. Importing this module registers the peers (and localserve's V2 route) in ``servers.SERVERS``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

from onnx_models import BenchModel
from servers import APPS, LOCALSERVE_BATCHING, SERVERS, Launch, ServerSpec, localserve_env

PEERS_DIR = Path(os.environ.get("LOCALSERVE_PEERS_DIR") or Path.home() / ".cache" / "localserve-peers")


@dataclass(frozen=True)
class Peer:
    name: str
    requirements: list[str]  # what pip installs into the peer's venv
    module: str  # imported to tell a ready venv

    @property
    def venv(self) -> Path:
        return PEERS_DIR / self.name

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def missing(self) -> str | None:
        """Why the peer cannot run (its venv absent or broken), or None."""
        if not self.python.exists():
            return f"no venv at {self.venv} (python benchmarks/peers.py setup {self.name})"
        proc = subprocess.run(
            [str(self.python), "-c", f"import {self.module}, onnxruntime"], capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return f"the venv at {self.venv} cannot import {self.module}: {last}"
        return None


# The versions measured in shared/PERFORMANCE.md (2026-11-25): MLServer 1.7.1, BentoML 1.4.40, Ray 2.60.
PEERS = {
    p.name: p
    for p in [
        Peer("mlserver", ["mlserver>=1.7,<1.8", "uvloop<0.22", "onnxruntime", "numpy"], "mlserver"),
        Peer("bentoml", ["bentoml>=1.4,<1.5", "onnxruntime", "numpy"], "bentoml"),
        Peer("ray", ["ray[serve]>=2.40,<3", "onnxruntime", "numpy"], "ray.serve"),
    ]
}


def v2_body(model: BenchModel) -> bytes:
    """The model's sample as an Open Inference Protocol JSON request (MLServer's and localserve's V2 route)."""
    features = json.loads(model.body)["input"]
    tensor = {"name": "input", "shape": [1, len(features)], "datatype": "FP32", "data": features}
    return json.dumps({"inputs": [tensor], "outputs": [{"name": "output"}]}).encode()


def _mlserver(batched: bool):  # type: ignore[no-untyped-def]
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        from procs import free_port

        folder = workdir / f"mlserver-{model.name}{'-batched' if batched else ''}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "mlserver_runtime.py").write_text((APPS / "mlserver_runtime.py").read_text())
        settings = {"host": "127.0.0.1", "http_port": port, "grpc_port": free_port(), "metrics_port": free_port()}
        (folder / "settings.json").write_text(json.dumps(settings))
        model_settings: dict = {
            "name": model.name,
            "implementation": "mlserver_runtime.OnnxModel",
            "parameters": {"uri": str(model.path)},
        }
        if batched:  # MLServer's adaptive batching, sized as localserve-batched
            model_settings.update(max_batch_size=32, max_batch_time=0.002)
        (folder / "model-settings.json").write_text(json.dumps(model_settings))
        cmd = [str(PEERS["mlserver"].venv / "bin" / "mlserver"), "start", str(folder)]
        return Launch(cmd, f"/v2/models/{model.name}/infer", cwd=folder, body=v2_body(model))

    return launch


def _bentoml(batched: bool):  # type: ignore[no-untyped-def]
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        service = f"bentoml_service:{'Batched' if batched else 'Plain'}"
        cmd = [str(PEERS["bentoml"].venv / "bin" / "bentoml"), "serve", service]
        cmd += ["--host", "127.0.0.1", "--port", str(port)]
        env = {**os.environ, "BENCH_MODEL": str(model.path), "BENTOML_DO_NOT_TRACK": "True"}
        body = json.dumps({"input": [json.loads(model.body)["input"]]}).encode() if batched else None
        return Launch(cmd, "/predict", env=env, cwd=APPS, body=body)

    return launch


def _ray(batched: bool):  # type: ignore[no-untyped-def]
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        cmd = [str(PEERS["ray"].python), str(APPS / "ray_app.py"), "--model", str(model.path), "--port", str(port)]
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        return Launch([*cmd, "--batched"] if batched else cmd, "/predict", env=env, cwd=workdir)

    return launch


def _localserve_v2(batched: bool):  # type: ignore[no-untyped-def]
    """localserve's V2 route on the model as a raw model (no handler), the body MLServer takes."""

    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        project = workdir / f"localserve-v2-{model.name}{'-batched' if batched else ''}"
        project.mkdir(parents=True, exist_ok=True)
        (project / model.path.name).write_bytes(model.path.read_bytes())
        config = f"- kind: api\n  name: {model.name}\n  model: {model.path.name}\n"
        (project / "localserve.yaml").write_text(config + (LOCALSERVE_BATCHING if batched else ""))
        cmd = [sys.executable, "-m", "localserve", "serve", "--project", str(project), "--port", str(port)]
        cmd += ["--no-install", "--host", "127.0.0.1"]
        path = f"/v2/models/{model.name}/infer"
        return Launch(cmd, path, env=localserve_env(root), cwd=project, body=v2_body(model))

    return launch


def _specs() -> list[ServerSpec]:
    def check(peer: str):  # type: ignore[no-untyped-def]
        return PEERS[peer].missing

    return [
        ServerSpec("localserve-v2", "localserve, V2 route, MLServer's body", False, _localserve_v2(False)),
        ServerSpec("localserve-v2-batched", "the same, batching 32 / 2 ms", True, _localserve_v2(True)),
        ServerSpec(
            "mlserver", "MLServer 1.7, custom ONNX runtime, V2 JSON", False, _mlserver(False), check("mlserver")
        ),
        ServerSpec(
            "mlserver-batched", "the same, adaptive batching 32 / 2 ms", True, _mlserver(True), check("mlserver")
        ),
        ServerSpec("bentoml", "BentoML 1.4, one worker", False, _bentoml(False), check("bentoml")),
        ServerSpec("bentoml-batched", "the same, batchable 32 / 1 s", True, _bentoml(True), check("bentoml")),
        ServerSpec("ray", "Ray Serve 2.x, one replica", False, _ray(False), check("ray")),
        ServerSpec("ray-batched", "the same, @serve.batch 32 / 2 ms", True, _ray(True), check("ray")),
    ]


PEER_SERVERS = {spec.name: spec for spec in _specs()}
SERVERS.update(PEER_SERVERS)


def setup(peer: Peer) -> int:
    print(f"[peers] {peer.name}: creating {peer.venv}", flush=True)
    venv.EnvBuilder(with_pip=True, clear=False).create(peer.venv)
    cmd = [str(peer.python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *peer.requirements]
    print(f"[peers] {' '.join(cmd)}", flush=True)
    rc = subprocess.run(cmd).returncode
    print(f"[peers] {peer.name}: {'ready' if rc == 0 and not peer.missing() else f'failed (rc {rc})'}", flush=True)
    return rc


def smoke(names: list[str], extra: list[str]) -> int:
    """run.py on the iris model, each named peer with and without batching, 1 s per cell."""
    servers = ",".join(f"{n},{n}-batched" for n in names)
    cmd = [sys.executable, str(Path(__file__).with_name("run.py")), "--only", "iris", "--servers", servers]
    cmd += ["--duration", "1", "--warmup", "0.2", "--concurrency", "1,4", *extra]
    print(f"[peers] {' '.join(cmd)}", flush=True)
    return subprocess.run(cmd).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["setup", "status", "smoke"])
    parser.add_argument("peers", nargs="*", default=["all"], help=f"of {', '.join(PEERS)} or all")
    args, extra = parser.parse_known_args(argv)
    names = list(PEERS) if args.peers == ["all"] else args.peers
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {', '.join(unknown)}; expected {', '.join(PEERS)} or all")
    if args.command == "setup":
        return max(setup(PEERS[n]) for n in names)
    if args.command == "status":
        for n in names:
            print(f"{n:<10}{PEERS[n].missing() or 'ready: ' + str(PEERS[n].venv)}")
        return 0
    return smoke(names, extra)


if __name__ == "__main__":
    sys.exit(main())

"""The servers under test: how to start each one on a model, and which peer each is compared with."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from onnx_models import BenchModel

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"

HANDLER = """\
def pre_inference(sample, signature, metadata):
    return {signature[0].name: [sample["input"]]}


def post_inference(prediction, signature, metadata):
    return {"output": prediction[0][0]}
"""

LOCALSERVE_YAML = """\
- kind: api
  name: {name}
  model: {model}
  request_handler: handler.py
"""

LOCALSERVE_BATCHING = "  batching: {max_batch_size: 32, batch_interval: 2ms}\n"


@dataclass(frozen=True)
class Launch:
    """How to start one server on one model, and the request it takes when not the model's own."""

    cmd: list[str]
    path: str
    env: dict[str, str] | None = None
    cwd: Path | None = None
    body: bytes | None = None
    content_type: str | None = None


@dataclass(frozen=True)
class ServerSpec:
    name: str
    description: str
    batched: bool
    launch: Callable[[BenchModel, int, Path, Path], Launch]  # (model, port, workdir, localserve_root)
    check: Callable[[], str | None] | None = None  # why it cannot run here, or None (the peers' venvs)
    root: Path | None = None  # the localserve checkout it serves from (None: --localserve-path)


def _floor(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
    cmd = [sys.executable, str(APPS / "starlette_app.py"), "--model", str(model.path), "--port", str(port)]
    return Launch([*cmd, "--no-model"], "/predict")


def _starlette(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
    cmd = [sys.executable, str(APPS / "starlette_app.py"), "--model", str(model.path), "--port", str(port)]
    return Launch(cmd, "/predict")


def _starlette_thread(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
    cmd = [sys.executable, str(APPS / "starlette_app.py"), "--model", str(model.path), "--port", str(port)]
    return Launch([*cmd, "--thread"], "/predict")


def _litserve(batched: bool) -> Callable[[BenchModel, int, Path, Path], Launch]:
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        cmd = [sys.executable, str(APPS / "litserve_app.py"), "--model", str(model.path), "--port", str(port)]
        if batched:
            cmd += ["--max-batch-size", "16", "--batch-timeout", "0.005"]
        return Launch(cmd, "/predict", cwd=workdir)

    return launch


def _localserve(batched: bool) -> Callable[[BenchModel, int, Path, Path], Launch]:
    def launch(model: BenchModel, port: int, workdir: Path, root: Path) -> Launch:
        project = workdir / f"localserve-{model.name}{'-batched' if batched else ''}"
        project.mkdir(parents=True, exist_ok=True)
        (project / model.path.name).write_bytes(model.path.read_bytes())
        (project / "handler.py").write_text(HANDLER)
        config = LOCALSERVE_YAML.format(name=model.name, model=model.path.name)
        (project / "localserve.yaml").write_text(config + (LOCALSERVE_BATCHING if batched else ""))
        cmd = [sys.executable, "-m", "localserve", "serve", "--project", str(project), "--port", str(port)]
        cmd += ["--no-install"]
        if "--host" in _serve_help(root):
            cmd += ["--host", "127.0.0.1"]
        return Launch(cmd, f"/{model.name}", env=localserve_env(root), cwd=project)

    return launch


SERVERS: dict[str, ServerSpec] = {
    spec.name: spec
    for spec in [
        ServerSpec("floor", "Starlette, no model call (HTTP + JSON floor)", False, _floor),
        ServerSpec("starlette", "minimal Starlette + uvicorn, session.run inline", False, _starlette),
        ServerSpec(
            "starlette-thread", "the same, its work on one worker thread (DESIGN's hop)", False, _starlette_thread
        ),
        ServerSpec("litserve", "LitServe, 1 CPU worker", False, _litserve(batched=False)),
        ServerSpec("litserve-batched", "LitServe, batching 16 / 5 ms", True, _litserve(batched=True)),
        ServerSpec("localserve", "localserve serve", False, _localserve(batched=False)),
        ServerSpec("localserve-batched", "localserve serve, max_batch_size=32, 2 ms", True, _localserve(batched=True)),
    ]
}


BASE = "@base"  # the suffix of a localserve row served from --baseline-path


def baseline(spec: ServerSpec, root: Path) -> ServerSpec:
    """``spec`` served from the checkout at ``root``: the same row, named ``<name>@base``."""
    return replace(spec, name=spec.name + BASE, description=f"{spec.description}, from {root}", root=root)


def localserve_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(root), env.get("PYTHONPATH", "")] if p)
    return env


_HELP: dict[Path, str] = {}


def _serve_help(root: Path) -> str:
    if root not in _HELP:
        proc = subprocess.run(
            [sys.executable, "-m", "localserve", "serve", "--help"],
            capture_output=True,
            text=True,
            env=localserve_env(root),
            cwd=root,
            timeout=60,
        )
        _HELP[root] = proc.stdout if proc.returncode == 0 else ""
        if proc.returncode != 0:
            _HELP[root] = "\0" + (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return _HELP[root]


def unavailable(name: str, root: Path) -> str | None:
    """Why a server cannot run here, or None when it can."""
    spec = SERVERS.get(name.removesuffix(BASE))
    if spec is not None and spec.check is not None:
        return spec.check()
    if name.startswith("litserve"):
        try:
            import litserve  # noqa: F401
        except ImportError as exc:
            return f"litserve is not installed ({exc})"
    if name.startswith("localserve"):
        if not (root / "localserve").is_dir():
            return f"no localserve package under {root} (pass --localserve-path)"
        text = _serve_help(root)
        if text.startswith("\0") or not text:
            return f"`localserve serve --help` fails under {root}: {text[1:] or 'no output'}"
        missing = [flag for flag in ("--project", "--port", "--no-install") if flag not in text]
        if missing:
            return f"`localserve serve` under {root} lacks {', '.join(missing)}"
    return None

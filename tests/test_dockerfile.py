"""The Dockerfile, read by a small parser and then run: its build context, install step, command and health check.

Nothing here compares the Dockerfile to a copy of itself. Each test takes what the Dockerfile says
(the stages, ``COPY``, the ``pip install`` step, ``ENTRYPOINT``/``CMD``, ``HEALTHCHECK``, ``ENV``) and
checks what it does: the context that ``.dockerignore`` leaves builds and installs, the installed
command serves a project on the exposed port, and the health check tells a live server from a dead one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from localserve.cli.serving import serve
from tests.conftest import free_port

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper-case: FROM, RUN, CMD ...
    value: str  # the arguments, continuation lines joined
    stage: str  # the stage it belongs to ('' before the first FROM)

    @property
    def json(self) -> list[str] | None:
        """The exec (JSON) form's list, or None for the shell form."""
        text = self.value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, list) else None
        return None


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile: comments dropped, ``\\`` continuations joined, stages tracked."""
    instructions: list[Instruction] = []
    stage = ""
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        if not full:
            continue
        keyword, _, value = full.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.search(r"\s+AS\s+(\S+)\s*$", value, re.IGNORECASE)
            stage = match.group(1) if match else value.split()[0]
        instructions.append(Instruction(keyword, value.strip(), stage))
    assert not pending, "the Dockerfile ends inside a continuation line"
    return instructions


def _flags_and_rest(value: str) -> tuple[dict[str, str], str]:
    flags = {}
    while value.startswith("--"):
        flag, _, value = value.partition(" ")
        name, _, setting = flag[2:].partition("=")
        flags[name] = setting
        value = value.lstrip()
    return flags, value


INSTRUCTIONS = parse_dockerfile((ROOT / "Dockerfile").read_text())


def _one(keyword: str) -> Instruction:
    found = [i for i in INSTRUCTIONS if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {len(found)}"
    return found[0]


def _expand(text: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), text)


def _stage_chain(variant: str) -> list[str]:
    """The stages an image of ``variant`` is built from, base first: each FROM that names a stage of this file."""
    args = dict(arg.value.split("=", 1) for arg in INSTRUCTIONS if arg.keyword == "ARG" and arg.stage == "")
    args["VARIANT"] = variant
    parents = {i.stage: _expand(i.value.split()[0], args) for i in INSTRUCTIONS if i.keyword == "FROM"}
    chain = [[i.stage for i in INSTRUCTIONS if i.keyword == "FROM"][-1]]
    while parents[chain[0]] in parents:
        chain.insert(0, parents[chain[0]])
    return chain


def image_env(variant: str) -> dict[str, str]:
    """The ENV an image of ``variant`` runs with (``$PATH`` of the base left as ``$PATH``)."""
    env: dict[str, str] = {"PATH": "$PATH"}
    for stage in _stage_chain(variant):
        for inst in INSTRUCTIONS:
            if inst.keyword == "ENV" and inst.stage == stage:
                for name, value in re.findall(r'(\w+)=("[^"]*"|\S+)', inst.value):
                    env[name] = value.strip('"')
    return env


def variants() -> list[str]:
    """The values of VARIANT that name a stage: ``FROM base-${VARIANT}`` resolves for each."""
    final = [i for i in INSTRUCTIONS if i.keyword == "FROM"][-1].value.split()[0]
    pattern = re.escape(final).replace(re.escape("${VARIANT}"), "(.+)")
    return [m.group(1) for i in INSTRUCTIONS if i.keyword == "FROM" and (m := re.fullmatch(pattern, i.stage))]


def requirements_of(extras: list[str]) -> list[Requirement]:
    """What ``pip install .[extras]`` asks for beyond the core dependencies, self-references followed."""
    table = PYPROJECT["project"]["optional-dependencies"]
    found: list[Requirement] = []
    todo = list(extras)
    while todo:
        extra = todo.pop()
        assert extra in table, f"the Dockerfile installs extra {extra!r}; pyproject.toml has {sorted(table)}"
        for text in table[extra]:
            requirement = Requirement(text)
            if requirement.name == PYPROJECT["project"]["name"]:
                todo += sorted(requirement.extras)
            else:
                found.append(requirement)
    return found


def test_parser_joins_continuations_and_reads_json_forms() -> None:
    parsed = parse_dockerfile(
        'ARG V=1\n# comment\nFROM a:1 AS one\nRUN echo a \\\n    && echo b\nCMD ["x", "y z"]\nFROM one\nUSER 0\n'
    )
    assert [(i.keyword, i.value, i.stage) for i in parsed] == [
        ("ARG", "V=1", ""),
        ("FROM", "a:1 AS one", "one"),
        ("RUN", "echo a && echo b", "one"),
        ("CMD", '["x", "y z"]', "one"),
        ("FROM", "one", "one"),
        ("USER", "0", "one"),
    ]
    assert parsed[3].json == ["x", "y z"]
    assert parsed[2].json is None


def test_the_default_variant_and_every_other_resolve_to_a_base_stage() -> None:
    found = variants()
    assert len(found) >= 2, found
    default = dict(arg.value.split("=", 1) for arg in INSTRUCTIONS if arg.keyword == "ARG" and arg.stage == "")[
        "VARIANT"
    ]
    assert default in found
    for variant in found:
        chain = _stage_chain(variant)
        assert len(chain) == 2, chain  # base-<variant>, then the final stage on top of it
        assert image_env(variant)["LOCALSERVE_EXTRAS"], f"{chain[0]} sets no LOCALSERVE_EXTRAS"


@pytest.mark.parametrize("variant", variants())
def test_each_variant_installs_the_runtimes_for_its_device(variant: str) -> None:
    requirements = requirements_of(image_env(variant)["LOCALSERVE_EXTRAS"].split(","))
    names = {r.name for r in requirements}
    cuda = {r.name for r in requirements if r.name.endswith("-gpu") or "and-cuda" in r.extras}
    assert "boto3" in names  # models on s3:// load in the image
    assert {"requests", "dill", "msgpack"} <= names  # what Cortex images had pre-installed (the cortex extra)
    assert names & {"onnxruntime", "onnxruntime-gpu"}, names
    if variant == "cpu-onnx":  # the lean one: no TensorFlow
        assert not names & {"tensorflow", "tensorflow-cpu"} and not cuda, names
        return
    assert names & {"tensorflow", "tensorflow-cpu"}, names
    if variant.startswith("cpu"):
        assert not cuda, f"the CPU image would pull CUDA builds: {sorted(cuda)}"
    else:
        assert cuda == {"onnxruntime-gpu", "tensorflow"}, cuda


def test_the_command_serves_every_address_on_the_exposed_port_and_the_health_check_asks_it() -> None:
    assert _one("ENTRYPOINT").json == ["localserve"]
    argv = _one("CMD").json
    assert argv is not None and argv[0] == serve.name
    # Where to listen is in the environment, so `docker run IMAGE serve --handler ...` (which
    # replaces the CMD) still answers on the published port.
    assert "--host" not in argv and "--port" not in argv, argv
    env = image_env("cpu")
    params = serve.make_context(serve.name, argv[1:], resilient_parsing=True, default_map=None).params
    assert env["LOCALSERVE_HOST"] == "0.0.0.0"  # reachable through `docker run -p`
    http_port, grpc_port = _one("EXPOSE").value.split()
    assert env["LOCALSERVE_PORT"] == http_port == str(params["port"])
    # The Open Inference Protocol over gRPC on KServe's port, in every variant (the grpc extra).
    assert env["LOCALSERVE_GRPC_PORT"] == grpc_port == "8081"
    for variant in ("gpu", "cpu", "cpu-onnx"):
        assert "grpc" in image_env(variant)["LOCALSERVE_EXTRAS"].split(","), variant
    assert argv[argv.index("--project") + 1] == _one("WORKDIR").value
    _, rest = _flags_and_rest(_one("HEALTHCHECK").value)
    keyword, _, command = rest.partition(" ")
    assert keyword == "CMD"
    assert "LOCALSERVE_PORT" in json.loads(command)[2]


def test_serve_reads_the_address_from_the_image_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALSERVE_HOST", "0.0.0.0")
    monkeypatch.setenv("LOCALSERVE_PORT", "9123")
    params = serve.make_context(serve.name, ["--handler", "main:handler"]).params
    assert (params["host"], params["port"]) == ("0.0.0.0", 9123)


def test_no_volume_in_an_image_meant_to_be_extended_and_user_code_runs_unprivileged_with_write_access() -> None:
    env = image_env("cpu")
    assert not [i for i in INSTRUCTIONS if i.keyword == "VOLUME"]
    user = _one("USER")
    assert user.stage == "final" and user.value not in ("root", "0") and not user.value.startswith(("root:", "0:"))
    final = [i for i in INSTRUCTIONS if i.stage == "final"]
    before_user = " && ".join(i.value for i in final[: final.index(user)] if i.keyword == "RUN")
    assert re.search(rf"\buseradd\b[^&]*\s{re.escape(user.value)}(\s|$)", before_user), "USER is never created"
    owned = re.findall(rf"\bchown\s+{re.escape(user.value)}(?::\S+)?\s+([^&]+)", before_user)
    owned_paths = {path for group in owned for path in group.split()}
    assert {env["LOCALSERVE_CACHE_DIR"], _one("WORKDIR").value} <= owned_paths, owned_paths
    assert all(i.keyword != "RUN" for i in final[final.index(user) :]), "everything after USER runs unprivileged"


def test_the_image_environment_hides_500_texts_whatever_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """``docker run IMAGE serve --handler main:handler`` replaces the CMD; the environment still hides 500 texts."""
    for name, value in image_env("cpu").items():
        if name.startswith("LOCALSERVE_"):
            monkeypatch.setenv(name, value)
    params = serve.make_context(serve.name, ["--handler", "main:handler"]).params
    assert params["hide_errors"] is True


def test_the_image_user_has_the_uid_and_gid_the_exported_pods_run_as() -> None:
    from localserve.export.common import POD_SECURITY

    final = " && ".join(i.value for i in INSTRUCTIONS if i.stage == "final" and i.keyword == "RUN")
    (useradd,) = re.findall(r"\buseradd\b[^&]*", final)
    (groupadd,) = re.findall(r"\bgroupadd\b[^&]*", final)
    uid = re.search(r"--uid (\d+)", useradd)
    gid = re.search(r"--gid (\d+)", useradd)
    group_gid = re.search(r"--gid (\d+)", groupadd)
    assert uid and gid and group_gid, (useradd, groupadd)
    assert int(uid.group(1)) == POD_SECURITY["runAsUser"]
    assert int(gid.group(1)) == int(group_gid.group(1)) == POD_SECURITY["runAsGroup"] == POD_SECURITY["fsGroup"]


def _onnxruntime_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


def test_onnxruntime_writes_nothing_to_the_log_on_a_read_only_home(tmp_path: Path) -> None:
    """On a read-only root ONNX Runtime cannot keep its telemetry device id and says so on stderr, in colour,
    which is no JSON log line; the image's environment turns that telemetry off."""
    pytest.importorskip("onnxruntime")
    unwritable = tmp_path / "a-file"  # no folder can be made under a file, not even by root
    unwritable.write_text("")
    env = {**os.environ, "HOME": str(unwritable), "XDG_CACHE_HOME": str(unwritable)}
    env.pop("ORT_DISABLE_TELEMETRY", None)
    probe = [sys.executable, "-c", "import onnxruntime"]
    before = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=60)
    if "Failed to persist telemetry device ID" not in before.stderr:  # the read-only home is what makes it speak
        pytest.skip(f"onnxruntime {_onnxruntime_version()} keeps no telemetry device id: {before.stderr!r}")
    image = {name: value for name, value in image_env("cpu").items() if name.startswith("ORT_")}
    after = subprocess.run(probe, env={**env, **image}, capture_output=True, text=True, timeout=60)
    assert (after.returncode, after.stderr) == (0, "")


# --- the build, for real -----------------------------------------------------------------------


def build_context() -> set[str]:
    """What ``docker build .`` sends, by Docker's own matcher (docker-py's); COPY skips the two control files."""
    from docker.utils.build import PatternMatcher

    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return set(PatternMatcher(patterns).walk(str(ROOT))) - {"Dockerfile", ".dockerignore"}


def test_the_build_context_is_the_package_and_what_pyproject_names() -> None:
    context = build_context()
    package = PYPROJECT["project"]["name"]
    packages = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert package in packages
    assert {path.split(os.sep)[0] for path in context} == {"pyproject.toml", PYPROJECT["project"]["readme"], *packages}
    assert not [p for p in context if "__pycache__" in p or p.endswith(".pyc")]
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / package).rglob("*.py")}
    assert sources <= context


def _install_step() -> tuple[list[str], dict[str, str]]:
    """The final stage's ``pip install`` of the source and where its ``COPY . <dir>`` put the context.

    The dependencies come first, from pyproject.toml alone (a layer that a code change leaves cached);
    the source is installed last, without dependencies.
    """
    copy = [i.value.split() for i in INSTRUCTIONS if i.keyword == "COPY" and i.stage == "final"]
    assert [c[:-1] for c in copy] == [["pyproject.toml"], ["."]], copy
    runs = [i.value for i in INSTRUCTIONS if i.keyword == "RUN" and i.stage == "final"]
    installs = [
        shlex.split(_expand(cmd.strip(), image_env("cpu")))
        for run in runs
        for cmd in run.split("&&")
        if "pip install" in cmd
    ]
    installs = [argv[argv.index("pip") :] for argv in installs]
    assert len(installs) == 2, installs
    deps, source = installs
    assert deps[2] == copy[0][-1].rstrip("/") + f"[{image_env('cpu')['LOCALSERVE_EXTRAS']}]", deps
    assert source[2:] == ["--no-deps", copy[1][-1]], source
    return ["pip", "install", source[3]], {copy[1][-1]: "context"}


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The CPU image's filesystem, made here: the build context copied, then the Dockerfile's ``pip install`` in a venv.

    The venv sees this environment's packages (a ``.pth`` line) and pip runs with ``--no-deps
    --no-build-isolation``, so nothing is downloaded: what is checked is that the context builds,
    installs, and its command runs. The image's paths map to folders here.
    """
    base = tmp_path_factory.mktemp("image")
    paths = {
        "/opt/venv": base / "venv",
        "/mnt/project": base / "project",
        "/var/cache/localserve": base / "cache",
    }
    argv, copied = _install_step()
    (context_dir,) = copied
    paths[context_dir] = base / "context"
    for rel in sorted(build_context()):
        source, target = ROOT / rel, base / "context" / rel
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(paths["/opt/venv"])], check=True)
    python = paths["/opt/venv"] / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "outer-environment.pth").write_text("\n".join(sorted(outer)) + "\n")
    assert argv[:2] == ["pip", "install"]
    target = argv[2]
    for image_path, here in paths.items():
        target = target.replace(image_path, str(here))
    install = [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet", target]
    done = subprocess.run(install, cwd=base, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    paths["/mnt/project"].mkdir()
    yield paths


def _in_image(argv: list[str], paths: dict[str, Path]) -> list[str]:
    mapped = []
    for arg in argv:
        for image_path, here in paths.items():
            arg = arg.replace(image_path, str(here))
        mapped.append(arg)
    return mapped


def _image_environ(paths: dict[str, Path]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "LOCALSERVE_URL")}
    for name, value in image_env("cpu").items():
        value = value.replace("$PATH", os.environ["PATH"])
        env[name] = _in_image([value], paths)[0]
    return env


def _image_command(paths: dict[str, Path], *args: str) -> list[str]:
    entrypoint = _one("ENTRYPOINT").json or []
    command = shutil.which(entrypoint[0], path=_image_environ(paths)["PATH"])
    assert command == str(paths["/opt/venv"] / "bin" / entrypoint[0]), command
    return [command, *entrypoint[1:], *args]


@pytest.mark.slow
def test_the_installed_entrypoint_runs_other_commands(image: dict[str, Path]) -> None:
    """``docker run IMAGE --help``: arguments replace CMD."""
    argv = _image_command(image, "--help")
    result = subprocess.run(argv, capture_output=True, text=True, env=_image_environ(image), cwd=image["/mnt/project"])
    assert result.returncode == 0, result.stderr
    assert re.search(r"^\s+serve\s", result.stdout, re.M), result.stdout


def _healthcheck(paths: dict[str, Path], port: int) -> subprocess.CompletedProcess[str]:
    _, rest = _flags_and_rest(_one("HEALTHCHECK").value)
    argv = json.loads(rest.partition(" ")[2])
    env = {**_image_environ(paths), "LOCALSERVE_PORT": str(port)}
    argv[0] = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.slow
def test_the_image_command_serves_the_mounted_project_and_the_health_check_sees_it(image: dict[str, Path]) -> None:
    """ENTRYPOINT + CMD as Docker runs them, on loopback and a free port instead of 0.0.0.0:8888."""
    (image["/mnt/project"] / "main.py").write_text(
        "def handler(request, context):\n"
        "    return {'status_code': 200, 'content_type': 'application/json', 'content': {'ok': True}}\n"
    )
    port = free_port()
    argv = _in_image(_image_command(image, *(_one("CMD").json or [])), image)
    argv += ["--handler", "main:handler", "--no-install"]
    env = {**_image_environ(image), "LOCALSERVE_HOST": "127.0.0.1", "LOCALSERVE_PORT": str(port)}
    proc = subprocess.Popen(
        argv, env=env, cwd=image["/mnt/project"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while _healthcheck(image, port).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"localserve serve did not become healthy:\n{proc.communicate()[0]}")
            time.sleep(0.2)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=b"{}", method="POST")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read()) == {"ok": True}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert _healthcheck(image, port).returncode != 0, "the health check passed with no server"


def test_oci_labels_name_the_package_and_every_pip_install_uses_the_cache_mount() -> None:
    """OCI labels say what pyproject.toml says (a version bump cannot leave them stale), and pip's cache
    is a build cache mount on every install, never a layer."""
    (label,) = [i for i in INSTRUCTIONS if i.keyword == "LABEL" and i.stage == "final"]
    labels = dict(token.split("=", 1) for token in shlex.split(label.value))
    prefix = "org.opencontainers.image."
    assert labels[prefix + "title"] == PYPROJECT["project"]["name"]
    assert labels[prefix + "version"] == PYPROJECT["project"]["version"]
    assert labels[prefix + "licenses"] == PYPROJECT["project"]["license"]["text"]
    assert "${VARIANT}" in labels[prefix + "description"]
    runs = [i.value for i in INSTRUCTIONS if i.keyword == "RUN" and i.stage == "final" and "pip install" in i.value]
    assert len(runs) == 2
    for run in runs:
        assert run.startswith("--mount=type=cache,target=/root/.cache/pip"), run
        assert "env -u PIP_NO_CACHE_DIR pip install" in run  # pip ignores that variable's value: unset, or no cache

"""glibc's malloc in ``localserve serve`` (engine/memory.py): its thresholds held while the models load, what
loading freed handed back, and what a request frees kept for the next request.

What a request frees is measured with the kernel's count of a thread's minor page faults
(``getrusage(RUSAGE_THREAD)``), not with time: a block handed back to the kernel and taken again faults every
page in again. What loading leaves is measured in the RSS, after ``malloc_trim``.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from localserve.engine.memory import set_by_environment, trim_heap
from tests.conftest import cli_env
from tests.test_e2e import server

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")

# Three float32 tensors of a decoded 224x224 image (602 KB each), made and freed 50 times on a thread
# other than the main one (an API's thread allocates in an arena of its own); the thread's page faults.
FAULTS = """
import resource, threading
import numpy as np

def faults():
    got = []
    def work():
        for _ in range(5):  # glibc's own adjustment of its thresholds has settled by now
            blocks = [np.ones(150_528, np.float32) for _ in range(3)]; del blocks
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for _ in range(50):
            blocks = [np.ones(150_528, np.float32) for _ in range(3)]; del blocks
        got.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return got[0]
"""
PAGES = 50 * 3 * 602_112 // 4096  # what the loop faults in when every block goes back to the kernel


def faults_in_a_fresh_process(setup: str) -> int:
    code = FAULTS + setup + "\nprint(faults())\n"
    done = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1])


@glibc_only
def test_freed_blocks_are_kept_for_the_next_request_once_set() -> None:
    before = faults_in_a_fresh_process("")
    after = faults_in_a_fresh_process(
        "from localserve.engine.memory import keep_freed_memory\nassert keep_freed_memory()\n"
    )
    assert before > PAGES / 2  # glibc's defaults: mapped and unmapped, or trimmed, each time
    assert after < PAGES / 50


HANDLER = (
    FAULTS
    + """
def handler(request, context):
    return {"status_code": 200, "content_type": "application/json", "content": {"faults": faults()}}
"""
)


@glibc_only
@pytest.mark.parametrize(
    ("environment", "kept"),
    [({}, True), ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072"}, False)],
    ids=["by-default", "the-users-own-thresholds"],
)
def test_serve_keeps_freed_memory_unless_the_environment_sets_the_thresholds(
    make_project, environment: dict[str, str], kept: bool
) -> None:
    project = make_project({"main.py": HANDLER})
    with server("--handler", "main:handler", cwd=project, **environment) as (url, _):
        faults = httpx.post(url, json={}, timeout=30).json()["faults"]
    assert (faults < PAGES / 50) is kept, faults


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, False),
        ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, False),
        ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=1048576"}, True),
        ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, True),
        ({"MALLOC_MMAP_THRESHOLD_": "131072"}, True),
        ({"MALLOC_TRIM_THRESHOLD_": "0"}, True),
        ({"MALLOC_TRIM_THRESHOLD_": ""}, False),
    ],
)
def test_the_users_own_thresholds_are_left_alone(environ: dict[str, str], expected: bool) -> None:
    assert set_by_environment(environ) is expected


# 800 blocks of 64 KB from the heap (under the mmap threshold), all freed but the last, which keeps the
# heap's top in use: glibc trims only a heap's top, so the 50 MB in between stay in the RSS until trimmed.
HELD = """
import numpy as np

def rss_mib():
    return int([line for line in open("/proc/self/status") if line.startswith("VmRSS")][0].split()[1]) / 1024

blocks = [np.ones(16_384, np.float32) for _ in range(800)]
last = blocks[-1]
del blocks
before = rss_mib()
"""


@glibc_only
def test_trim_heap_hands_back_what_was_freed_below_the_heaps_top() -> None:
    code = HELD + "from localserve.engine.memory import trim_heap\nassert trim_heap()\nprint(before - rss_mib())\n"
    done = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, check=True)
    assert float(done.stdout.split()[-1]) > 30  # of the 50 MB freed


def test_freezing_the_heap_trims_it_once_loaded(serve, make_project, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import localserve.engine.memory as memory
    from localserve.config.options import ServeOptions

    trimmed: list[int] = []
    monkeypatch.setattr(memory, "trim_heap", lambda: trimmed.append(gc.get_freeze_count()) or True)
    project = make_project({"main.py": "def handler(request, context):\n    return {}\n"})
    thresholds = gc.get_threshold()
    try:
        with serve(project, ServeOptions(freeze_heap=True), handler="main:handler") as client:
            assert client.post("/").status_code == 200
        assert len(trimmed) == 1 and trimmed[0] > 0  # once, after the heap was frozen
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    assert trim_heap() is (platform.libc_ver()[0] == "glibc")


# Whether the collector runs while the handler's module is imported (the load) and while it answers.
COLLECTOR = """
import gc

AT_LOAD = gc.isenabled()


def handler(request, context):
    content = {"at_load": AT_LOAD, "serving": gc.isenabled()}
    return {"status_code": 200, "content_type": "application/json", "content": content}
"""


@pytest.mark.parametrize(("flags", "at_load"), [((), False), (("--reload",), True)])
def test_serve_starts_with_the_collector_off_and_serves_with_it_on(
    make_project, flags: tuple[str, ...], at_load: bool
) -> None:
    project = make_project({"main.py": COLLECTOR})
    with server("--handler", "main:handler", *flags, cwd=project) as (url, _):
        assert httpx.post(url, json={}, timeout=30).json() == {"at_load": at_load, "serving": True}


def mlp(path: Path) -> Path:
    """256 -> 1024 -> 1024 -> 10 with Relu (5.3 MB of float32 weights): the benchmarks' mlp, built here."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    nodes, inits, x = [], [], "x"
    for i, (n_in, n_out) in enumerate([(256, 1024), (1024, 1024), (1024, 10)]):
        inits += [
            numpy_helper.from_array(rng.standard_normal((n_in, n_out), np.float32) * 0.05, f"w{i}"),
            numpy_helper.from_array(np.zeros(n_out, np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
        ]
        x = f"a{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


# What the engine does when a thread that loaded a model goes on to load another (a second model, a new version, a
# GPU's session per batch size): the first session frees its copy of the model file, which is what makes glibc raise
# its thresholds; then the second model and the warm-up of every batch size; then malloc_trim. Prints how much the
# second model and its warm-up grew the RSS, in MiB.
LOAD = """
import sys, threading
from pathlib import Path
import numpy as np
from localserve.engine.memory import hold_thresholds, trim_heap
from localserve.config.options import ApiOptions
from localserve.runtimes.onnx import OnnxModel

def rss_mib():
    trim_heap()
    return int([line for line in open("/proc/self/status") if line.startswith("VmRSS")][0].split()[1]) / 1024

if sys.argv[2] == "held":
    assert hold_thresholds()
grew, models = [], []

def load():
    models.append(OnnxModel(Path(sys.argv[1]), ApiOptions()))
    before = rss_mib()
    model = OnnxModel(Path(sys.argv[1]), ApiOptions())
    for size in (1, 2, 4, 8, 16, 32):
        model.run({"x": np.zeros((size, 256), np.float32)}, bucket=size)
    grew.append(rss_mib() - before)
    models.append(model)

thread = threading.Thread(target=load)
thread.start()
thread.join()
print(grew[0])
"""


def rss_growth_of_loading(path: Path, thresholds: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(path), thresholds], env=cli_env(), capture_output=True, text=True, check=True
    )
    return float(done.stdout.split()[-1])


@glibc_only
def test_held_thresholds_keep_what_loading_frees_out_of_the_rss(tmp_path: Path) -> None:
    path = mlp(tmp_path / "mlp.onnx")
    weights = path.stat().st_size / 2**20  # what the second model's session holds
    held = rss_growth_of_loading(path, "held")
    raised = rss_growth_of_loading(path, "glibc's")  # glibc raised its thresholds as the first session freed
    assert held < weights + 2, held
    assert raised > held + weights / 2, (raised, held)


def test_serve_holds_the_thresholds_while_loading_and_raises_them_once_loaded(
    serve, make_project, monkeypatch: pytest.MonkeyPatch
) -> None:
    import localserve.engine.core as core
    from localserve.config.options import ServeOptions
    from localserve.engine.api import ApiRuntime

    steps: list[str] = []
    load = ApiRuntime.load

    async def recorded_load(self: ApiRuntime) -> None:
        steps.append("load")
        await load(self)

    monkeypatch.setattr(ApiRuntime, "load", recorded_load)
    monkeypatch.setattr(core, "hold_thresholds", lambda: steps.append("hold") or True)
    monkeypatch.setattr(core, "keep_freed_memory", lambda: steps.append("keep") or True)
    project = make_project({"main.py": "def handler(request, context):\n    return {}\n"})
    with serve(project, ServeOptions(tune_malloc=True), handler="main:handler") as client:
        assert client.post("/").status_code == 200
    assert steps == ["hold", "load", "keep"]
    steps.clear()
    with serve(project, ServeOptions(), handler="main:handler") as client:  # run and localserve.testing
        assert client.post("/").status_code == 200
    assert steps == ["load"]

"""glibc's malloc keeps what a request frees for the next request (``localserve serve``; engine/memory.py).

Measured with the kernel's count of a thread's minor page faults (``getrusage(RUSAGE_THREAD)``),
not with time: a block handed back to the kernel and taken again faults every page in again.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import httpx
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

    import localserve.engine.core as core
    from localserve.config.options import ServeOptions

    trimmed: list[int] = []
    monkeypatch.setattr(core, "trim_heap", lambda: trimmed.append(gc.get_freeze_count()) or True)
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

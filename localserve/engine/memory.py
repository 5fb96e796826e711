"""glibc's malloc in ``serve``: its thresholds held at their defaults while the models load (``hold_thresholds``), what
loading freed handed back (``trim_heap``), and what a request frees kept for the next request (``keep_freed_memory``).

Loading: glibc raises its mmap threshold (and the trim threshold, to twice that) to the size of any mapped block that is
freed. Loading frees such blocks early (onnxruntime's copy of a model file), so the weights and copies that follow are
carved from the loading thread's arena, and what of them is freed stays in the RSS, ``malloc_trim`` or not. Setting a
threshold turns glibc's raising off.

Serving: a request that allocates and frees tensors of hundreds of kilobytes (a decoded 224x224 image) would, under
glibc's 128 KB defaults, have them mapped and unmapped and the heap's top trimmed every time, so the next request faults
every page in again. An unbatched API never frees the large block that makes glibc raise them itself, so the thresholds
are set to what that raising reaches at most (32 MB, and twice that for the trim).

The cost is memory kept instead of returned: up to ``TRIM_THRESHOLD`` of free heap per malloc arena (one per thread that
allocates, up to 8 per core), and freed blocks under ``MMAP_THRESHOLD`` reused rather than unmapped. The figures:
benchmarks/README.md, "malloc's thresholds".
"""

from __future__ import annotations

import ctypes
import functools
import gc
import logging
import platform
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("localserve")

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: its dynamic threshold's ceiling
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc sets the trim threshold to when it raises the mmap threshold
LOAD_THRESHOLD = 128 * 1024  # glibc's default for both (DEFAULT_MMAP_THRESHOLD_MIN, DEFAULT_TRIM_THRESHOLD)
ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")


def set_by_environment(environ: Mapping[str, str]) -> bool:
    """Whether the environment already sets glibc's thresholds (``GLIBC_TUNABLES`` or the older variables):
    then they are the user's, and neither ``hold_thresholds`` nor ``keep_freed_memory`` is called (the CLI reads
    the environment: ``ServeOptions.tune_malloc``)."""
    tunables = environ.get("GLIBC_TUNABLES", "")
    return any(environ.get(name) for name in ENVIRONMENT) or any(name in tunables for name in TUNABLES)


def trim_heap() -> bool:
    """Hand back to the kernel the memory that loading freed (``malloc_trim``); False where the C library is not
    glibc. glibc keeps freed blocks in its heaps, and trims only their tops: what loading left in between
    stays in the RSS. Once loaded (``freeze_heap``, after its collection), the 4.3 MB mlp's server
    went from 91 to 86 MiB (89 against 93-94 after traffic at c=64); batched, from 104 to 98-102, and after
    traffic 100-105 against 106: there what requests free is kept for the next ones (``keep_freed_memory``)."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def hold_thresholds() -> bool:
    """Before loading: glibc's mmap and trim thresholds set to their defaults, so that glibc does not raise them
    while the models load (see the module's text); False where the C library is not glibc."""
    return _set_thresholds(LOAD_THRESHOLD, LOAD_THRESHOLD)


def keep_freed_memory() -> bool:
    """Once loaded: glibc's mmap and trim thresholds raised for serving (see the module's text); False where the C
    library is not glibc."""
    done = _set_thresholds(MMAP_THRESHOLD, TRIM_THRESHOLD)
    if done:
        log.debug("malloc: freed blocks under %d MiB are kept for reuse", MMAP_THRESHOLD >> 20)
    return done


def _set_thresholds(mmap_threshold: int, trim_threshold: int) -> bool:
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(libc.mallopt(M_TRIM_THRESHOLD, trim_threshold))


@functools.cache
def _glibc() -> Any:
    """The process's C library when it is glibc (loaded once); None elsewhere (musl, macOS: no such calls)."""
    return ctypes.CDLL(None) if platform.libc_ver()[0] == "glibc" else None


GEN0_THRESHOLD = 10_000  # allocations between two collections of the youngest generation once serving


def freeze_heap() -> None:
    """Once every API is loaded: collect, leave what loading made out of later collections (``gc.freeze``),
    collect the youngest generation every ``GEN0_THRESHOLD`` allocations (the default 700 paused the loop
    every few dozen requests in flight), turn the collector on (``serve`` starts with it off), and hand what
    loading freed back to the kernel."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
    gc.enable()
    trim_heap()
    log.debug("garbage collector: %d objects frozen after loading", gc.get_freeze_count())

"""The disk side of the model cache: remote copies fetched once, kept to ``disk_cache_size`` least recently used
first (never one in memory or being loaded), replaced only by a poll that succeeded, and never fetched where
the caller may not wait. Real files under ``tmp_path`` stand in for the download cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.errors import WouldFetch
from localserve.runtimes.diskcache import DiskCache


class Remote:
    """A download cache: each fetch of a location writes a new copy and counts it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fetches: list[str] = []

    def resolve(self, location: str) -> Path:
        self.fetches.append(location)
        path = self.root / f"{location}-{len(self.fetches)}"
        path.write_text(location)
        return path


def test_a_copy_is_fetched_once_and_never_on_a_caller_that_may_not_wait(tmp_path: Path) -> None:
    remote = Remote(tmp_path)
    cache = DiskCache(None, remote.resolve)
    with pytest.raises(WouldFetch):
        cache.local("a", fetch=False)
    first = cache.local("a")
    assert cache.local("a") == cache.local("a", fetch=False) == first
    assert remote.fetches == ["a"] and cache.holds("a") and not cache.holds("b")


def test_past_the_limit_the_least_recently_used_copy_goes_but_not_one_in_use(tmp_path: Path) -> None:
    remote = Remote(tmp_path)
    cache = DiskCache(2, remote.resolve)
    a, b, c = (cache.local(name) for name in "abc")
    cache.local("a")  # used again: b is now the least recently used
    assert cache.trim(in_memory=set()) == ["b"]
    assert not b.exists() and a.exists() and c.exists()
    cache.local("d")
    with cache.using("a"):
        assert cache.trim(in_memory={"c"}) == ["d"]  # a is being loaded, c is in memory
    assert cache.local("b") != b and remote.fetches.count("b") == 2  # a trimmed copy is fetched again


def test_without_a_limit_nothing_is_trimmed_or_deleted(tmp_path: Path) -> None:
    remote = Remote(tmp_path)
    cache = DiskCache(None, remote.resolve)
    old = cache.local("a")
    assert cache.trim(set()) == []
    cache.adopt({"a": remote.resolve("a")})
    assert old.exists()


def test_a_successful_poll_replaces_changed_copies_and_a_failed_one_deletes_what_it_fetched(tmp_path: Path) -> None:
    remote = Remote(tmp_path)
    cache = DiskCache(5, remote.resolve)
    old = cache.local("a")
    fresh = {"a": remote.resolve("a")}  # a new ETag: a new copy
    cache.adopt(fresh)
    assert not old.exists() and cache.local("a", fetch=False) == fresh["a"]
    failed = {"a": remote.resolve("a")}
    cache.discard(failed)
    assert not failed["a"].exists() and fresh["a"].exists()  # the copy held stays

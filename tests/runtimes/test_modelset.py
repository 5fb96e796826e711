"""A ModelSet of remote models (zips on a real HTTPS server on loopback, fetched into a real download cache)
under polls that fail, downloads that race loads, and readers that must not download (the event loop)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from localserve.config.options import ApiOptions
from localserve.config.schema import ModelPath, ModelsConfig
from localserve.errors import LocalServeError, WouldFetch
from localserve.handlers.clients import describe_models
from localserve.protocols.http import render_error
from localserve.protocols.v2.multi import NeedsLoad, locate
from localserve.runtimes import load_model
from localserve.runtimes.modelset import ModelSet
from localserve.runtimes.sources import cache_entry, resolve_model
from localserve.runtimes.versions import Source
from tests.multimodel.helpers import X, expected, models_dir
from tests.multimodel.test_remote import Gate, https_site, zip_versions  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow


def open_onnx(files: Path, source: Source) -> Any:
    """A version folder's one ``.onnx`` file, loaded by ONNX Runtime (a missing file fails here, as it would)."""
    return load_model("onnx", sorted(files.glob("*.onnx"))[0], ApiOptions())


def logits(model: Any) -> list[list[float]]:
    return model.predict(X)[1].tolist()


class Remote:
    """Models served as zips of version folders by the HTTPS server, and a ModelSet of them."""

    def __init__(self, tmp_path: Path, site: tuple[Path, str, Gate]) -> None:
        self.tmp_path, (self.site, self.url, self.gate) = tmp_path, site
        self.cache = tmp_path / "cache"
        self.loop = threading.get_ident()  # the test's thread plays the event loop: it may never download
        self.fetched: list[str] = []

    def publish(self, model: str, versions: list[int], mtime: int | None = None) -> None:
        zip_versions(self.site / f"{model}.zip", model, versions, self.tmp_path / f"built-{model}-{versions}")
        if mtime is not None:  # another Last-Modified, whatever the clock: a new copy to fetch
            os.utime(self.site / f"{model}.zip", (mtime, mtime))

    def resolve(self, location: str) -> Path:
        if "://" in location:
            assert threading.get_ident() != self.loop, f"{location} downloaded on the event loop"
            self.fetched.append(location)
        return resolve_model(location, self.tmp_path, cache_root=self.cache, progress=False)

    def models(self, names: str, cache_size: int, disk_cache_size: int, opener: Any = open_onnx) -> ModelSet:
        paths = tuple(ModelPath(m, f"{self.url}/{m}.zip") for m in names)
        config = ModelsConfig(paths=paths, cache_size=cache_size, disk_cache_size=disk_cache_size)
        return ModelSet(config, opener, self.resolve, None, lambda path: cache_entry(path, self.cache))

    def copies(self) -> int:
        return len(list((self.cache / "models").iterdir()))

    def on_a_thread(self, call: Any) -> Any:
        """``call()`` on a worker thread (where downloads may happen), its result or exception returned."""
        out: list[Any] = []

        def run() -> None:
            try:
                out.append(call())
            except Exception as exc:
                out.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        return out[0]


@pytest.fixture
def remote(tmp_path: Path, https_site: tuple[Path, str, Gate]) -> Remote:  # noqa: F811
    return Remote(tmp_path, https_site)


def test_a_failed_poll_changes_nothing_and_the_next_one_evicts_nothing(remote: Remote) -> None:
    remote.publish("a", [1])
    remote.publish("b", [1])
    models = remote.models("ab", cache_size=2, disk_cache_size=2)
    remote.on_a_thread(lambda: (models.get("a"), models.get("b")))
    remote.gate.broken.add("/b.zip")  # b's read fails during this poll
    assert remote.on_a_thread(lambda: models.refresh(remote=True)) == []
    assert models.loaded() == [("a", 1), ("b", 1)]
    remote.gate.broken.clear()
    assert remote.on_a_thread(lambda: models.refresh(remote=True)) == []  # nothing changed remotely
    assert models.loaded() == [("a", 1), ("b", 1)]
    assert [e for e in models.events if e["event"] in ("evict", "disk-evict")] == []
    assert remote.copies() == 2
    # The next use fetches nothing: both copies are still counted (and so trimmed when they must be).
    remote.fetched.clear()
    assert [logits(remote.on_a_thread(lambda m=m: models.get(m)[2])) for m in "ab"] == [expected(m, 1) for m in "ab"]
    assert remote.fetched == []


def test_a_failed_poll_keeps_the_old_copy_of_a_changed_model_until_a_poll_succeeds(remote: Remote) -> None:
    remote.publish("a", [1, 2])
    remote.publish("b", [1])
    models = remote.models("ab", cache_size=1, disk_cache_size=2)
    remote.on_a_thread(lambda: (models.get("a", 2), models.get("b", 1)))  # a leaves memory, keeps its copy
    remote.publish("a", [1, 2, 3], mtime=1_700_000_000)  # a re-uploaded ...
    remote.gate.broken.add("/b.zip")  # ... and b unreadable during the poll
    assert remote.on_a_thread(lambda: models.refresh(remote=True)) == []
    assert remote.copies() == 2  # a's new copy, fetched for the failed poll, is gone; its old one stays
    _, version, model = remote.on_a_thread(lambda: models.get("a", 1))  # from the old listing and its copy
    assert (version, logits(model)) == (1, expected("a", 1))
    remote.gate.broken.clear()
    assert remote.on_a_thread(lambda: models.refresh(remote=True)) == [
        {"model": "a", "version": 3, "change": "added"},
        {"model": "a", "version": 1, "change": "replaced"},  # (in memory: its files are the new copy's)
    ]
    assert remote.copies() == 2  # the old copy of a was deleted once the new one replaced it
    _, version, model = remote.on_a_thread(lambda: models.get("a"))
    assert (version, logits(model)) == (3, expected("a", 3))


def test_a_copy_being_loaded_is_not_trimmed_by_another_models_download(remote: Remote) -> None:
    remote.publish("a", [1])
    remote.publish("b", [1])
    a_opening, b_loaded = threading.Event(), threading.Event()

    def opener(files: Path, source: Source) -> Any:
        if source.name == "a":
            a_opening.set()
            assert b_loaded.wait(60)  # the bound only catches a hang
        return open_onnx(files, source)

    models = remote.models("ab", cache_size=1, disk_cache_size=1, opener=opener)
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(remote.on_a_thread(lambda: models.get("a"))))
    thread.start()
    assert a_opening.wait(60)  # a fetched, its load under way
    _, _, b = remote.on_a_thread(lambda: models.get("b"))  # b's download passes disk_cache_size: 1
    b_loaded.set()
    thread.join()
    assert not isinstance(out[0], Exception), out[0]
    assert (logits(b), logits(out[0][2])) == (expected("b", 1), expected("a", 1))
    assert models.loaded() == [("a", 1)]
    assert remote.copies() == 1  # b's copy went once a was in memory and b was not
    assert [(e["event"], e["model"]) for e in models.events] == [
        ("load", "b"),
        ("load", "a"),
        ("evict", "b"),
        ("disk-evict", "b"),
    ]


def test_describing_and_listing_during_a_poll_of_a_remote_dir_download_nothing(remote: Remote) -> None:
    import zipfile

    folder = models_dir(remote.tmp_path / "built", {"a": [1, 2], "b": [3]})
    with zipfile.ZipFile(remote.site / "models.zip", "w") as archive:
        for path in sorted(folder.rglob("*.onnx")):
            archive.write(path, path.relative_to(folder).as_posix())
    config = ModelsConfig(dir=f"{remote.url}/models.zip", cache_size=1, disk_cache_size=1)
    models = ModelSet(config, open_onnx, remote.resolve, None, lambda path: cache_entry(path, remote.cache))
    assert remote.on_a_thread(models.names) == ["a", "b"]  # at load, off the loop
    remote.gate.path = "/models.zip"
    poll = threading.Thread(target=lambda: models.refresh(remote=True))
    poll.start()
    try:
        assert remote.gate.entered.wait(60)  # the poll's download is under way
        # The event loop meanwhile (GET /<api>, /v2/models/stats, a V2 404's list): the last listing, no download.
        assert models.names() == ["a", "b"]
        assert describe_models(models)["available"] == {"a": [1, 2], "b": [3]}
    finally:
        remote.gate.release.set()
        poll.join()
    assert [e["changes"] for e in models.events if e["event"] == "refresh"] == [[]]


def test_without_fetch_a_trimmed_copy_is_never_downloaded_on_the_loop(remote: Remote) -> None:
    remote.publish("a", [1, 2])
    remote.publish("b", [1])
    models = remote.models("ab", cache_size=1, disk_cache_size=1)
    remote.on_a_thread(lambda: (models.get("a"), models.get("b")))  # b's load trims a's copy
    assert [e["model"] for e in models.events if e["event"] == "disk-evict"] == ["a"]
    remote.fetched.clear()
    with pytest.raises(WouldFetch):  # what V2's find turns into a load on a thread (NeedsLoad)
        models.pick("a", "latest", fetch=False)
    assert models.pick("b", "latest", fetch=False)[1] == 1
    assert describe_models(models)["available"] == {"a": [1, 2], "b": [1]}  # as last read
    assert remote.fetched == []


def test_a_model_still_not_in_memory_after_two_loads_is_a_503_to_retry() -> None:
    loads: list[str] = []

    def find() -> Any:
        raise NeedsLoad("multi.a", lambda: loads.append("load"))  # evicted again each time by other requests

    with pytest.raises(LocalServeError) as caught:
        asyncio.run(locate(find, NeedsLoad("multi.a", lambda: loads.append("load"))))
    assert loads == ["load", "load"]
    reply = render_error(caught.value, None, v2=True)
    assert reply.status == 503
    assert (b"retry-after", b"1") in reply.headers
    assert caught.value.message == (
        "Model 'multi.a' is not ready: it changed while it loaded (a new version, or its copy deleted); retry."
    )


def test_a_request_that_fetches_during_a_poll_keeps_what_it_fetched_and_the_polls_copies(remote: Remote) -> None:
    for model in "abc":
        remote.publish(model, [1])
    models = remote.models("abc", cache_size=1, disk_cache_size=2)
    remote.on_a_thread(lambda: [models.get(m) for m in "cab"])  # c's copy is trimmed: the poll will not read c
    remote.publish("c", [1, 2], mtime=1_700_000_000)  # c changes meanwhile
    remote.gate.path = "/b.zip"
    changes: list[Any] = []
    poll = threading.Thread(target=lambda: changes.append(models.refresh(remote=True)))
    poll.start()
    try:
        assert remote.gate.entered.wait(60)  # the poll has read a again, and waits for b
        _, version, model = remote.on_a_thread(lambda: models.get("c"))  # fetches c anew; trims past the limit
        assert (version, logits(model)) == (2, expected("c", 2))
    finally:
        remote.gate.release.set()
        poll.join()
    assert changes == [[]]
    # What the poll read (a) and what the request fetched (c) are both still there, listed as they are.
    for model, version in (("a", 1), ("c", 1), ("c", 2), ("b", 1)):
        _, _, loaded = remote.on_a_thread(lambda m=model, v=version: models.get(m, v))
        assert logits(loaded) == expected(model, version)
    assert remote.copies() == 2

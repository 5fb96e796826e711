"""``/mnt/project`` for user code (Cortex 0.8-0.9 docs, *Request handlers*: ``open('/mnt/project/config.json')``),
without root.

Cortex mounted the project at ``/mnt/project`` in every API container. Locally, the first that works:

1. ``native``: ``/mnt/project`` already is the project (the Docker image mounts it there); the packaged view, a mirror
of links to it, is never put over it. 2. ``mount``: a private mount namespace, made before any thread starts
(``unshare(2)`` refuses a multi-threaded process), in a user namespace mapping only the caller's uid and gid unless
root. Mounts are made private first; the project is bind-mounted on ``/mnt/project`` (``/mnt`` becoming a tmpfs with its
entries bound back when the folder is missing). Every file API sees it, C extensions included. 3. ``redirect``: where
the OS refuses namespaces, Python's file functions (``open``, ``os.open``, ``os.stat``, ``os.lstat``, ``os.access``,
``os.listdir``, ``os.scandir``, ``os.readlink``, ``os.chdir``, ``os.path.realpath``, and through them ``pathlib``)
rewrite paths under ``/mnt/project``, all one view of the packaged links. C code that opens files itself does not see
it. ``uninstall_redirect`` puts every original back.
"""

from __future__ import annotations

import builtins
import ctypes
import errno
import glob
import io
import logging
import os
import pathlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("localserve")

MNT_PROJECT = "/mnt/project"
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def provide_mnt_project(workdir: Path, *, project: Path | None = None, allow_namespace: bool = True) -> str:
    """Make ``/mnt/project`` show ``workdir`` to this process and its children; returns the way chosen.

    ``project`` is the folder that ``workdir`` mirrors (the packaged view), when it is one.
    """
    workdir = workdir.resolve()
    try:
        if Path(MNT_PROJECT).resolve() in (workdir, (project or workdir).resolve()):
            return "native"
    except OSError:
        pass
    if allow_namespace and sys.platform == "linux":
        try:
            mount_namespace(workdir)
        except OSError as exc:
            log.info("/mnt/project: no private mount namespace here (%s); redirecting Python's file functions", exc)
        else:
            log.info("/mnt/project: the project is mounted there in a private mount namespace")
            return "mount"
    install_redirect(workdir)
    return "redirect"


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def mount_namespace(workdir: Path) -> None:
    """Enter a private mount namespace where ``/mnt/project`` is ``workdir``; OSError when the OS refuses."""
    if _threads() > 1:
        raise OSError(errno.EINVAL, "the process already runs several threads, and unshare(2) needs one")
    libc = ctypes.CDLL(None, use_errno=True)

    def call(result: int, what: str) -> None:
        if result != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"{what}: {os.strerror(code)}")

    uid, gid = os.getuid(), os.getgid()
    if os.geteuid() != 0 or libc.unshare(CLONE_NEWNS) != 0:
        call(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as file:
                file.write(text)
    # Private first: no mount made below may propagate outside this process tree.
    call(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    target = Path(MNT_PROJECT)
    if not target.is_dir():
        _mnt_tmpfs(libc, call)
    call(libc.mount(os.fsencode(workdir), os.fsencode(target), None, MS_BIND | MS_REC, None), "bind mount")


def _mnt_tmpfs(libc: Any, call: Callable[[int, str], None]) -> None:
    """A tmpfs on /mnt holding ``project`` and, bind-mounted back, whatever /mnt held before."""
    if not os.path.isdir("/mnt"):
        raise OSError(errno.ENOENT, "/mnt does not exist")
    fd = os.open("/mnt", os.O_RDONLY | os.O_DIRECTORY)
    try:
        entries = os.listdir(fd)
        call(libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, b"mode=0755"), "tmpfs on /mnt")
        for name in entries:
            source = f"/proc/self/fd/{fd}/{name}"
            target = f"/mnt/{name}"
            try:
                if os.path.islink(source):
                    os.symlink(os.readlink(source), target)
                    continue
                if os.path.isdir(source):
                    os.mkdir(target)
                else:
                    open(target, "wb").close()
                call(libc.mount(os.fsencode(source), os.fsencode(target), None, MS_BIND | MS_REC, None), target)
            except OSError as exc:
                log.warning("/mnt/project: could not keep /mnt/%s visible: %s", name, exc)
        os.mkdir(MNT_PROJECT)
    finally:
        os.close(fd)


_PREFIX = MNT_PROJECT
_installed: Path | None = None


def _rewrite(path: Any) -> Any:
    target = _installed
    if target is None or isinstance(path, int):
        return path
    try:
        raw = os.fspath(path)
    except TypeError:
        return path
    if isinstance(raw, bytes):
        if raw == _PREFIX.encode() or raw.startswith(_PREFIX.encode() + b"/"):
            return os.fsencode(target) + raw[len(_PREFIX) :]
        return path
    if raw == _PREFIX or raw.startswith(_PREFIX + "/"):
        return str(target) + raw[len(_PREFIX) :]
    return path


def _wrap(func: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(func, "__localserve_mnt__", False):
        return func

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (_rewrite(args[0]), *args[1:])
        for key in ("file", "path", "filename"):
            if key in kwargs:
                kwargs[key] = _rewrite(kwargs[key])
        return func(*args, **kwargs)

    return _mark(wrapper, func)


def _mark(wrapper: Callable[..., Any], func: Callable[..., Any]) -> Callable[..., Any]:
    wrapper.__name__ = getattr(func, "__name__", "wrapper")
    wrapper.__doc__ = func.__doc__
    wrapper.__localserve_mnt__ = True  # type: ignore[attr-defined]
    return wrapper


class _Entry:
    """An ``os.DirEntry`` of the project whose ``path`` keeps the ``/mnt/project`` it was listed under."""

    __slots__ = ("_entry", "path")

    def __init__(self, entry: os.DirEntry[Any], path: Any) -> None:
        self._entry = entry
        self.path = path

    def __getattr__(self, name: str) -> Any:  # name, is_dir(), is_file(), is_symlink(), stat(), inode()
        return getattr(self._entry, name)

    def __fspath__(self) -> Any:
        return self.path

    def __repr__(self) -> str:
        return f"<DirEntry {self._entry.name!r}>"


class _Entries:
    """What ``os.scandir`` returns (an iterator and a context manager), its entries as ``_Entry``."""

    def __init__(self, entries: Any, listed: Any) -> None:
        self._entries = entries
        self._listed = listed

    def __iter__(self) -> _Entries:
        return self

    def __next__(self) -> _Entry:
        entry = next(self._entries)
        return _Entry(entry, os.path.join(self._listed, entry.name))

    def __enter__(self) -> _Entries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._entries.close()


def _wrap_scandir(func: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(func, "__localserve_mnt__", False):
        return func

    def scandir(path: Any = ".") -> Any:
        target = _rewrite(path)
        if target is path:
            return func(path)
        return _Entries(func(target), os.fspath(path))

    return _mark(scandir, func)


_replaced: dict[tuple[Any, str], Any] = {}  # (owner, attribute) -> what it held before install_redirect
_INHERITED = object()  # a class's attribute that came from a base class: deleted again on uninstall


def _replace(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """``owner.name`` wrapped by ``make`` (a class's attribute stays a staticmethod), the original kept."""
    current = getattr(owner, name)
    if getattr(current, "__localserve_mnt__", False):
        return
    is_class = isinstance(owner, type)
    _replaced.setdefault((owner, name), vars(owner).get(name, _INHERITED) if is_class else current)
    wrapped = make(current)
    setattr(owner, name, staticmethod(wrapped) if is_class else wrapped)


def install_redirect(workdir: Path) -> None:
    """Rewrite ``/mnt/project/...`` to ``workdir/...`` in Python's file functions (see the module doc)."""
    global _installed
    _installed = workdir.resolve()
    _replace(builtins, "open", _wrap)
    _replace(io, "open", _wrap)
    for name in ("open", "stat", "lstat", "access", "listdir", "readlink", "chdir"):
        _replace(os, name, _wrap)
    _replace(os, "scandir", _wrap_scandir)
    # realpath may hold its own references to lstat and readlink (default arguments in newer
    # Pythons), so it is wrapped as a whole: /mnt/project/x resolves as the project's x does.
    _replace(os.path, "realpath", _wrap)
    # Python 3.10's pathlib calls through its own references, taken at import (gone in 3.11).
    accessor = getattr(pathlib, "_NormalAccessor", None)
    for name in ("open", "stat", "lstat", "listdir", "readlink", "realpath"):
        if accessor is not None and hasattr(accessor, name):
            _replace(accessor, name, _wrap)
    if accessor is not None and hasattr(accessor, "scandir"):
        _replace(accessor, "scandir", _wrap_scandir)
    # Python 3.13's glob (and pathlib.Path.glob through it) holds its own references too.
    globber = getattr(glob, "_StringGlobber", None)
    for name, make in (("lstat", _wrap), ("scandir", _wrap_scandir)):
        if globber is not None and hasattr(globber, name):
            _replace(globber, name, make)


def redirect_target() -> Path | None:
    """Where ``install_redirect`` sends ``/mnt/project`` in this process, or None when it is not in force."""
    return _installed


def uninstall_redirect() -> None:
    """Every function ``install_redirect`` wrapped is the original again, and nothing is rewritten."""
    global _installed
    for (owner, name), original in _replaced.items():
        if original is _INHERITED:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    _replaced.clear()
    _installed = None

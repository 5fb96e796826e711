"""scripts/seccomp_docker.py: podman's seccomp profile with Docker's CAP_SYS_ADMIN rule (what scripts/image.sh runs under)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("seccomp_docker", ROOT / "scripts" / "seccomp_docker.py")
assert _spec is not None and _spec.loader is not None
seccomp_docker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seccomp_docker)

PODMAN_LIKE: dict[str, Any] = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 38,
    "syscalls": [
        {"names": ["read", "write", "unshare", "mount", "setns", "clone", "clone3"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["setns"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["mount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    ],
}


def _unconditionally_allowed(profile: dict[str, Any]) -> set[str]:
    return {
        name
        for rule in profile["syscalls"]
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("includes") and not rule.get("args")
        for name in rule["names"]
    }


def test_namespaces_and_mounts_need_cap_sys_admin() -> None:
    profile = seccomp_docker.docker_profile(PODMAN_LIKE)
    allowed = _unconditionally_allowed(profile)
    assert {"read", "write"} <= allowed
    assert not allowed & {"unshare", "mount", "setns", "clone", "clone3"}
    admin = [r for r in profile["syscalls"] if r.get("includes") == {"caps": ["CAP_SYS_ADMIN"]}]
    assert {"unshare", "mount", "setns", "clone", "clone3"} <= {n for r in admin for n in r["names"]}
    (clone,) = [r for r in profile["syscalls"] if r["names"] == ["clone"]]
    assert clone["args"] == [{"index": 0, "value": 0x7E020000, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]
    assert clone["excludes"] == {"caps": ["CAP_SYS_ADMIN"]}  # threads and processes, not namespaces
    assert {"names": ["mount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1} in profile["syscalls"]  # kept as it was
    assert profile["defaultErrnoRet"] == 1  # EPERM, as Docker answers


def test_podmans_installed_profile() -> None:
    path = Path(seccomp_docker.DEFAULT_PROFILE)
    if not path.is_file():
        pytest.skip(f"{path} is not installed (containers-common)")
    profile = seccomp_docker.docker_profile(json.loads(path.read_text()))
    assert not _unconditionally_allowed(profile) & seccomp_docker.SYS_ADMIN_ONLY
    assert "unshare" in _unconditionally_allowed(json.loads(path.read_text()))  # what made podman differ

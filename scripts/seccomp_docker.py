"""Write a seccomp profile that refuses what Docker's default profile refuses to a container without CAP_SYS_ADMIN.

    python scripts/seccomp_docker.py [PODMAN_PROFILE] > docker-default.json

podman's default profile (containers-common's ``seccomp.json``) allows ``unshare``, ``mount``,
``setns`` and friends, and ``clone`` with namespace flags, to every container; Docker's (moby's
``profiles/seccomp/default.json``) allows them only when the container holds CAP_SYS_ADMIN, which
``docker run`` does not grant by default. So a process that makes a user or mount namespace works
under podman and fails under Docker with EPERM. This script takes podman's profile and applies
Docker's rule for those calls, so that podman reproduces Docker's refusals (scripts/image.sh runs
every Cortex case under both profiles).
"""

from __future__ import annotations

import json
import sys
from typing import Any

DEFAULT_PROFILE = "/usr/share/containers/seccomp.json"

# The calls that Docker's default profile allows only with CAP_SYS_ADMIN.
SYS_ADMIN_ONLY = {
    "bpf",
    "clone",
    "clone3",
    "fanotify_init",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "quotactl",
    "quotactl_fd",
    "setdomainname",
    "sethostname",
    "setns",
    "syslog",
    "umount",
    "umount2",
    "unshare",
}
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
NAMESPACE_FLAGS = 0x7E020000
ENOSYS = 38
EPERM = 1


def docker_profile(podman: dict[str, Any]) -> dict[str, Any]:
    """``podman``'s profile with Docker's CAP_SYS_ADMIN rule for namespaces and mounts."""
    rules: list[dict[str, Any]] = []
    for rule in podman["syscalls"]:
        unconditional = rule.get("action") == "SCMP_ACT_ALLOW" and not (rule.get("includes") or {}).get("caps")
        if unconditional:
            names = [name for name in rule["names"] if name not in SYS_ADMIN_ONLY]
            if not names:
                continue
            rule = {**rule, "names": names}
        rules.append(rule)
    no_admin = {"caps": ["CAP_SYS_ADMIN"]}
    rules += [
        {"names": sorted(SYS_ADMIN_ONLY), "action": "SCMP_ACT_ALLOW", "includes": no_admin},
        {  # a new thread or process, but no new namespace
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
            "excludes": no_admin,
        },
        {  # clone3 passes its flags in memory, which seccomp cannot read: ENOSYS makes libc fall back to clone
            "names": ["clone3"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": ENOSYS,
            "excludes": no_admin,
        },
    ]
    # A refused call fails with EPERM, as under Docker (podman's profile answers ENOSYS).
    return {**podman, "defaultErrnoRet": EPERM, "defaultErrno": "EPERM", "syscalls": rules}


def main(argv: list[str]) -> int:
    source = argv[1] if len(argv) > 1 else DEFAULT_PROFILE
    with open(source, encoding="utf-8") as file:
        podman = json.load(file)
    json.dump(docker_profile(podman), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

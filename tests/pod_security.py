"""Pod Security Standards, "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards), rule by rule.

``violations(pod, annotations)`` lists what a pod spec breaks, each control of the "baseline" profile
and then those "restricted" adds, with the pod's securityContext inherited by its containers as
Kubernetes does. The Pod Security admission controller is not available offline; this is its
table, checked on every pod template the exports write.
"""

from __future__ import annotations

from typing import Any

# Restricted, "Volume Types": only these (so no hostPath, baseline's "HostPath Volumes", either).
ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected"}
ALLOWED_VOLUMES |= {"secret"}
# Baseline, "Sysctls": the safe set.
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def violations(pod: dict[str, Any], annotations: dict[str, str] | None = None) -> list[str]:
    """What ``pod`` (a pod spec; ``annotations``, its template's) breaks of the "restricted" profile."""
    problems = []
    ctx = pod.get("securityContext", {})
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            problems.append(f"volume {volume['name']}: type {sorted(kinds - ALLOWED_VOLUMES)}")
    problems += [key for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    problems += [f"sysctl {s['name']}" for s in ctx.get("sysctls", []) if s["name"] not in SAFE_SYSCTLS]
    for key, value in (annotations or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and not (value == "runtime/default" or value.startswith("localhost/")):
            problems.append(f"AppArmor annotation {value}")
    problems += [f"pod: {p}" for p in _context_violations(ctx)]
    containers = pod["containers"] + pod.get("initContainers", []) + pod.get("ephemeralContainers", [])
    for container in containers:
        problems += _container_violations(container, ctx)
    return problems


def _context_violations(ctx: dict[str, Any]) -> list[str]:
    """The controls a securityContext can break at either level (pod or container)."""
    problems = []
    if ctx.get("windowsOptions", {}).get("hostProcess"):
        problems.append("windowsOptions.hostProcess")
    apparmor = ctx.get("appArmorProfile", {}).get("type")
    if apparmor not in (None, "RuntimeDefault", "Localhost"):
        problems.append(f"appArmorProfile {apparmor}")
    selinux = ctx.get("seLinuxOptions", {})
    if selinux.get("type", "") not in SELINUX_TYPES or "user" in selinux or "role" in selinux:
        problems.append(f"seLinuxOptions {selinux}")
    if ctx.get("runAsUser") == 0:
        problems.append("runAsUser 0")
    return problems


def _container_violations(container: dict[str, Any], pod_ctx: dict[str, Any]) -> list[str]:
    problems = [f"{container['name']}: {p}" for p in _context_violations(container.get("securityContext", {}))]
    ctx = container.get("securityContext", {})
    name = container["name"]
    if ctx.get("privileged"):
        problems.append(f"{name}: privileged")
    if ctx.get("procMount", "Default") != "Default":
        problems.append(f"{name}: procMount {ctx['procMount']}")
    if ctx.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{name}: allowPrivilegeEscalation must be false")
    if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
        problems.append(f"{name}: runAsNonRoot must be true")
    seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {})).get("type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        problems.append(f"{name}: seccompProfile {seccomp}")
    caps = ctx.get("capabilities", {})
    if "ALL" not in caps.get("drop", []):
        problems.append(f"{name}: capabilities must drop ALL")
    if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
        problems.append(f"{name}: adds capabilities")
    problems += [f"{name}: hostPort" for port in container.get("ports", []) if port.get("hostPort")]
    return problems


# A pod breaking each control once: the checker must find every one (it really checks).
BAD_POD: dict[str, Any] = {
    "hostNetwork": True,
    "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
    "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}], "runAsUser": 0},
    "containers": [
        {
            "name": "c",
            "ports": [{"containerPort": 80, "hostPort": 80}],
            "securityContext": {
                "privileged": True,
                "procMount": "Unmasked",
                "windowsOptions": {"hostProcess": True},
                "appArmorProfile": {"type": "Unconfined"},
                "seLinuxOptions": {"user": "root"},
                "capabilities": {"add": ["SYS_ADMIN"]},
            },
        }
    ],
}
BAD_POD_VIOLATIONS = [
    "volume host: type ['hostPath']",
    "hostNetwork",
    "sysctl kernel.msgmax",
    "AppArmor annotation unconfined",
    "pod: runAsUser 0",
    "c: windowsOptions.hostProcess",
    "c: appArmorProfile Unconfined",
    "c: seLinuxOptions {'user': 'root'}",
    "c: privileged",
    "c: procMount Unmasked",
    "c: allowPrivilegeEscalation must be false",
    "c: runAsNonRoot must be true",
    "c: seccompProfile None",
    "c: capabilities must drop ALL",
    "c: adds capabilities",
    "c: hostPort",
]
BAD_POD_ANNOTATIONS = {APPARMOR_ANNOTATION + "c": "unconfined"}

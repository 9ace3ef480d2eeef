"""Kubernetes security, on the pods as kubectl renders them: every container
of every pod has runAsNonRoot as the image's user, seccompProfile
RuntimeDefault, allowPrivilegeEscalation false, capabilities drop ALL
(none added), readOnlyRootFilesystem and a writable emptyDir /tmp; each
server's and worker's TLS files come from its role's Secret, which
deploy/k8s/make_secrets.sh makes; a NetworkPolicy lets only worker and
ps-admin pods reach the servers' gRPC port; deploy/k8s/admin's pod mounts
ps-tls-admin read-only and is let in."""

import os
import re

from .security import APP_LABEL, CLIENT_APPS, SECRETS, check_tls_flags

def k8s_mounts(pspec, container):
    """{mountPath: {"source", "read_only", "secret", "empty_dir", "claim"}} of
    CONTAINER in the pod spec PSPEC (claims: volumeClaimTemplates' names)."""
    volumes = {v.get("name"): v for v in pspec.get("volumes") or []}
    out = {}
    for m in container.get("volumeMounts") or []:
        v = volumes.get(m.get("name"), {})
        out[m.get("mountPath")] = {
            "source": m.get("name"), "read_only": m.get("readOnly") is True,
            "secret": (v.get("secret") or {}).get("secretName"),
            "empty_dir": "emptyDir" in v}
    return out


def check_pod_hardening(pspec, docker_uid, where, errors):
    """Every container of the pod: runAsNonRoot (as the image's user), the
    RuntimeDefault seccomp profile, no privilege escalation, a read-only root
    filesystem with a writable emptyDir at /tmp, every capability dropped."""
    psc = pspec.get("securityContext") or {}
    for c in (pspec.get("initContainers") or []) + (pspec.get("containers") or []):
        csc = c.get("securityContext") or {}
        w = f"{where}: container {c.get('name')}"
        if csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is not True:
            errors.append(f"{w}: must set securityContext.runAsNonRoot: true")
        uid = csc.get("runAsUser", psc.get("runAsUser"))
        if docker_uid is not None and uid != docker_uid:
            errors.append(f"{w}: runAsUser {uid} is not the image's user {docker_uid}")
        seccomp = (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp != "RuntimeDefault":
            errors.append(f"{w}: must set securityContext.seccompProfile.type: RuntimeDefault, "
                          f"has {seccomp}")
        if csc.get("allowPrivilegeEscalation") is not False:
            errors.append(f"{w}: must set securityContext.allowPrivilegeEscalation: false")
        if csc.get("privileged"):
            errors.append(f"{w}: must not be privileged")
        caps = csc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []) or caps.get("add"):
            errors.append(f"{w}: must set securityContext.capabilities.drop: [ALL] and add "
                          f"none, has {caps}")
        if csc.get("readOnlyRootFilesystem") is not True:
            errors.append(f"{w}: must set securityContext.readOnlyRootFilesystem: true")
        tmp = k8s_mounts(pspec, c).get("/tmp")
        if not tmp or tmp["read_only"] or not tmp["empty_dir"]:
            errors.append(f"{w}: with a read-only root filesystem, /tmp must be a writable "
                          f"emptyDir volume (mounts {sorted(k8s_mounts(pspec, c))})")


def check_k8s_tls(role, index, flags, pspec, container, where, errors):
    """check_tls_flags, and the files come from the role's Secret; returns
    the Secret's name, or None."""
    mounts = k8s_mounts(pspec, container)
    mount = check_tls_flags(role, index, flags, mounts, where, errors)
    if mount is None:
        return None
    secret = mounts[mount]["secret"]
    if secret != SECRETS[role]:
        errors.append(f"{where}: its TLS files come from volume {mounts[mount]['source']} "
                      f"(Secret {secret}), expected the Secret {SECRETS[role]} "
                      f"(deploy/k8s/make_secrets.sh), which holds every {role}'s certificate")
    return secret


def selector_matches(sel, labels):
    """Whether a matchLabels selector SEL selects pods with LABELS (None when
    it uses matchExpressions, which this test does not model)."""
    if (sel or {}).get("matchExpressions"):
        return None
    return all(labels.get(k) == v for k, v in ((sel or {}).get("matchLabels") or {}).items())


def check_network_policy(by_kind, server_labels, worker_labels, port, named_ports, where, errors):
    """The servers accept connections only from worker (and ps-admin) pods, on
    their gRPC port. Returns the peer selectors let in."""
    policies = []
    for p in by_kind.get("NetworkPolicy", []):
        sel = (p.get("spec") or {}).get("podSelector")
        hit = selector_matches(sel, server_labels)
        if hit is None:
            errors.append(f"{where}: NetworkPolicy {p['metadata']['name']}: matchExpressions are "
                          f"not modelled by this test; use matchLabels")
        elif hit:
            policies.append(p)
    if not policies:
        errors.append(f"{where}: no NetworkPolicy selects the server pods ({server_labels}): "
                      f"every pod and address can reach their port")
        return []
    if not any("Ingress" in (p["spec"].get("policyTypes") or ["Ingress"]) for p in policies):
        errors.append(f"{where}: no NetworkPolicy of the server pods has policyType Ingress")
    peers_in, workers_in = [], False
    for p in policies:
        pw = f"{where}: NetworkPolicy {p['metadata']['name']}"
        for rule in p["spec"].get("ingress") or []:
            # Prometheus's rule, for the metrics port alone: deploy_monitoring_check.
            if rule.get("ports") and all(
                    named_ports.get(pp.get("port"), pp.get("port")) == named_ports.get("metrics")
                    for pp in rule["ports"]):
                continue
            rule_ports = set()
            if not rule.get("ports"):
                errors.append(f"{pw}: an ingress rule without ports opens every port of the servers")
            for pp in rule.get("ports") or []:
                value = named_ports.get(pp.get("port"), pp.get("port"))
                if value != port or pp.get("endPort") or pp.get("protocol", "TCP") != "TCP":
                    errors.append(f"{pw}: lets clients reach port {pp}; only the gRPC port "
                                  f"{port}/TCP is for them")
                rule_ports.add(value)
            if not rule.get("from"):
                errors.append(f"{pw}: an ingress rule without `from` lets every pod and address in")
            for peer in rule.get("from") or []:
                sel = peer.get("podSelector")
                app = ((sel or {}).get("matchLabels") or {}).get(APP_LABEL)
                if set(peer) != {"podSelector"} or app not in CLIENT_APPS or sel.get("matchExpressions"):
                    errors.append(f"{pw}: lets {peer} reach the servers; only pods of this "
                                  f"namespace labelled {APP_LABEL} in {sorted(CLIENT_APPS)} may "
                                  f"(no ipBlock, namespaceSelector or broader selector)")
                    continue
                peers_in.append(sel)
                if selector_matches(sel, worker_labels) and port in rule_ports:
                    workers_in = True
    if not workers_in:
        errors.append(f"{where}: no NetworkPolicy lets the worker pods ({worker_labels}) reach "
                      f"the servers' gRPC port {port}")
    return peers_in


def check_make_secrets(root, secrets, errors):
    """deploy/k8s/make_secrets.sh makes every Secret that some pod mounts."""
    path = os.path.join(root, "deploy", "k8s", "make_secrets.sh")
    if not os.access(path, os.X_OK):
        errors.append("deploy/k8s/make_secrets.sh is missing or not executable: the pods mount "
                      f"Secrets {sorted(secrets)} that it makes")
        return
    with open(path) as f:
        code = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("#"))
    for s in sorted(secrets):
        if not re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", code):
            errors.append(f"deploy/k8s/make_secrets.sh makes no Secret {s}, which pods mount")


def check_k8s_admin(name, resources, docker_uid, peers_in, errors):
    """deploy/k8s/admin: one hardened pod with the admin Secret, read-only,
    labelled so that the servers' NetworkPolicy lets it in."""
    where = f"k8s/{name}"
    pods = [r for r in resources if r.get("kind") == "Pod"]
    if len(pods) != 1 or len(resources) != 1:
        errors.append(f"{where}: expected one Pod (the operator's), got "
                      f"{[r.get('kind') for r in resources]}")
        return set()
    pod = pods[0]
    spec, labels = pod["spec"], pod["metadata"].get("labels") or {}
    check_pod_hardening(spec, docker_uid, f"{where}: pod {pod['metadata']['name']}", errors)
    secrets = set()
    for c in spec.get("containers") or []:
        for path, m in k8s_mounts(spec, c).items():
            if m["secret"]:
                secrets.add(m["secret"])
                if not m["read_only"]:
                    errors.append(f"{where}: {path} (Secret {m['secret']}) is not mounted read-only")
    if SECRETS["admin"] not in secrets:
        errors.append(f"{where}: the pod mounts no Secret {SECRETS['admin']} (mounts {sorted(secrets)})")
    if peers_in is not None and not any(selector_matches(s, labels) for s in peers_in):
        errors.append(f"{where}: the servers' NetworkPolicy lets in none of the pod's labels "
                      f"{labels} (it lets in {peers_in})")
    return secrets

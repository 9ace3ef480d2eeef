"""Security shared by compose and Kubernetes: every server and worker runs
mutual TLS (--tls_cert, --tls_key and --tls_ca, no --insecure) with its own
certificate and key (make_certs.sh's server-<shard>/worker-<id> files) on
one read-only mount, and no compose or Kubernetes file under deploy/ holds
a certificate or key (PEM or base64 PEM). The hardening is checked where
it is written: compose.check_compose_hardening and k8s_security.py."""

import os
import re

# The Secret that each role's pods mount (made by deploy/k8s/make_secrets.sh,
# never committed), and the certificate files of deploy/make_certs.sh that a
# process of the role with index i uses: <role>-<i>.pem, <role>-<i>.key and
# ca.pem.
SECRETS = {"server": "ps-tls-server", "worker": "ps-tls-worker", "admin": "ps-tls-admin"}
# deploy/make_certs.sh's flags (also checked against its --help when the file
# is among the test's files).
MAKE_CERTS_FLAGS = {"servers", "workers", "names", "days", "owner"}
# The pods that the servers' NetworkPolicy may let reach their gRPC port, by
# this label: the workers and the operator's pod of deploy/k8s/admin.
APP_LABEL = "app.kubernetes.io/name"
CLIENT_APPS = {"ps-worker", "ps-admin"}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# PEM, or PEM in base64 (a Secret's data): no file under deploy/ may hold it.
KEY_MATERIAL_RE = re.compile(r"-----BEGIN|PRIVATE KEY-----|LS0tLS1CRUdJTi")


def mount_for(path, mounts):
    """(mount path, its info) of the mount in MOUNTS that holds PATH (the
    deepest), or (None, None)."""
    best = None
    for m in mounts:
        if m and (path == m or path.startswith(m.rstrip("/") + "/")):
            if best is None or len(m) > len(best):
                best = m
    return (best, mounts[best]) if best else (None, None)


def check_tls_flags(role, index, flags, mounts, where, errors):
    """Server (ROLE 'server') or worker ('worker') number INDEX: mutual TLS
    with its own certificate and key and the CA, all on one read-only mount,
    and no --insecure. MOUNTS: {mount path: {"read_only": bool, ...}}.
    Returns the mount path of its TLS files, or None."""
    if flags.get("insecure") not in (None, "false", "0"):
        errors.append(f"{where}: carries --insecure (plaintext to or from anyone who reaches "
                      f"the port); it must use mutual TLS")
    missing = [f"--{n}" for n in ("tls_cert", "tls_key", "tls_ca")
               if not isinstance(flags.get(n), str) or not flags.get(n)]
    if missing:
        why = ("its certificate, and the CA its clients' certificates must chain to" if role == "server"
               else "the CA of the servers' certificates, and its own certificate")
        errors.append(f"{where}: lacks {', '.join(missing)}: mutual TLS needs {why}")
        return None
    want = {"tls_cert": f"{role}-{index}.pem", "tls_key": f"{role}-{index}.key", "tls_ca": "ca.pem"}
    found = set()
    for flag, name in want.items():
        path = flags[flag]
        if os.path.basename(path) != name:
            errors.append(f"{where}: --{flag}={path} is not {role} {index}'s own file {name} "
                          f"(make_certs.sh's name; a certificate names one identity)")
        mount, info = mount_for(path, mounts)
        if mount is None:
            errors.append(f"{where}: --{flag}={path} is on no volume it mounts ({sorted(mounts)})")
        elif not info["read_only"]:
            errors.append(f"{where}: --{flag}={path} is on {mount}, which is not mounted read-only")
        found.add(mount)
    if len(found) != 1 or None in found:
        if len(found) > 1:
            errors.append(f"{where}: its TLS files are on different mounts {sorted(map(str, found))}")
        return None
    return found.pop()


def check_no_key_material(root, errors):
    """No certificate or key, in PEM or base64, in the compose and Kubernetes files."""
    paths = [os.path.join(root, "deploy", f) for f in ("docker-compose.yml", "docker-compose.gpu.yml",
                                                         "docker-compose.python.yml",
                                                         "docker-compose.unix.yml", ".env")]
    for dirpath, _, files in os.walk(os.path.join(root, "deploy", "k8s")):
        paths += [os.path.join(dirpath, f) for f in files]
    for p in sorted(paths):
        if not os.path.isfile(p):
            continue
        with open(p, errors="replace") as f:
            m = KEY_MATERIAL_RE.search(f.read())
        if m:
            errors.append(f"{os.path.relpath(p, root)}: holds certificate or key material "
                          f"('{m.group(0)}'); keys are made by make_certs.sh and Secrets by "
                          f"deploy/k8s/make_secrets.sh, never committed")

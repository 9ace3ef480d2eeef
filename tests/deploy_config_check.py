#!/usr/bin/env python3
"""Checks the cluster configurations in deploy/ against the binaries and
against each other, so that a renamed flag or a mismatched count breaks this
test instead of a user's cluster.

usage: [KUBECTL=PATH] deploy_config_check.py --root=DIR --bin=ps_server=PATH
           --bin=ps_worker=PATH --bin=ps_ctl=PATH --bin=ps_bench=PATH [--no_self_check]

Nothing here runs a cluster: the Kubernetes checks read what
`kubectl kustomize deploy/k8s/<overlay>` renders, with kubectl = $KUBECTL, else
`kubectl` on PATH (under `bazel test`: /bin, /usr/bin and /usr/local/bin;
pass another with --test_env=KUBECTL=PATH). Without a kubectl the check fails
and says to run deploy/setup_debian.sh. Its output names the kubectl version
that rendered. The overlays use only kustomize features that both Debian 12's
kubectl 1.20 (kustomize 2.0.3) and kubectl 1.32 (kustomize 5.5) read.

What it checks:
  - Every container command (docker-compose.yml alone and with
    docker-compose.gpu.yml; every pod of every kustomization under k8s/ as
    kubectl renders it) names a binary of the build, and every flag it
    passes is accepted by that binary: the name is in the binary's
    --helpfull, enumerations (--mode, --device, --transport, --model,
    ps_ctl's command) have an allowed value, and the real binary parses the
    whole command line (run with --helpfull appended, Abseil reports unknown
    flags and bad values before printing help).
  - Compose variables (${VAR:-default}) are expanded with their defaults and
    with alternative values; Kubernetes $(VAR) references are expanded from
    the rendered ConfigMap, the downward API and JOB_COMPLETION_INDEX, per
    pod, and one defined nowhere is an error.
  - Servers, workers and mode agree: shard ids, --num_shards, --num_workers,
    every --servers list naming exactly the server services in shard order,
    ports, health checks and probes, depends_on, volumes, resources, GPUs,
    the Job's completions and parallelism, the StatefulSet's replicas.
  - Every kustomization under k8s/ (the base and the sync, async and gpu
    overlays) renders, runs the mode and devices its name says, and every
    other YAML file under k8s/ is named by some kustomization.
  - The Dockerfiles build and copy the binaries the commands use, run as the
    user the Kubernetes manifests expect, install the dataset, the runtime
    packages, openssl and make_certs.sh; .dockerignore keeps Bazel's trees
    out of the build context. deploy/Dockerfile's default target (its last
    stage) is the runtime image; its python target adds python3, numpy,
    torch, the wheel (//python:wheel) and deploy/python_worker.py, as the
    same user.
  - docker-compose.python.yml: every worker runs `python3 -u` with that
    script on the python target, with PS_WORKER_ID (its index),
    PS_NUM_WORKERS, PS_SERVERS and PS_TLS_DIR (the read-only certificates
    volume) agreeing with the base file; nothing else changes.
  - docker-compose.unix.yml: every server listens on unix:DIR/shard-<i>.sock
    (its own shard) and every worker's --servers names those sockets in
    shard order, with no --tls_* or --insecure flag and every other flag as
    in the base file; all mount the same read-write volume at DIR, which a
    root one-shot service chmods 0700 and chowns to the image's user
    (ps_server's rule for a socket's folder) before they start
    (service_completed_successfully); the hardening is kept.
  - Monitoring: the compose file's `monitoring` profile (Prometheus) and the
    pods' metrics ports and scrape annotations: tests/deploy_monitoring_check.py.
  - Security. Every server and worker (compose services, GPU override
    included; every Kubernetes pod as rendered) runs mutual TLS: --tls_cert,
    --tls_key and --tls_ca, no --insecure, its certificate and key being
    its own (server-<shard>.pem/.key, worker-<id>.pem/.key for the service's
    or pod's own index), all on a read-only mount: compose's `certs` volume,
    or the role's Secret (ps-tls-server, ps-tls-worker), which
    deploy/k8s/make_secrets.sh must make. Compose: one certificates service
    runs make_certs.sh as root (--servers = the server services, --workers
    >= the worker services, --owner = the image's user) only when ca.pem is
    missing, deletes ca.key, and the others depend on it with
    service_completed_successfully; the healthcheck asks the loopback
    plaintext --health_listen port, or the TLS port with a certificate;
    every service has read_only, cap_drop ALL and no-new-privileges.
    Kubernetes: the probes ask the --health_listen port (not loopback, a
    containerPort), never the TLS port; every container of every pod
    (deploy/k8s/admin's included) has runAsNonRoot as the image's user,
    seccompProfile RuntimeDefault, allowPrivilegeEscalation false,
    capabilities drop ALL (none added), readOnlyRootFilesystem and a
    writable emptyDir /tmp; a NetworkPolicy selects the server pods and lets
    in only pods labelled app.kubernetes.io/name ps-worker or ps-admin, only
    on the gRPC port, and lets the workers in; the admin pod mounts
    ps-tls-admin read-only and has a label that policy admits. No rendered
    Secret, and no PEM or base64 PEM in any compose or Kubernetes file.
Then, unless --no_self_check, it proves that it can fail: each of a list of
mutations (a renamed flag in a file or in a binary, a wrong count, a bad
enumeration value, a missing TLS flag, another worker's certificate, a
writable mount, a hardening field dropped, a NetworkPolicy that is missing
or too wide, ...) applied to a copy of deploy/ must make it report an
error; the Kubernetes ones are caught in what kubectl renders from the copy.
"""

import argparse
import copy
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    sys.exit("deploy_config_check: python3-yaml is missing: run deploy/setup_debian.sh")

# The monitoring checks live in tests/deploy_monitoring_check.py, which uses
# this module's helpers (at call time) under its own name.
sys.modules.setdefault("deploy_config_check", sys.modules[__name__])
import deploy_monitoring_check as monitoring  # noqa: E402

# Values the binaries accept for enumerated flags. Each value must also appear
# in the flag's --help text (checked), so a value the binary drops breaks
# this test.
ENUMS = {
    "ps_server": {"mode": ["sync", "async"]},
    "ps_worker": {"device": ["auto", "cpu", "cuda"], "transport": ["stream", "unary"],
                  "model": ["mlp", "softmax"]},
}
# ps_ctl's positional command.
CTL_COMMANDS = ["status", "health"]

# Alternative values for compose variables, checked besides the defaults.
ALTERNATIVES = {
    "PS_MODE": ["sync", "async"],
    "PS_WORKERS": ["1", "2"],
    "PS_LR": ["0.05"],
    "PS_EPOCHS": ["3"],
    "PS_PULL_TIMEOUT": ["30"],
    "PS_STALL_REPORT": ["0", "3"],
    "PS_THREADS": ["0", "2"],
    "PS_IMAGE": ["registry.example/ps:1.0"],
    "PS_CUDA_IMAGE": ["registry.example/ps-cuda:1.0"],
}

# Every kustomization under deploy/k8s, with the mode it must run and
# whether its workers use GPUs.
KUSTOMIZATIONS = {
    "base": {"mode": "sync", "gpu": False},
    "sync": {"mode": "sync", "gpu": False},
    "async": {"mode": "async", "gpu": False},
    "gpu": {"mode": "sync", "gpu": True},
    # The operator's pod (ps_ctl with the admin certificate), not a cluster.
    "admin": {"admin": True},
}

BINARY_NAMES = ["ps_server", "ps_worker", "ps_ctl", "ps_bench"]


def run(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)


# --- binaries -----------------------------------------------------------------

class Binary:
    """A binary of the build and the flags it accepts, as it reports them."""

    _parse_cache = {}

    def __init__(self, name, path):
        self.name, self.path = name, path
        self.help = run([path, "--helpfull"]).stdout
        self.flags = {}  # name -> help text
        # "    --name (help...); default: value;", wrapped over indented lines.
        for chunk in re.split(r"\n(?=    --)", self.help):
            m = re.match(r"--(\w+) \((.*)\); default: ", " ".join(chunk.split()))
            if m:
                self.flags[m.group(1)] = m.group(2)
        if not self.flags:
            raise SystemExit(f"deploy_config_check: {path} --helpfull listed no flags")

    def parse_errors(self, args):
        """Errors Abseil reports for ARGS, parsed by the real binary."""
        key = (self.path, tuple(args))
        if key not in Binary._parse_cache:
            out = run([self.path] + list(args) + ["--helpfull"])
            Binary._parse_cache[key] = [l for l in (out.stderr + out.stdout).splitlines()
                                        if l.startswith("ERROR:")]
        return Binary._parse_cache[key]


def check_enum_help(bins, errors):
    """Each enumeration value must appear in its flag's help text."""
    for binary, flags in ENUMS.items():
        for flag, values in flags.items():
            text = bins[binary].flags.get(flag)
            if text is None:
                errors.append(f"{binary} has no --{flag}, which the test's ENUMS table lists")
                continue
            for v in values:
                if not re.search(rf"\b{v}\b", text):
                    errors.append(f"{binary} --{flag}: help text does not mention '{v}': {text}")
    for c in CTL_COMMANDS:
        if f"ps_ctl {c}" not in bins["ps_ctl"].help:
            errors.append(f"ps_ctl --help does not mention the command '{c}'")


def parse_flags(argv):
    """{name: value} of --name=value arguments (value True for bare --name)."""
    out = {}
    for a in argv[1:]:
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            out[name] = value if eq else True
    return out


def check_argv(argv, bins, where, errors):
    """Checks one container command line against its binary."""
    if not argv:
        errors.append(f"{where}: empty command")
        return
    name = argv[0]
    if name not in bins:
        errors.append(f"{where}: runs '{name}', which is not a binary of the build "
                      f"({', '.join(sorted(bins))})")
        return
    b = bins[name]
    positional = [a for a in argv[1:] if not a.startswith("--")]
    if name == "ps_ctl":
        if len(positional) != 1 or positional[0] not in CTL_COMMANDS:
            errors.append(f"{where}: ps_ctl needs one command of {CTL_COMMANDS}, got {positional}")
    elif positional:
        errors.append(f"{where}: {name} takes no positional arguments, got {positional}")
    for a in argv[1:]:
        if re.search(r"\$\{|\$\(|\$[A-Za-z_]", a):
            errors.append(f"{where}: unexpanded variable in '{a}'")
    for flag, value in parse_flags(argv).items():
        base = flag[2:] if flag.startswith("no") and flag[2:] in b.flags else flag
        if base not in b.flags:
            errors.append(f"{where}: --{flag} is not a flag of {name} (its flags: "
                          f"{', '.join(sorted(b.flags))})")
            continue
        allowed = ENUMS.get(name, {}).get(base)
        if allowed and value not in allowed:
            errors.append(f"{where}: --{flag}={value}: {name} accepts {'|'.join(allowed)}")
    for e in b.parse_errors(argv[1:]):
        errors.append(f"{where}: {name} rejects its command line: {e}")


def int_flag(flags, name, where, errors):
    v = flags.get(name)
    try:
        return int(v)
    except (TypeError, ValueError):
        errors.append(f"{where}: --{name} must be an integer, got {v!r}")
        return None


def host_port(value, where, errors):
    m = re.fullmatch(r"(.+):(\d+)", str(value))
    if not m:
        errors.append(f"{where}: '{value}' is not HOST:PORT")
        return None, None
    return m.group(1), int(m.group(2))


# --- security: TLS flags, certificate files, hardening ---------------------------

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


# --- docker compose -----------------------------------------------------------

VAR_RE = re.compile(r"\$(?:(\$)|\{([A-Za-z_]\w*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_]\w*))")


def compose_variables(obj, found):
    """Collects {name: default or None} of every ${...} in OBJ."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            compose_variables(k, found)
            compose_variables(v, found)
    elif isinstance(obj, list):
        for v in obj:
            compose_variables(v, found)
    elif isinstance(obj, str):
        for m in VAR_RE.finditer(obj):
            name = m.group(2) or m.group(5)
            if name:
                default = m.group(4) if m.group(3) in (":-", "-") else None
                if found.get(name) is None:
                    found[name] = default
    return found


def interpolate(obj, env, where, errors):
    """Compose's variable substitution, with ENV as the environment."""
    if isinstance(obj, dict):
        return {interpolate(k, env, where, errors): interpolate(v, env, where, errors)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [interpolate(v, env, where, errors) for v in obj]
    if not isinstance(obj, str):
        return obj

    def sub(m):
        if m.group(1):
            return "$"
        name, op, arg = m.group(2) or m.group(5), m.group(3), m.group(4)
        value = env.get(name)
        if op in (":-", "-"):
            if value is None or (op == ":-" and value == ""):
                return arg
            return value
        if op == ":+":
            return arg if value else ""
        if value is None:
            errors.append(f"{where}: ${{{name}}} has no default and is not set")
            return ""
        return value
    return VAR_RE.sub(sub, obj)


# Keys of a service that the override merge below models (mappings merge,
# `volumes` merge by their target path, everything else replaces): enough
# for docker-compose.gpu.yml, docker-compose.python.yml and
# docker-compose.unix.yml.
OVERRIDE_KEYS = {"image", "build", "deploy", "entrypoint", "command", "environment",
                 "volumes", "depends_on"}


def merge_override(base, override, where, errors, new_services=()):
    """`override` over `base` as compose merges them; services named in
    `new_services` may be new (taken whole)."""
    def merge(a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            out = dict(a)
            for k, v in b.items():
                out[k] = merge(a[k], v) if k in a else v
            return out
        return b

    def merge_volumes(a, b):
        out = {target: v for v in a for target in compose_mounts({"volumes": [v]})}
        out.update({target: v for v in b for target in compose_mounts({"volumes": [v]})})
        return list(out.values())
    out = copy.deepcopy(base)
    for name, svc in (override.get("services") or {}).items():
        if name not in out["services"]:
            if name in new_services:
                out["services"][name] = copy.deepcopy(svc)
            else:
                errors.append(f"{where}: overrides service '{name}', which the base file lacks")
            continue
        extra = set(svc) - OVERRIDE_KEYS
        if extra:
            errors.append(f"{where}: service {name} overrides {sorted(extra)}, which this "
                          f"test's merge does not model (it handles {sorted(OVERRIDE_KEYS)})")
        merged = merge(out["services"][name], {k: v for k, v in svc.items() if k != "volumes"})
        if "volumes" in svc:
            merged["volumes"] = merge_volumes(out["services"][name].get("volumes") or [],
                                              svc["volumes"])
        out["services"][name] = merged
    for k, v in override.items():
        if k not in ("services",) and not k.startswith("x-"):
            out[k] = merge(out.get(k), v) if k in out else v
    return out


def compose_argv(svc, where, errors):
    argv = []
    for key in ("entrypoint", "command"):
        v = svc.get(key, [])
        if isinstance(v, str):
            errors.append(f"{where}: {key} must be a list (exec form), got a string")
            return []
        argv += [str(x) for x in v]
    return argv


def compose_mounts(svc):
    """{target: {"source", "read_only"}} of a service's volumes (short or long syntax)."""
    out = {}
    for v in svc.get("volumes") or []:
        if isinstance(v, dict):
            out[str(v.get("target"))] = {"source": v.get("source"),
                                         "read_only": bool(v.get("read_only"))}
            continue
        parts = str(v).split(":")
        if len(parts) >= 2:
            modes = parts[2].split(",") if len(parts) > 2 else []
            out[parts[1]] = {"source": parts[0], "read_only": "ro" in modes}
    return out


def check_compose_hardening(svc, where, errors):
    """What the Kubernetes pods' securityContext does, in compose's words."""
    if svc.get("read_only") is not True:
        errors.append(f"{where}: needs read_only: true (a read-only root filesystem; volumes "
                      f"and a tmpfs /tmp for what it writes)")
    if "ALL" not in [str(c).upper() for c in svc.get("cap_drop") or []]:
        errors.append(f"{where}: needs cap_drop: [ALL]")
    if not any(re.fullmatch(r"no-new-privileges(:true|=true)?", str(o))
               for o in svc.get("security_opt") or []):
        errors.append(f"{where}: needs security_opt: [no-new-privileges:true]")
    if svc.get("privileged"):
        errors.append(f"{where}: must not be privileged")


MAKE_CERTS_RE = re.compile(r"make_certs\.sh[ \t]+(\S+)((?:[ \t]+--\S+)*)")


def check_compose_certs(services, n_servers, n_workers, docker_uid, where, errors):
    """The one-shot service that makes the certificates into a named volume;
    returns (its name, that volume, the path it is mounted at) or None."""
    certs = {n: s for n, s in services.items()
             if "make_certs.sh" in " ".join(compose_argv(s, f"{where}: {n}", []))}
    if len(certs) != 1:
        errors.append(f"{where}: needs exactly one service that runs make_certs.sh (the "
                      f"certificates' one-shot service), has {sorted(certs)}")
        return None
    name, svc = next(iter(certs.items()))
    w = f"{where}: {name}"
    script = "\n".join(compose_argv(svc, w, errors))
    check_compose_hardening(svc, w, errors)
    if str(svc.get("user", "")).split(":")[0] not in ("0", "root"):
        errors.append(f"{w}: must run as root (user: \"0:0\") to hand the keys to the "
                      f"containers' user with --owner, has user {svc.get('user')}")
    if str(svc.get("restart", "no")) not in ("no", "on-failure"):
        errors.append(f"{w}: a one-shot service; restart: {svc.get('restart')} would rerun it")
    m = MAKE_CERTS_RE.search(script)
    if not m:
        errors.append(f"{w}: no 'make_certs.sh DIR --flag...' in its command")
        return None
    flags = parse_flags(["make_certs.sh"] + m.group(2).split())
    for flag in flags:
        if flag not in MAKE_CERTS_FLAGS:
            errors.append(f"{w}: make_certs.sh has no --{flag} (its flags: {sorted(MAKE_CERTS_FLAGS)})")
    if str(flags.get("servers")) != str(n_servers):
        errors.append(f"{w}: make_certs.sh --servers={flags.get('servers')}, but there are "
                      f"{n_servers} server services")
    if not str(flags.get("workers", "")).isdigit() or int(flags["workers"]) < n_workers:
        errors.append(f"{w}: make_certs.sh --workers={flags.get('workers')}, but there are "
                      f"{n_workers} worker services, each with its own certificate")
    if docker_uid is not None and str(flags.get("owner", "")).split(":")[0] != str(docker_uid):
        errors.append(f"{w}: make_certs.sh --owner={flags.get('owner')}: the keys must belong "
                      f"to the image's user {docker_uid}, as which the servers and workers read them")
    rw = {t: mnt for t, mnt in compose_mounts(svc).items() if not mnt["read_only"]}
    if len(rw) != 1:
        errors.append(f"{w}: must mount exactly one volume read-write (where the certificates "
                      f"go), mounts {compose_mounts(svc)}")
        return None
    target, mnt = next(iter(rw.items()))
    if not re.search(rf"-[ef]\s+{re.escape(target)}/ca\.pem\b", script):
        errors.append(f"{w}: must make certificates only when {target}/ca.pem is missing "
                      f"(test -f {target}/ca.pem): a second `up` keeps the CA that the running "
                      f"processes trust")
    if not re.search(r"\brm\b[^\n;&|]*ca\.key\b", script):
        errors.append(f"{w}: must delete the CA's key ca.key: with it, any container that "
                      f"mounts the volume could sign itself an admin certificate")
    return name, mnt["source"], target


def check_compose(doc, env, files, root, bins, docker_uid, errors):
    where = f"{' + '.join(files)} with {env or 'defaults'}"
    services = doc.get("services") or {}
    servers, workers = {}, {}
    for name, svc in services.items():
        if svc.get("profiles"):  # optional services: deploy_monitoring_check
            continue
        argv = compose_argv(svc, f"{where}: {name}", errors)
        if not argv:
            errors.append(f"{where}: {name} has no entrypoint/command")
            continue
        if "make_certs.sh" not in " ".join(argv):  # the certificates: check_compose_certs
            check_argv(argv, bins, f"{where}: {name}", errors)
        if argv[0] == "ps_server":
            servers[name] = (svc, parse_flags(argv))
        elif argv[0] == "ps_worker":
            workers[name] = (svc, parse_flags(argv))
        build = svc.get("build") or {}
        dockerfile = build.get("dockerfile")
        if not svc.get("image") or not dockerfile:
            errors.append(f"{where}: {name} needs an image and a build with a dockerfile")
        else:
            context = os.path.normpath(os.path.join(root, "deploy", build.get("context", ".")))
            if context != os.path.normpath(root):
                errors.append(f"{where}: {name}'s build context is {context}, not the repository root")
            if not os.path.isfile(os.path.join(context, dockerfile)):
                errors.append(f"{where}: {name}'s dockerfile {dockerfile} does not exist")

    S = len(servers)
    if S == 0 or not workers:
        errors.append(f"{where}: needs ps_server and ps_worker services, has {sorted(services)}")
        return
    for i in range(S):
        if f"ps-server-{i}" not in servers:
            errors.append(f"{where}: server services must be ps-server-0..{S - 1}, got {sorted(servers)}")
            return
    for i in range(len(workers)):
        if f"ps-worker-{i}" not in workers:
            errors.append(f"{where}: worker services must be ps-worker-0..{len(workers) - 1}, "
                          f"got {sorted(workers)}")
            return
    certs = check_compose_certs(services, S, len(workers), docker_uid, where, errors)

    def check_security(name, svc, f, role, index, w):
        """TLS with its own certificate from the certificates' volume, read-only;
        started once the certificates exist; hardened."""
        check_compose_hardening(svc, w, errors)
        mounts = compose_mounts(svc)
        mount = check_tls_flags(role, index, f, mounts, w, errors)
        if certs is None:
            return
        certs_service, volume, _ = certs
        if mount is not None and mounts[mount]["source"] != volume:
            errors.append(f"{w}: its TLS files are on {mounts[mount]['source']}:{mount}, not on "
                          f"the volume '{volume}' that {certs_service} fills")
        deps = svc.get("depends_on") or {}
        cond = deps.get(certs_service, {}).get("condition") if isinstance(deps, dict) else None
        if cond != "service_completed_successfully":
            errors.append(f"{w}: must depend on {certs_service} with condition "
                          f"service_completed_successfully (its certificates exist), has {cond}")

    # PS_WORKERS=k means: start ps-worker-0 .. ps-worker-<k-1> (deploy/README.md).
    W = len(workers)
    if "PS_WORKERS" in env:
        W = int(env["PS_WORKERS"])
        if W > len(workers):
            errors.append(f"{where}: PS_WORKERS={W} but only {len(workers)} worker services")
            return
    started = [f"ps-worker-{i}" for i in range(W)]

    ports, modes = {}, set()
    for i in range(S):
        name = f"ps-server-{i}"
        svc, f = servers[name]
        w = f"{where}: {name}"
        if int_flag(f, "shard_id", w, errors) != i:
            errors.append(f"{w}: --shard_id={f.get('shard_id')}, expected {i} (its name)")
        if int_flag(f, "num_shards", w, errors) != S:
            errors.append(f"{w}: --num_shards={f.get('num_shards')}, but there are {S} server services")
        if int_flag(f, "num_workers", w, errors) != W:
            errors.append(f"{w}: --num_workers={f.get('num_workers')}, but {W} worker services run")
        modes.add(f.get("mode", "sync"))
        _, ports[name] = host_port(f.get("listen", "0.0.0.0:50051"), w, errors)
        check_security(name, svc, f, "server", i, w)
        health_host, health_port = (host_port(f["health_listen"], w, errors)
                                    if f.get("health_listen") else (None, None))
        if health_host is not None and health_host not in LOOPBACK_HOSTS:
            errors.append(f"{w}: --health_listen={f['health_listen']} is plaintext: keep it on "
                          f"the container's loopback (127.0.0.1), where only the healthcheck asks")
        hc = (svc.get("healthcheck") or {}).get("test")
        if not isinstance(hc, list) or hc[:1] != ["CMD"]:
            errors.append(f"{w}: healthcheck.test must be [\"CMD\", \"ps_ctl\", \"health\", ...], got {hc}")
        else:
            check_argv(hc[1:], bins, f"{w}: healthcheck", errors)
            hf = parse_flags(hc[1:])
            asked_host, asked_port = host_port(hf.get("servers"), f"{w}: healthcheck", errors)
            if hc[1:3] != ["ps_ctl", "health"]:
                errors.append(f"{w}: healthcheck does not run 'ps_ctl health': {hc}")
            elif asked_host not in LOOPBACK_HOSTS or asked_port not in (ports[name], health_port):
                errors.append(f"{w}: healthcheck asks --servers={hf.get('servers')}, but the server "
                              f"listens on port {ports[name]} (health port {health_port}) of "
                              f"localhost")
            elif asked_port == ports[name] and not all(hf.get(k) for k in ("tls_ca", "tls_cert", "tls_key")):
                errors.append(f"{w}: healthcheck asks the mutual-TLS port {asked_port} without a "
                              f"client certificate (--tls_ca, --tls_cert, --tls_key): the handshake "
                              f"fails; ask the --health_listen port")
        mounts = compose_mounts(svc)
        if "/checkpoints" not in mounts or mounts["/checkpoints"]["read_only"]:
            errors.append(f"{w}: mounts no writable checkpoints volume at /checkpoints")
    if len(modes) != 1:
        errors.append(f"{where}: the servers disagree on --mode: {sorted(modes)}")
    if "PS_MODE" in env and modes != {env["PS_MODE"]}:
        errors.append(f"{where}: PS_MODE={env['PS_MODE']} but the servers run --mode={sorted(modes)}")

    want_servers = ",".join(f"ps-server-{i}:{ports[f'ps-server-{i}']}" for i in range(S))
    for i, name in enumerate(started):
        svc, f = workers[name]
        w = f"{where}: {name}"
        if int_flag(f, "worker_id", w, errors) != i:
            errors.append(f"{w}: --worker_id={f.get('worker_id')}, expected {i} (its name)")
        if int_flag(f, "num_workers", w, errors) != W:
            errors.append(f"{w}: --num_workers={f.get('num_workers')}, but {W} worker services run")
        if f.get("servers") != want_servers:
            errors.append(f"{w}: --servers={f.get('servers')}, expected every server service in "
                          f"shard order: {want_servers}")
        deps = svc.get("depends_on") or {}
        for s in servers:
            cond = deps.get(s, {}).get("condition") if isinstance(deps, dict) else None
            if cond != "service_healthy":
                errors.append(f"{w}: must depend on {s} with condition service_healthy, has {cond}")
        check_security(name, svc, f, "worker", i, w)
        mounts = compose_mounts(svc)
        for flag in ("save_model", "metrics_file"):
            path = f.get(flag)
            mount, info = mount_for(path, mounts) if path else (None, None)
            if path and (mount is None or info["read_only"]):
                errors.append(f"{w}: --{flag}={path} is not on a writable mounted volume ({sorted(mounts)})")
        for mnt in mounts.values():
            if mnt["source"] not in (doc.get("volumes") or {}):
                errors.append(f"{w}: volume '{mnt['source']}' is not declared under volumes:")
    for vol in ("model", "checkpoints", certs[1] if certs else "certs"):
        if vol not in (doc.get("volumes") or {}):
            errors.append(f"{where}: named volume '{vol}' is not declared")
    return workers


def check_compose_files(root, bins, docker_uid, errors):
    cases = 0
    base_path = os.path.join(root, "deploy", "docker-compose.yml")
    gpu_path = os.path.join(root, "deploy", "docker-compose.gpu.yml")
    with open(base_path) as f:
        base_raw = yaml.safe_load(f)
    with open(gpu_path) as f:
        gpu_raw = yaml.safe_load(f)
    with open(os.path.join(root, "deploy", "docker-compose.python.yml")) as f:
        python_raw = yaml.safe_load(f)
    with open(os.path.join(root, "deploy", "docker-compose.unix.yml")) as f:
        unix_raw = yaml.safe_load(f)
    for fn, raw in (("docker-compose.yml", base_raw), ("docker-compose.gpu.yml", gpu_raw),
                    ("docker-compose.python.yml", python_raw),
                    ("docker-compose.unix.yml", unix_raw)):
        if "name" in raw:
            errors.append(f"{fn}: a top-level 'name:' is rejected by compose v1; the project "
                          "name belongs in deploy/.env (COMPOSE_PROJECT_NAME)")
    env_path = os.path.join(root, "deploy", ".env")
    env_lines = open(env_path).read().splitlines() if os.path.isfile(env_path) else []
    if "COMPOSE_PROJECT_NAME=ps" not in env_lines:
        errors.append("deploy/.env: must set COMPOSE_PROJECT_NAME=ps (the README's volume names)")
    variables = compose_variables(base_raw, {})
    compose_variables(gpu_raw, variables)
    compose_variables(python_raw, variables)
    compose_variables(unix_raw, variables)
    for name, default in variables.items():
        if default is None:
            errors.append(f"compose: ${{{name}}} has no default (write ${{{name}:-VALUE}})")
    for needed in ("PS_MODE", "PS_WORKERS", "PS_LR", "PS_EPOCHS"):
        if needed not in variables:
            errors.append(f"compose: no ${{{needed}:-...}} variable; the README promises it")
    envs = [{}]
    for name in sorted(variables):
        for alt in ALTERNATIVES.get(name, []):
            envs.append({name: alt})
    for env in envs:
        doc = interpolate(base_raw, env, "docker-compose.yml", errors)
        check_compose(doc, env, ["docker-compose.yml"], root, bins, docker_uid, errors)
        gpu = interpolate(gpu_raw, env, "docker-compose.gpu.yml", errors)
        merged = merge_override(doc, gpu, "docker-compose.gpu.yml", errors)
        files = ["docker-compose.yml", "docker-compose.gpu.yml"]
        workers = check_compose(merged, env, files, root, bins, docker_uid, errors) or {}
        for name, (svc, f) in workers.items():
            w = f"{' + '.join(files)}: {name}"
            if f.get("device") != "cuda":
                errors.append(f"{w}: GPU workers must pass --device=cuda, got {f.get('device')}")
            devices = (((svc.get("deploy") or {}).get("resources") or {})
                       .get("reservations") or {}).get("devices") or []
            if not any("gpu" in (d.get("capabilities") or []) for d in devices):
                errors.append(f"{w}: reserves no GPU (deploy.resources.reservations.devices)")
            if (svc.get("build") or {}).get("dockerfile") != "deploy/Dockerfile.cuda":
                errors.append(f"{w}: GPU workers must build deploy/Dockerfile.cuda")
        python = interpolate(python_raw, env, "docker-compose.python.yml", errors)
        check_python_override(doc, merge_override(doc, python, "docker-compose.python.yml", errors),
                              "docker-compose.yml + docker-compose.python.yml", errors)
        unix = interpolate(unix_raw, env, "docker-compose.unix.yml", errors)
        new = [n for n in (unix.get("services") or {}) if n not in doc["services"]]
        check_unix_override(doc, merge_override(doc, unix, "docker-compose.unix.yml", errors, new),
                            bins, docker_uid, f"docker-compose.yml + docker-compose.unix.yml with "
                            f"{env or 'defaults'}", errors)
        cases += 1
    # Without the override, no worker asks for CUDA.
    doc = interpolate(base_raw, {}, "docker-compose.yml", errors)
    for name, svc in doc["services"].items():
        if "--device=cuda" in compose_argv(svc, name, errors):
            errors.append(f"docker-compose.yml: {name} passes --device=cuda without the GPU override")
    alts = "; ".join(f"{k}={'|'.join(v)}" for k, v in ALTERNATIVES.items() if k in variables)
    return (f"compose: {len(base_raw.get('services', {}))} services, alone and with the GPU, "
            f"Python and unix-socket overrides, in {cases} environments: the defaults, then one "
            f"of {alts}")


TLS_FLAGS = {"tls_cert", "tls_key", "tls_ca", "tls_server_name", "auth_token_file", "insecure"}


def check_unix_flags(w, flags, base_svc, name, own, errors):
    """A service of the unix-socket override: no TLS flag, and every flag but
    its own address (`own`) as the base file has it."""
    base_flags = parse_flags(compose_argv(base_svc, name, []))
    for k in sorted(set(flags) | set(base_flags)):
        if k in TLS_FLAGS and k in flags:
            errors.append(f"{w}: carries --{k}; on a unix socket the folder is the access "
                          f"control, no TLS")
        # --metrics_listen: without TLS on loopback only (deploy_monitoring_check).
        elif (k not in TLS_FLAGS and k not in (own, "metrics_listen")
              and flags.get(k) != base_flags.get(k)):
            errors.append(f"{w}: --{k}={flags.get(k)}, the base file has {base_flags.get(k)}")


def check_unix_override(base, merged, bins, docker_uid, where, errors):
    """docker-compose.unix.yml over the base file (see the docstring)."""
    services = merged["services"]
    role = {n: compose_argv(s, n, [])[:1] for n, s in services.items()}
    servers = {n: s for n, s in services.items() if role[n] == ["ps_server"]}
    workers = {n: s for n, s in services.items() if role[n] == ["ps_worker"]}
    sockets = {}  # shard -> unix: address
    folders = set()
    for name, svc in servers.items():
        w = f"{where}: {name}"
        argv = compose_argv(svc, w, errors)
        check_argv(argv, bins, w, errors)
        f = parse_flags(argv)
        shard = name.rsplit("-", 1)[1]
        listen = str(f.get("listen", ""))
        m = re.fullmatch(r"unix:(/.+)/shard-(\d+)\.sock", listen)
        if not m or m.group(2) != shard or str(f.get("shard_id")) != shard:
            errors.append(f"{w}: must listen on unix:DIR/shard-{shard}.sock (its own shard, "
                          f"--shard_id={shard}), has --listen={listen} --shard_id={f.get('shard_id')}")
            continue
        sockets[int(shard)] = listen
        folders.add(m.group(1))
        check_unix_flags(w, f, base["services"][name], name, "listen", errors)
    order = [sockets[i] for i in sorted(sockets)]
    if sorted(sockets) != list(range(len(servers))):
        errors.append(f"{where}: the servers' shards are {sorted(sockets)}")
    for name, svc in workers.items():
        w = f"{where}: {name}"
        argv = compose_argv(svc, w, errors)
        check_argv(argv, bins, w, errors)
        f = parse_flags(argv)
        if str(f.get("servers", "")).split(",") != order:
            errors.append(f"{w}: --servers={f.get('servers')} must name the servers' sockets in "
                          f"shard order: {','.join(order)}")
        check_unix_flags(w, f, base["services"][name], name, "servers", errors)
    if len(folders) != 1:
        errors.append(f"{where}: the servers' sockets must share one folder, have {sorted(folders)}")
        return
    folder = folders.pop()
    volume = None
    for name in list(servers) + list(workers):
        mnt = compose_mounts(services[name]).get(folder)
        if mnt is None or mnt["read_only"]:
            errors.append(f"{where}: {name} must mount the sockets' volume read-write at {folder}")
        elif volume not in (None, mnt["source"]):
            errors.append(f"{where}: {name} mounts {mnt['source']} at {folder}, the others {volume}")
        else:
            volume = mnt["source"]
    if volume not in (merged.get("volumes") or {}):
        errors.append(f"{where}: the sockets' volume '{volume}' is not declared")
    # The one-shot that makes the folder ps_server's: 0700, the image's user.
    preparers = [n for n, s in services.items() if n not in servers and n not in workers and
                 (compose_mounts(s).get(folder) or {}).get("source") == volume]
    if len(preparers) != 1:
        errors.append(f"{where}: needs one service that prepares the sockets' folder "
                      f"{folder}, has {preparers}")
        return
    prep = preparers[0]
    psvc = services[prep]
    script = " ".join(compose_argv(psvc, prep, errors))
    check_compose_hardening(psvc, f"{where}: {prep}", errors)
    if str(psvc.get("user", "")).split(":")[0] not in ("0", "root"):
        errors.append(f"{where}: {prep} must run as root to chown the folder")
    if not re.search(rf"\bchmod 0?700 {re.escape(folder)}\b", script):
        errors.append(f"{where}: {prep} must chmod {folder} to mode 0700 (ps_server refuses a "
                      f"socket folder that others can enter), runs {script!r}")
    if docker_uid is not None and not re.search(
            rf"\bchown {docker_uid}(:\d+)? {re.escape(folder)}\b", script):
        errors.append(f"{where}: {prep} must chown {folder} to the image's user {docker_uid}, "
                      f"as which the servers run, runs {script!r}")
    for name in list(servers) + list(workers):
        svc = services[name]
        check_compose_hardening(svc, f"{where}: {name}", errors)
        if name in servers and ((svc.get("depends_on") or {}).get(prep) or {}).get(
                "condition") != "service_completed_successfully":
            errors.append(f"{where}: {name} must depend on {prep} with condition "
                          f"service_completed_successfully (the folder is ready)")


def check_python_override(base, merged, where, errors):
    """docker-compose.python.yml over the base file: every worker runs
    `python3 -u SCRIPT` on the Dockerfile's python target, with the
    environment ps.connect_from_env() reads: PS_WORKER_ID its service's index,
    PS_NUM_WORKERS the servers' --num_workers, PS_SERVERS the base workers'
    --servers, PS_TLS_DIR the read-only certificates volume (mutual TLS with
    its own worker-<i> files); no ps_worker flag left, the hardening kept;
    servers and certificates untouched."""
    services = merged["services"]
    servers = {n: s for n, s in services.items() if "ps_server" in compose_argv(s, n, [])[:1]}
    num_workers = {parse_flags(compose_argv(s, n, [])).get("num_workers")
                   for n, s in servers.items()}
    for name, svc in base["services"].items():
        if not name.startswith("ps-worker-"):
            if services[name] != svc:
                errors.append(f"{where}: changes {name}, which is not a worker")
            continue
        w = f"{where}: {name}"
        py = services[name]
        index = name.rsplit("-", 1)[1]
        base_flags = parse_flags(compose_argv(svc, name, []))
        argv = compose_argv(py, w, errors)
        build = py.get("build") or {}
        # The cluster comes from the environment, not from ps_worker's flags.
        cluster_flags = {"servers", "worker_id", "num_workers", "tls_ca", "tls_cert", "tls_key"}
        if argv[:2] != ["python3", "-u"] or len(argv) < 3 or any(
                a.split("=")[0].lstrip("-") in cluster_flags for a in argv[2:]):
            errors.append(f"{w}: must run `python3 -u SCRIPT ...` with the cluster in the "
                          f"environment, not in ps_worker's flags; runs {argv}")
        elif argv[2] != PYTHON_WORKER_SCRIPT:
            errors.append(f"{w}: default script {argv[2]}, the python image has "
                          f"{PYTHON_WORKER_SCRIPT}")
        if build.get("dockerfile") != "deploy/Dockerfile" or build.get("target") != "python":
            errors.append(f"{w}: must build deploy/Dockerfile's python target, builds {build}")
        env = py.get("environment") or {}
        if isinstance(env, list):
            env = dict(str(e).partition("=")[::2] for e in env)
        env = {k: str(v) for k, v in env.items()}
        want = {"PS_WORKER_ID": index, "PS_SERVERS": str(base_flags.get("servers")),
                "PS_NUM_WORKERS": next(iter(num_workers)) if len(num_workers) == 1 else "?"}
        for k, v in want.items():
            if env.get(k) != v:
                errors.append(f"{w}: {k}={env.get(k)}, expected {v}")
        mounts = compose_mounts(py)
        tls = env.get("PS_TLS_DIR")
        certs_mount = os.path.dirname(str(base_flags.get("tls_cert", "")))
        if tls is None or tls != certs_mount or not mounts.get(tls, {}).get("read_only"):
            errors.append(f"{w}: PS_TLS_DIR={tls} must be the read-only certificates mount "
                          f"{certs_mount} (mutual TLS with worker-{index}'s files)")
        check_compose_hardening(py, w, errors)


# --- Kubernetes ---------------------------------------------------------------

class Kubectl:
    """The kubectl whose `kubectl kustomize` renders the overlays."""

    def __init__(self, path):
        self.path = path
        out = run([path, "version", "--client", "-o", "json"])
        try:
            info = json.loads(out.stdout)
            self.version = info["clientVersion"]["gitVersion"]
        except (ValueError, KeyError):
            raise SystemExit(f"deploy_config_check: '{path} version --client -o json' fails: "
                             f"{out.stderr.strip() or out.stdout.strip()}")
        # kubectl 1.20 and older do not report the kustomize they contain.
        self.kustomize_version = info.get("kustomizeVersion", "version not reported")
        self._rendered = {}  # digest of a k8s/ tree -> {overlay: render()'s result}

    def render(self, k8s, names):
        """{name: (resources, None) or (None, error)}: `kubectl kustomize` of
        each overlay K8S/name, parsed. Remembered per content of K8S, so the
        self-check renders again only the trees that it changed."""
        digest = hashlib.sha256()
        for dirpath, dirs, files in os.walk(k8s):
            dirs.sort()
            for fn in sorted(files):
                p = os.path.join(dirpath, fn)
                digest.update(os.path.relpath(p, k8s).encode() + b"\0")
                with open(p, "rb") as f:
                    digest.update(f.read() + b"\0")
        key = digest.hexdigest()
        if key not in self._rendered:
            # kustomize does not follow symlinked files (as in Bazel's
            # runfiles), so it renders a plain copy.
            with tempfile.TemporaryDirectory() as tmp:
                shutil.copytree(k8s, os.path.join(tmp, "k8s"))
                self._rendered[key] = {
                    name: self._kustomize(os.path.join(tmp, "k8s", name)) for name in names}
        return self._rendered[key]

    def _kustomize(self, path):
        out = run([self.path, "kustomize", path])
        if out.returncode != 0:
            # Leaves out kustomize 5's deprecation warnings (bases,
            # patchesStrategicMerge), which it also prints on success.
            return None, " ".join(l for l in out.stderr.splitlines()
                                  if l.strip() and not l.startswith("# Warning:"))
        try:
            return [d for d in yaml.safe_load_all(out.stdout) if d], None
        except yaml.YAMLError as e:
            return None, f"its output is not YAML: {e}"


def named_paths(k8s):
    """Every path that a kustomization under K8S names: each string in a
    kustomization.yaml (resources, bases, patches, ...) read as a path
    relative to that kustomization's directory."""
    out = set()
    for dirpath, _, files in os.walk(k8s):
        if "kustomization.yaml" not in files:
            continue
        try:
            with open(os.path.join(dirpath, "kustomization.yaml")) as f:
                stack = [yaml.safe_load(f)]
        except yaml.YAMLError:
            continue  # kubectl kustomize reports it
        while stack:
            o = stack.pop()
            if isinstance(o, dict):
                stack += o.values()
            elif isinstance(o, list):
                stack += o
            elif isinstance(o, str):
                out.add(os.path.normpath(os.path.join(dirpath, o)))
    return out


def quantity(q):
    """A Kubernetes CPU quantity in cores."""
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def field_ref(path, pod, where, errors):
    if path == "metadata.name":
        return pod["name"]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m and m.group(2) in pod[m.group(1)]:
        return pod[m.group(1)][m.group(2)]
    errors.append(f"{where}: fieldRef {path} is not set on this pod (pods get "
                  f"{sorted(pod['labels']) + sorted(pod['annotations'])})")
    return ""


def pod_argv(container, pod, configmaps, where, errors):
    """The container's command line with $(VAR) expanded as the kubelet would."""
    env = dict(pod["env"])
    for ef in container.get("envFrom", []):
        ref = (ef.get("configMapRef") or {}).get("name")
        if ref not in configmaps:
            errors.append(f"{where}: envFrom names ConfigMap {ref}, which is not among the resources")
            continue
        env.update(configmaps[ref])
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif "fieldRef" in (e.get("valueFrom") or {}):
            env[e["name"]] = field_ref(e["valueFrom"]["fieldRef"]["fieldPath"], pod, where, errors)
        else:
            errors.append(f"{where}: env {e['name']}: only value and fieldRef are modelled")
    if "command" not in container:
        errors.append(f"{where}: set command explicitly (the image's CMD is a standalone job)")
    argv = [str(a) for a in container.get("command", []) + container.get("args", [])]

    def sub(m):
        if m.group(0).startswith("$$"):
            return m.group(0)[1:]
        if m.group(1) not in env:
            errors.append(f"{where}: $({m.group(1)}) is defined nowhere (the kubelet would pass "
                          f"it literally)")
            return m.group(0)
        return env[m.group(1)]
    return [re.sub(r"\$?\$\((\w+)\)", sub, a) for a in argv]


def check_resources(container, where, errors):
    res = container.get("resources") or {}
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in (res.get(kind) or {}):
                errors.append(f"{where}: resources.{kind}.{r} is not set")


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


def check_k8s_build(name, resources, bins, docker_uid, errors):
    where = f"k8s/{name}"
    expect = KUSTOMIZATIONS[name]
    by_kind = {}
    for r in resources:
        by_kind.setdefault(r.get("kind"), []).append(r)
    configmaps = {r["metadata"]["name"]: {k: str(v) for k, v in (r.get("data") or {}).items()}
                  for r in by_kind.get("ConfigMap", [])}
    for s in by_kind.get("Secret", []):
        errors.append(f"{where}: renders Secret {s['metadata'].get('name')}: certificates and "
                      f"keys are made by deploy/k8s/make_secrets.sh, never committed")
    stss, jobs = by_kind.get("StatefulSet", []), by_kind.get("Job", [])
    if len(stss) != 1 or len(jobs) != 1:
        errors.append(f"{where}: expected one StatefulSet (servers) and one Job (workers), "
                      f"got {len(stss)} and {len(jobs)}")
        return None
    sts, job = stss[0], jobs[0]
    sname = sts["metadata"]["name"]
    S = int(sts["spec"].get("replicas", 1))

    # Servers: one pod per ordinal.
    spec = sts["spec"]["template"]["spec"]
    labels = sts["spec"]["template"]["metadata"].get("labels", {})
    svc_name = sts["spec"].get("serviceName")
    services = [s for s in by_kind.get("Service", []) if s["metadata"]["name"] == svc_name]
    if len(services) != 1:
        errors.append(f"{where}: StatefulSet {sname} names serviceName {svc_name}, which is not a Service here")
        return None
    svc = services[0]
    if svc["spec"].get("clusterIP") != "None":
        errors.append(f"{where}: Service {svc_name} must be headless (clusterIP: None) for per-pod DNS names")
    if any(labels.get(k) != v for k, v in (svc["spec"].get("selector") or {}).items()):
        errors.append(f"{where}: Service {svc_name}'s selector does not match the server pods' labels")
    containers = spec.get("containers", [])
    if len(containers) != 1:
        errors.append(f"{where}: server pods must have one container")
        return None
    c = containers[0]
    check_resources(c, f"{where}: {sname}", errors)
    modes, ports, num_workers, health, secrets = set(), set(), set(), set(), set()
    for i in range(S):
        pod = {"name": f"{sname}-{i}", "env": {},
               "labels": {**labels, "apps.kubernetes.io/pod-index": str(i),
                          "statefulset.kubernetes.io/pod-name": f"{sname}-{i}"},
               "annotations": {}}
        w = f"{where}: pod {sname}-{i}"
        argv = pod_argv(c, pod, configmaps, w, errors)
        check_argv(argv, bins, w, errors)
        if argv[:1] != ["ps_server"]:
            errors.append(f"{w}: the StatefulSet must run ps_server, runs {argv[:1]}")
            return None
        f = parse_flags(argv)
        if int_flag(f, "shard_id", w, errors) != i:
            errors.append(f"{w}: --shard_id={f.get('shard_id')}, expected {i} (its ordinal)")
        if int_flag(f, "num_shards", w, errors) != S:
            errors.append(f"{w}: --num_shards={f.get('num_shards')}, but the StatefulSet has {S} replicas")
        num_workers.add(int_flag(f, "num_workers", w, errors))
        modes.add(f.get("mode", "sync"))
        ports.add(host_port(f.get("listen", "0.0.0.0:50051"), w, errors)[1])
        health.add(f.get("health_listen"))
        secrets.add(check_k8s_tls("server", i, f, spec, c, w, errors))
    if len(ports) != 1:
        errors.append(f"{where}: servers listen on different ports {ports}")
        return None
    port = ports.pop()
    if modes != {expect["mode"]}:
        errors.append(f"{where}: servers run --mode={sorted(modes)}, expected {expect['mode']}")
    named = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    if port not in named.values():
        errors.append(f"{where}: server containerPorts {named} do not include the --listen port {port}")
    # The kubelet's probes have no client certificate: they ask the plaintext
    # health port (--health_listen), which serves only grpc.health.v1.
    health_port = None
    if len(health) != 1 or None in health:
        errors.append(f"{where}: servers need one --health_listen=0.0.0.0:PORT for the probes, "
                      f"have {sorted(map(str, health))}")
    else:
        health_host, health_port = host_port(health.pop(), where, errors)
        if health_host in LOOPBACK_HOSTS:
            errors.append(f"{where}: --health_listen on {health_host}: the kubelet probes the "
                          f"pod's address, not its loopback")
        if health_port not in named.values():
            errors.append(f"{where}: server containerPorts {named} do not include the "
                          f"--health_listen port {health_port}")
    for probe in ("readinessProbe", "livenessProbe"):
        g = (c.get(probe) or {}).get("grpc")
        probed = named.get(g.get("port"), g.get("port")) if g else None
        if not g:
            errors.append(f"{where}: {probe} must be a grpc probe (the health service)")
        elif probed == port:
            errors.append(f"{where}: {probe} asks the mutual-TLS port {port}: the kubelet has no "
                          f"client certificate, so the handshake fails; probe the --health_listen "
                          f"port")
        elif probed != health_port:
            errors.append(f"{where}: {probe} asks port {g.get('port')}, not the --health_listen "
                          f"port {health_port}")
    for sp in svc["spec"].get("ports", []):
        target = sp.get("targetPort", sp.get("port"))
        target = named.get(target, target)
        if sp.get("port") != port or target != port:
            errors.append(f"{where}: Service port {sp} does not lead to the server port {port}")
    want_servers = ",".join(f"{sname}-{i}.{svc_name}:{port}" for i in range(S))

    # Workers: one pod per completion index.
    js = job["spec"]
    if js.get("completionMode") != "Indexed":
        errors.append(f"{where}: the worker Job must be completionMode: Indexed")
    W = js.get("completions")
    if js.get("parallelism") != W:
        errors.append(f"{where}: Job parallelism {js.get('parallelism')} != completions {W}: "
                      f"sync steps need every worker at once")
    if num_workers != {W}:
        errors.append(f"{where}: servers' --num_workers={sorted(num_workers, key=str)}, but the Job "
                      f"has {W} completions")
    tspec = js["template"]["spec"]
    # A failed worker is restarted and rejoins at the servers' step.
    if tspec.get("restartPolicy") != "OnFailure":
        errors.append(f"{where}: worker pods must have restartPolicy: OnFailure (a failed worker "
                      f"rejoins)")
    if int(js.get("backoffLimit", 6)) < 1:
        errors.append(f"{where}: the worker Job's backoffLimit must let a worker restart")
    # Servers: a checkpoint volume per pod, where --checkpoint_dir points.
    claims = [t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])]
    sflags = parse_flags(pod_argv(c, {"name": f"{sname}-0", "env": {}, "labels": {
        **labels, "apps.kubernetes.io/pod-index": "0"}, "annotations": {}}, configmaps,
        where, []))
    mounts = {m.get("mountPath"): m.get("name") for m in c.get("volumeMounts", [])}
    ckpt = sflags.get("checkpoint_dir")
    if not ckpt or mounts.get(ckpt) not in claims:
        errors.append(f"{where}: servers must write --checkpoint_dir to a volume of their own "
                      f"(volumeClaimTemplates {claims}, mounts {mounts}, --checkpoint_dir={ckpt})")
    wc = tspec.get("containers", [{}])[0]
    check_resources(wc, f"{where}: {job['metadata']['name']}", errors)
    gpus = ((wc.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
    for i in range(W or 0):
        pod = {"name": f"{job['metadata']['name']}-{i}",
               "env": {"JOB_COMPLETION_INDEX": str(i)},
               "labels": {"batch.kubernetes.io/job-completion-index": str(i)},
               "annotations": {"batch.kubernetes.io/job-completion-index": str(i)}}
        w = f"{where}: worker pod {i}"
        argv = pod_argv(wc, pod, configmaps, w, errors)
        check_argv(argv, bins, w, errors)
        if argv[:1] != ["ps_worker"]:
            errors.append(f"{w}: the Job must run ps_worker, runs {argv[:1]}")
            return None
        f = parse_flags(argv)
        if int_flag(f, "worker_id", w, errors) != i:
            errors.append(f"{w}: --worker_id={f.get('worker_id')}, expected {i} (its completion index)")
        if int_flag(f, "num_workers", w, errors) != W:
            errors.append(f"{w}: --num_workers={f.get('num_workers')}, but the Job has {W} completions")
        if f.get("servers") != want_servers:
            errors.append(f"{w}: --servers={f.get('servers')}, expected every server pod in shard "
                          f"order: {want_servers}")
        secrets.add(check_k8s_tls("worker", i, f, tspec, wc, w, errors))
        wmounts = k8s_mounts(tspec, wc)
        for flag in ("save_model", "metrics_file"):
            path = f.get(flag)
            mount, info = mount_for(path, wmounts) if path else (None, None)
            if path and (mount is None or info["read_only"]):
                errors.append(f"{w}: --{flag}={path} is not on a writable volume (the root "
                              f"filesystem is read-only; mounts {sorted(wmounts)})")
        threads = f.get("threads")
        cpu = ((wc.get("resources") or {}).get("limits") or {}).get("cpu")
        if threads is not None and cpu is not None and int(threads) > quantity(cpu):
            errors.append(f"{w}: --threads={threads} exceeds the CPU limit {cpu}")
        if expect["gpu"]:
            if f.get("device") != "cuda":
                errors.append(f"{w}: GPU workers must pass --device=cuda, got {f.get('device')}")
        elif f.get("device") == "cuda":
            errors.append(f"{w}: passes --device=cuda outside the GPU overlay")
    images = (c.get("image"), wc.get("image"))
    if expect["gpu"] == (images[0] == images[1]):
        errors.append(f"{where}: server image {images[0]}, worker image {images[1]}: workers must run "
                      f"{'the CUDA image' if expect['gpu'] else 'the same image as the servers'}")
    if expect["gpu"] and not (gpus and int(gpus) >= 1):
        errors.append(f"{where}: worker pods request no nvidia.com/gpu (limits)")
    if not expect["gpu"] and gpus:
        errors.append(f"{where}: worker pods request nvidia.com/gpu outside the GPU overlay")
    check_pod_hardening(spec, docker_uid, f"{where}: servers", errors)
    check_pod_hardening(tspec, docker_uid, f"{where}: workers", errors)
    worker_labels = js["template"].get("metadata", {}).get("labels", {})
    peers_in = check_network_policy(by_kind, labels, worker_labels, port, named, where, errors)
    return peers_in, secrets - {None}


def check_k8s(root, bins, docker_uid, kubectl, errors):
    k8s = os.path.join(root, "deploy", "k8s")
    found = sorted(d for d in os.listdir(k8s)
                   if os.path.isfile(os.path.join(k8s, d, "kustomization.yaml")))
    if found != sorted(KUSTOMIZATIONS):
        errors.append(f"k8s: kustomizations {found}, expected {sorted(KUSTOMIZATIONS)} "
                      f"(add new ones to the test's KUSTOMIZATIONS)")
    names = [n for n in found if n in KUSTOMIZATIONS]
    rendered = kubectl.render(k8s, names)
    peers_in, secrets = None, set()  # the servers' NetworkPolicy's peers, in base
    for name in sorted(names, key=lambda n: (KUSTOMIZATIONS[n].get("admin", False), n)):
        resources, err = rendered[name]
        if resources is None:
            errors.append(f"k8s/{name}: kubectl kustomize deploy/k8s/{name} fails: {err}")
        elif KUSTOMIZATIONS[name].get("admin"):
            secrets |= check_k8s_admin(name, resources, docker_uid, peers_in, errors)
        else:
            out = check_k8s_build(name, resources, bins, docker_uid, errors)
            if out:
                secrets |= out[1]
                if name == "base":
                    peers_in = out[0]
    check_make_secrets(root, secrets, errors)
    check_no_key_material(root, errors)
    # Every other YAML file under k8s/ is named by some kustomization (which,
    # rendered above, proves that kubectl reads it).
    named = named_paths(k8s)
    for dirpath, _, files in os.walk(k8s):
        for fn in files:
            p = os.path.normpath(os.path.join(dirpath, fn))
            if fn.endswith((".yaml", ".yml")) and fn != "kustomization.yaml" and p not in named:
                errors.append(f"{os.path.relpath(p, root)} is not used by any kustomization")
    return (f"k8s: {len(found)} kustomizations ({', '.join(found)}) rendered by "
            f"{kubectl.path} {kubectl.version} (kustomize {kubectl.kustomize_version})")


# --- Dockerfiles --------------------------------------------------------------

def dockerfile_stages(path):
    """[(FROM line, [instruction lines])], continuation lines joined."""
    with open(path) as f:
        text = re.sub(r"\\\n", " ", f.read())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append((line, []))
        elif stages:
            stages[-1][1].append(line)
    return stages


def check_dockerfiles(root, bins, locations, errors):
    uid = None
    for fn, cuda in (("Dockerfile", False), ("Dockerfile.cuda", True)):
        path = os.path.join(root, "deploy", fn)
        where = f"deploy/{fn}"
        with open(path) as f:
            if re.search(r"^#\s*syntax\s*=", f.read(), re.M | re.I):
                errors.append(f"{where}: a '# syntax=' line makes BuildKit fetch a frontend from "
                              "a registry; the built-in one reads these files")
        stages = dockerfile_stages(path)
        builds = [i for i, (line, _) in enumerate(stages) if re.search(r"\sAS build$", line, re.I)]
        if len(stages) < 2 or not builds or builds[0] == len(stages) - 1:
            errors.append(f"{where}: needs a stage 'AS build' and a runtime stage after it")
            continue
        named = {}
        for i, (line, _) in enumerate(stages):
            m = re.search(r"\sAS\s+(\S+)$", line, re.I)
            if m:
                named[m.group(1).lower()] = i
        # The runtime stage: `AS runtime` when other targets build on it, in
        # which case the last stage (the default target) is a bare `FROM runtime`.
        rt_index = named.get("runtime", len(stages) - 1)
        if rt_index != len(stages) - 1 and (
                not re.fullmatch(r"FROM\s+runtime", stages[-1][0], re.I) or stages[-1][1]):
            errors.append(f"{where}: the last stage (the default target) must be a bare "
                          f"'FROM runtime', is {stages[-1][0]!r} with {len(stages[-1][1])} "
                          "instructions")
        build = " ".join(stages[builds[0]][1])
        if "deploy/setup_debian.sh" not in build:
            errors.append(f"{where}: the build stage must install with deploy/setup_debian.sh")
        m = re.search(r"bazel build ([^&]*)", build)
        if not m:
            errors.append(f"{where}: no 'bazel build' in the build stage")
            continue
        args = m.group(1).split()
        if cuda != ("--config=cuda" in args):
            errors.append(f"{where}: --config=cuda must be {'set' if cuda else 'absent'}: {args}")
        targets = {a[3:] for a in args if a.startswith("//:")}
        for b in BINARY_NAMES:
            if b not in targets:
                errors.append(f"{where}: does not build //:{b}")
        copied = {}
        for cp in re.findall(r"cp -L ([^&]*)", build):
            for p in cp.split()[:-1]:
                if p.startswith("bazel-bin/"):
                    copied[os.path.basename(p)] = p[len("bazel-bin/"):]
        for b in BINARY_NAMES:
            if copied.get(b) != locations[b]:
                errors.append(f"{where}: copies {copied.get(b)} for {b}; the build puts it at "
                              f"bazel-bin/{locations[b]}")
        runtime = stages[rt_index][1]
        rt = " ".join(runtime)
        users = [l.split()[1] for l in runtime if l.upper().startswith("USER ")]
        if not users or users[-1].split(":")[0] in ("root", "0"):
            errors.append(f"{where}: the runtime stage must end as a non-root USER, has {users}")
        elif not users[-1].split(":")[0].isdigit():
            errors.append(f"{where}: USER should be numeric so runAsNonRoot can verify it")
        else:
            this_uid = int(users[-1].split(":")[0])
            if uid is not None and this_uid != uid:
                errors.append(f"{where}: USER {this_uid} differs from deploy/Dockerfile's {uid}")
            uid = this_uid
        for need, why in (("dataset-fashion-mnist", "the default job needs the dataset"),
                          ("runtime-packages.txt", "the shared libraries"),
                          ("COPY --from=build /out/bin/ /usr/local/bin/", "the binaries on PATH")):
            if need not in rt:
                errors.append(f"{where}: the runtime stage lacks {need} ({why})")
        # compose's certificates service runs make_certs.sh, which runs openssl.
        if not re.search(r"apt-get install[^&]*\sopenssl(\s|$)", rt):
            errors.append(f"{where}: the runtime stage does not install openssl, which "
                          f"make_certs.sh (compose's certificates service) runs")
        if not re.search(r"(^|\s)COPY\s+deploy/make_certs\.sh\s+/usr/local/bin/(make_certs\.sh)?(\s|$)", rt):
            errors.append(f"{where}: the runtime stage does not COPY deploy/make_certs.sh to "
                          f"/usr/local/bin/, where compose's certificates service runs it")
        if "runtime_packages.sh" not in build:
            errors.append(f"{where}: the build stage must list runtime packages with runtime_packages.sh")
        if not cuda:
            check_python_stages(stages, named, uid, where, errors)
    # .dockerignore keeps Bazel's output trees and .git out of the context.
    ignore_path = os.path.join(root, ".dockerignore")
    patterns = []
    if os.path.isfile(ignore_path):
        with open(ignore_path) as f:
            patterns = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    workspace = os.path.basename(os.path.abspath(root))
    for name in ["bazel-bin", "bazel-out", "bazel-testlogs", f"bazel-{workspace}", "bazel-ps", ".git",
                 "third_party/bazel-bin"]:
        if not any(fnmatch.fnmatch(name, p) for p in patterns if not p.startswith("!")):
            errors.append(f".dockerignore does not exclude {name} (patterns {patterns})")
    return uid, f"Dockerfiles: build and runtime stages, runtime user {uid}"


# Where deploy/Dockerfile's python target puts the compose override's default
# worker script (docker-compose.python.yml's PS_PYTHON_SCRIPT default).
PYTHON_WORKER_SCRIPT = "/usr/local/share/ps/python_worker.py"


def check_python_stages(stages, named, uid, where, errors):
    """deploy/Dockerfile's python target: a build-python stage builds the wheel
    on the build stage and lists the extension's runtime packages; the python
    stage adds python3, numpy, torch, those packages, the unpacked wheel and
    the default worker script to the runtime image, and runs as its user."""
    for stage in ("build-python", "python"):
        if stage not in named:
            errors.append(f"{where}: no stage 'AS {stage}' (the python target, "
                          "docker-compose.python.yml's image)")
            return
    line, body = stages[named["build-python"]]
    text = " ".join(body)
    if not re.match(r"FROM\s+build\s", line, re.I):
        errors.append(f"{where}: build-python must start FROM build (its packages, Bazel's "
                      f"cache), is {line!r}")
    if not re.search(r"bazel build [^&]*//python:wheel", text) or "runtime_packages.sh" not in text:
        errors.append(f"{where}: build-python must bazel build //python:wheel and list the "
                      "extension's runtime packages with runtime_packages.sh")
    line, body = stages[named["python"]]
    text = " ".join(body)
    if not re.match(r"FROM\s+runtime\s", line, re.I):
        errors.append(f"{where}: the python stage must start FROM runtime, is {line!r}")
    install = re.search(r"apt-get install([^&]*)", text)
    for pkg in ("python3-torch", "python3-numpy", "runtime-packages.txt"):
        if not install or pkg not in install.group(1):
            errors.append(f"{where}: the python stage does not apt-get install {pkg}")
    if "COPY --from=build-python /out/python/root/ /" not in text:
        errors.append(f"{where}: the python stage does not COPY the unpacked wheel")
    if not re.search(r"COPY\s+deploy/python_worker\.py\s+" + re.escape(PYTHON_WORKER_SCRIPT), text):
        errors.append(f"{where}: the python stage does not COPY deploy/python_worker.py to "
                      f"{PYTHON_WORKER_SCRIPT}")
    users = [l.split()[1] for l in body if l.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] != str(uid):
        errors.append(f"{where}: the python stage must end as USER {uid} like the runtime "
                      f"stage, has {users}")


def check_runtime_packages(root, bins, errors):
    """deploy/runtime_packages.sh, which the Dockerfiles run, works on this build."""
    out = run([os.path.join(root, "deploy", "runtime_packages.sh")] + [bins[b].path for b in BINARY_NAMES])
    pkgs = out.stdout.split()
    if out.returncode != 0 or not any(p.startswith("libgrpc++") for p in pkgs):
        errors.append(f"deploy/runtime_packages.sh on the binaries: exit {out.returncode}, "
                      f"packages {pkgs}, {out.stderr.strip()}")
    return f"runtime packages of the binaries: {' '.join(pkgs)}"


# --- all checks and the self-check ---------------------------------------------

def check_make_certs(root, errors):
    """The flags compose passes to deploy/make_certs.sh exist, when the script
    is here (deploy/BUILD's :cluster_configs does not carry it into the test)."""
    path = os.path.join(root, "deploy", "make_certs.sh")
    if not os.path.isfile(path):
        return (f"deploy/make_certs.sh is not among this test's files: compose's flags for it "
                f"checked against the test's list {sorted(MAKE_CERTS_FLAGS)} only")
    out = run([path, "--help"])
    for flag in sorted(MAKE_CERTS_FLAGS):
        if f"--{flag}=" not in out.stdout:
            errors.append(f"deploy/make_certs.sh --help does not mention --{flag}=, which this "
                          f"test's MAKE_CERTS_FLAGS lists: {out.stdout[:200]}")
    return f"deploy/make_certs.sh: its --help lists {sorted(MAKE_CERTS_FLAGS)}"


def check_all(root, bins, locations, kubectl):
    """Checks the configuration files under ROOT; [errors], [notes]."""
    errors, notes = [], []
    uid, note = check_dockerfiles(root, bins, locations, errors)
    notes.append(note)
    notes.append(check_compose_files(root, bins, uid, errors))
    notes.append(check_k8s(root, bins, uid, kubectl, errors))
    notes.append(check_make_certs(root, errors))
    notes.append(monitoring.check_all(root, bins, uid, kubectl, errors))
    return errors, notes


# (description, file under the root, old text, new text, expected error part)
MUTATIONS = [
    ("a server flag renamed in compose", "deploy/docker-compose.yml",
     "- --num_workers=${PS_WORKERS:-3}\n    - --mode", "- --num_worker=${PS_WORKERS:-3}\n    - --mode",
     "--num_worker is not a flag of ps_server"),
    ("a bad mode default in compose", "deploy/docker-compose.yml",
     "${PS_MODE:-sync}", "${PS_MODE:-synchronous}", "--mode=synchronous: ps_server accepts"),
    ("the compose server list out of shard order", "deploy/docker-compose.yml",
     "--servers=ps-server-0:50051,ps-server-1:50051", "--servers=ps-server-1:50051,ps-server-0:50051",
     "in shard order"),
    ("a compose worker count that is not the number of workers", "deploy/docker-compose.yml",
     "${PS_WORKERS:-3}", "${PS_WORKERS:-4}", "worker services"),
    ("a compose worker with the wrong id", "deploy/docker-compose.yml",
     "command: [--worker_id=2,", "command: [--worker_id=1,", "expected 2 (its name)"),
    ("a healthcheck flag renamed", "deploy/docker-compose.yml",
     "--servers=127.0.0.1:8081", "--server=127.0.0.1:8081", "--server is not a flag of ps_ctl"),
    ("workers not waiting for healthy servers", "deploy/docker-compose.yml",
     "condition: service_healthy", "condition: service_started", "condition service_healthy"),
    ("a bad --device in the GPU override", "deploy/docker-compose.gpu.yml",
     "/certs/worker-1.key, --device=cuda]", "/certs/worker-1.key, --device=gpu]",
     "--device=gpu: ps_worker accepts"),
    ("worker pods that are never restarted", "deploy/k8s/base/worker-job.yaml",
     "restartPolicy: OnFailure", "restartPolicy: Never", "restartPolicy: OnFailure"),
    ("server checkpoints outside the claim", "deploy/k8s/base/server-statefulset.yaml",
     "- --checkpoint_dir=/checkpoints", "- --checkpoint_dir=/tmp", "a volume of their own"),
    ("a Job completions not matching --num_workers", "deploy/k8s/base/worker-job.yaml",
     "completions: 3", "completions: 4", "completions"),
    ("a server flag renamed in the StatefulSet", "deploy/k8s/base/server-statefulset.yaml",
     "--num_shards=$(PS_NUM_SHARDS)", "--shards=$(PS_NUM_SHARDS)", "--shards is not a flag of ps_server"),
    ("a bad mode in the async overlay", "deploy/k8s/async/kustomization.yaml",
     "PS_MODE=async", "PS_MODE=asynch", "--mode=asynch: ps_server accepts"),
    ("the ConfigMap server list out of order", "deploy/k8s/base/kustomization.yaml",
     "PS_SERVERS=ps-server-0.ps-server:50051,ps-server-1.ps-server:50051",
     "PS_SERVERS=ps-server-1.ps-server:50051,ps-server-0.ps-server:50051", "in shard order"),
    ("more StatefulSet replicas than servers listed", "deploy/k8s/base/server-statefulset.yaml",
     "replicas: 2", "replicas: 3", "--num_shards=2, but the StatefulSet has 3 replicas"),
    ("an undefined $(VAR)", "deploy/k8s/base/server-statefulset.yaml",
     "$(PS_LR)", "$(PS_LEARNING_RATE)", "$(PS_LEARNING_RATE) is defined nowhere"),
    ("the GPU overlay without a GPU", "deploy/k8s/gpu/worker-gpu.yaml",
     "nvidia.com/gpu: 1", "example.com/fpga: 1", "request no nvidia.com/gpu"),
    ("the GPU patch left out of its overlay", "deploy/k8s/gpu/kustomization.yaml",
     "patchesStrategicMerge:\n  - worker-gpu.yaml\n", "",
     "deploy/k8s/gpu/worker-gpu.yaml is not used by any kustomization"),
    ("an overlay merging into a ConfigMap that no base generates", "deploy/k8s/async/kustomization.yaml",
     "  - name: ps-config\n    behavior: merge", "  - name: ps-settings\n    behavior: merge",
     "kubectl kustomize deploy/k8s/async fails"),
    ("a readiness probe on the wrong port", "deploy/k8s/base/server-statefulset.yaml",
     "readinessProbe:\n            grpc:\n              port: 8081",
     "readinessProbe:\n            grpc:\n              port: 8082", "readinessProbe asks port 8082"),
    ("a runtime image running as root", "deploy/Dockerfile",
     "USER 10001:10001", "USER root", "non-root USER"),
    ("ps_ctl left out of the image", "deploy/Dockerfile",
     "bazel build //:ps_server //:ps_worker //:ps_ctl", "bazel build //:ps_server //:ps_worker",
     "does not build //:ps_ctl"),
    ("a binary copied from where the build no longer puts it", "deploy/Dockerfile",
     "bazel-bin/tools/ps_bench", "bazel-bin/tests/ps_bench", "the build puts it at"),
    ("a '# syntax' line in the CUDA Dockerfile", "deploy/Dockerfile.cuda",
     "ARG CUDA_VERSION=13.0\n", "# syntax=docker/dockerfile:1\nARG CUDA_VERSION=13.0\n",
     "fetch a frontend"),
    ("a top-level name: in compose", "deploy/docker-compose.yml",
     "\nservices:\n", "\nname: ps\n\nservices:\n", "rejected by compose v1"),
    ("Bazel trees in the Docker context", ".dockerignore",
     "bazel-*\n**/bazel-*\n", "", ".dockerignore does not exclude bazel-bin"),
    # Security: TLS on every server and worker, each with its own certificate.
    ("a compose server without the clients' CA (no mutual TLS)", "deploy/docker-compose.yml",
     "    - --tls_ca=/certs/ca.pem\n    # grpc.health.v1", "    # grpc.health.v1",
     "lacks --tls_ca: mutual TLS"),
    ("a Python worker with another worker's id", "deploy/docker-compose.python.yml",
     'PS_WORKER_ID: "2"', 'PS_WORKER_ID: "1"', "PS_WORKER_ID=1, expected 2"),
    ("Python workers without TLS", "deploy/docker-compose.python.yml",
     "  PS_TLS_DIR: /certs\n", "", "PS_TLS_DIR=None must be the read-only certificates mount"),
    ("Python workers on the default image", "deploy/docker-compose.python.yml",
     "    target: python\n", "", "must build deploy/Dockerfile's python target"),
    ("the python image without torch", "deploy/Dockerfile",
     "python3 python3-numpy python3-torch", "python3 python3-numpy",
     "the python stage does not apt-get install python3-torch"),
    ("the default target not the runtime image", "deploy/Dockerfile",
     "\nFROM runtime\n", "\nFROM python\n", "must be a bare 'FROM runtime'"),
    ("a compose worker with --insecure", "deploy/docker-compose.yml",
     "[--worker_id=1, --tls_cert", "[--worker_id=1, --insecure, --tls_cert", "carries --insecure"),
    ("a compose worker with another worker's certificate", "deploy/docker-compose.yml",
     "/certs/worker-2.pem, --tls_key=/certs/worker-2.key]",
     "/certs/worker-1.pem, --tls_key=/certs/worker-1.key]", "is not worker 2's own file worker-2.pem"),
    ("a compose server with the other shard's key", "deploy/docker-compose.yml",
     "--tls_key=/certs/server-1.key]", "--tls_key=/certs/server-0.key]",
     "is not server 1's own file server-1.key"),
    ("a GPU worker with another worker's certificate", "deploy/docker-compose.gpu.yml",
     "[--worker_id=0, --tls_cert=/certs/worker-0.pem", "[--worker_id=0, --tls_cert=/certs/worker-2.pem",
     "is not worker 0's own file worker-0.pem"),
    ("a unix-socket worker with the shards out of order", "deploy/docker-compose.unix.yml",
     "--servers=unix:/sockets/shard-0.sock,unix:/sockets/shard-1.sock",
     "--servers=unix:/sockets/shard-1.sock,unix:/sockets/shard-0.sock", "in shard order"),
    ("the unix sockets' folder left open to others", "deploy/docker-compose.unix.yml",
     "chmod 0700 /sockets", "chmod 0755 /sockets", "to mode 0700"),
    ("a unix-socket server on the other shard's socket", "deploy/docker-compose.unix.yml",
     "--shard_id=1, --listen=unix:/sockets/shard-1.sock", "--shard_id=1, --listen=unix:/sockets/shard-0.sock",
     "must listen on unix:DIR/shard-1.sock"),
    ("a unix-socket worker still carrying TLS", "deploy/docker-compose.unix.yml",
     "command: [--worker_id=2]", "command: [--worker_id=2, --tls_ca=/certs/ca.pem]",
     "carries --tls_ca"),
    ("the certificates volume mounted writable", "deploy/docker-compose.yml",
     "- certs:/certs:ro", "- certs:/certs", "which is not mounted read-only"),
    ("servers started before the certificates exist", "deploy/docker-compose.yml",
     "condition: service_completed_successfully", "condition: service_started",
     "with condition service_completed_successfully"),
    ("certificates for fewer workers than services", "deploy/docker-compose.yml",
     "--servers=2 --workers=3 --owner", "--servers=2 --workers=2 --owner",
     "make_certs.sh --workers=2, but there are 3 worker services"),
    ("keys owned by root, unreadable to the containers' user", "deploy/docker-compose.yml",
     "--owner=10001:10001", "--owner=0:0", "must belong to the image's user 10001"),
    ("certificates made again at every `up`", "deploy/docker-compose.yml",
     "[ -f /certs/ca.pem ] && ", "", "only when /certs/ca.pem is missing"),
    ("the CA's key left in the volume", "deploy/docker-compose.yml",
     "rm /tmp/pki/ca.key", "true", "must delete the CA's key"),
    ("compose containers with a writable root filesystem", "deploy/docker-compose.yml",
     "read_only: true", "read_only: false", "needs read_only: true"),
    ("a compose healthcheck on the mutual-TLS port without a certificate", "deploy/docker-compose.yml",
     "--servers=127.0.0.1:8081", "--servers=127.0.0.1:50051", "without a client certificate"),
    ("a plaintext compose health port on every interface", "deploy/docker-compose.yml",
     "--health_listen=127.0.0.1:8081", "--health_listen=0.0.0.0:8081", "keep it on the container's loopback"),
    ("a server pod without the clients' CA", "deploy/k8s/base/server-statefulset.yaml",
     "            - --tls_ca=/certs/ca.pem\n", "", "lacks --tls_ca: mutual TLS"),
    ("a worker pod with --insecure", "deploy/k8s/base/worker-job.yaml",
     "- --tls_ca=/certs/ca.pem\n", "- --tls_ca=/certs/ca.pem\n            - --insecure\n",
     "carries --insecure"),
    ("every server pod with shard 0's certificate", "deploy/k8s/base/server-statefulset.yaml",
     "--tls_cert=/certs/server-$(PS_SHARD_ID).pem", "--tls_cert=/certs/server-0.pem",
     "pod ps-server-1: --tls_cert=/certs/server-0.pem is not server 1's own file"),
    ("every worker pod with worker 0's key", "deploy/k8s/base/worker-job.yaml",
     "--tls_key=/certs/worker-$(JOB_COMPLETION_INDEX).key", "--tls_key=/certs/worker-0.key",
     "worker pod 2: --tls_key=/certs/worker-0.key is not worker 2's own file"),
    ("a certificate Secret mounted writable", "deploy/k8s/base/worker-job.yaml",
     "mountPath: /certs\n              readOnly: true", "mountPath: /certs\n              readOnly: false",
     "which is not mounted read-only"),
    ("worker pods with the servers' Secret", "deploy/k8s/base/worker-job.yaml",
     "secretName: ps-tls-worker", "secretName: ps-tls-server", "expected the Secret ps-tls-worker"),
    ("a Secret that make_secrets.sh does not make", "deploy/k8s/base/server-statefulset.yaml",
     "secretName: ps-tls-server", "secretName: ps-tls-servers", "makes no Secret ps-tls-servers"),
    ("key material committed in a manifest", "deploy/k8s/base/network-policy.yaml",
     "          port: 50051\n---\n",
     "          port: 50051\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: ps-tls-leak\n"
     "data:\n  server-0.key: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t\n---\n", "holds certificate or key material"),
    # Security: the pods' securityContext.
    ("server pods without the RuntimeDefault seccomp profile", "deploy/k8s/base/server-statefulset.yaml",
     "        seccompProfile:\n          type: RuntimeDefault\n", "",
     "servers: container ps-server: must set securityContext.seccompProfile.type: RuntimeDefault"),
    ("worker pods that may escalate privileges", "deploy/k8s/base/worker-job.yaml",
     "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true",
     "workers: container ps-worker: must set securityContext.allowPrivilegeEscalation: false"),
    ("server pods with a writable root filesystem", "deploy/k8s/base/server-statefulset.yaml",
     "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false",
     "servers: container ps-server: must set securityContext.readOnlyRootFilesystem: true"),
    ("worker pods keeping a capability", "deploy/k8s/base/worker-job.yaml",
     "drop: [ALL]", "drop: [NET_RAW]", "workers: container ps-worker: must set securityContext.capabilities.drop: [ALL]"),
    ("worker pods that may run as root", "deploy/k8s/base/worker-job.yaml",
     "runAsNonRoot: true", "runAsNonRoot: false", "workers: container ps-worker: must set securityContext.runAsNonRoot"),
    ("a read-only root filesystem without a writable /tmp", "deploy/k8s/base/server-statefulset.yaml",
     "            - name: tmp\n              mountPath: /tmp\n", "", "/tmp must be a writable emptyDir"),
    ("the admin pod with a writable root filesystem", "deploy/k8s/admin/admin-pod.yaml",
     "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false",
     "k8s/admin: pod ps-admin: container ps-admin: must set securityContext.readOnlyRootFilesystem"),
    # Security: the NetworkPolicy and the probes.
    ("no NetworkPolicy", "deploy/k8s/base/kustomization.yaml",
     "  - network-policy.yaml\n", "", "no NetworkPolicy selects the server pods"),
    ("a NetworkPolicy that selects no server", "deploy/k8s/base/network-policy.yaml",
     "    matchLabels:\n      app.kubernetes.io/name: ps-server\n",
     "    matchLabels:\n      app.kubernetes.io/name: ps-servers\n", "no NetworkPolicy selects the server pods"),
    ("a NetworkPolicy letting every namespace in", "deploy/k8s/base/network-policy.yaml",
     "        - podSelector:\n            matchLabels:\n              app.kubernetes.io/name: ps-admin\n",
     "        - namespaceSelector: {}\n", "lets {'namespaceSelector': {}} reach the servers"),
    ("a NetworkPolicy opening the health port instead of the gRPC port", "deploy/k8s/base/network-policy.yaml",
     "port: 50051", "port: 8081", "no NetworkPolicy lets the worker pods"),
    ("the admin pod not let through the NetworkPolicy", "deploy/k8s/admin/admin-pod.yaml",
     "app.kubernetes.io/name: ps-admin", "app.kubernetes.io/name: ps-ops", "lets in none of the pod's labels"),
    ("a liveness probe on the mutual-TLS port", "deploy/k8s/base/server-statefulset.yaml",
     "livenessProbe:\n            grpc:\n              port: 8081",
     "livenessProbe:\n            grpc:\n              port: 50051", "the kubelet has no client certificate"),
    # Security: what the image needs for the certificates.
    ("an image without openssl", "deploy/Dockerfile.cuda",
     "dataset-fashion-mnist openssl", "dataset-fashion-mnist", "does not install openssl"),
    ("an image without make_certs.sh", "deploy/Dockerfile",
     "COPY deploy/make_certs.sh /usr/local/bin/make_certs.sh\n", "", "does not COPY deploy/make_certs.sh"),
] + monitoring.MUTATIONS


def self_check(root, bins, locations, kubectl):
    """Each mutation of a copy of deploy/ (or of a binary's flags) must fail."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for desc, rel, old, new, expect in MUTATIONS:
            copy_root = os.path.join(tmp, "root")
            shutil.rmtree(copy_root, ignore_errors=True)
            shutil.copytree(os.path.join(root, "deploy"), os.path.join(copy_root, "deploy"))
            shutil.copy(os.path.join(root, ".dockerignore"), copy_root)
            target = os.path.join(copy_root, rel)
            with open(target) as f:
                text = f.read()
            if old not in text:
                failures.append(f"self-check '{desc}': '{old}' not found in {rel}; update MUTATIONS")
                continue
            with open(target, "w") as f:
                f.write(text.replace(old, new))
            errors, _ = check_all(copy_root, bins, locations, kubectl)
            hits = [e for e in errors if expect in e]
            if hits:
                print(f"self-check: {desc}: caught: {hits[0][:160]}")
            else:
                failures.append(f"self-check '{desc}' was not caught (wanted '{expect}'; "
                                f"errors: {errors[:3]})")
        # A flag renamed in a binary: ps_server without --num_workers.
        renamed = copy.copy(bins["ps_server"])
        renamed.flags = {("workers" if k == "num_workers" else k): v
                         for k, v in bins["ps_server"].flags.items()}
        errors, _ = check_all(root, {**bins, "ps_server": renamed}, locations, kubectl)
        hits = [e for e in errors if "--num_workers is not a flag of ps_server" in e]
        if hits:
            print(f"self-check: ps_server renaming --num_workers: caught: {hits[0][:160]}")
        else:
            failures.append("self-check: a flag renamed in ps_server was not caught")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="repository root")
    ap.add_argument("--bin", action="append", default=[],
                    help="NAME=PATH of a binary, PATH relative to bazel-bin (as $(location) gives it) "
                         "or starting with bazel-bin/")
    ap.add_argument("--no_self_check", action="store_true")
    a = ap.parse_args()
    paths = dict(b.split("=", 1) for b in a.bin)
    missing = [b for b in BINARY_NAMES if b not in paths]
    if missing:
        ap.error(f"missing --bin for {missing}")
    bins = {name: Binary(name, path) for name, path in paths.items()}
    # Where each binary is under bazel-bin: its path as $(location) gives it.
    locations = {name: os.path.normpath(path).removeprefix("bazel-bin/")
                 for name, path in paths.items()}
    kubectl_path = shutil.which(os.environ.get("KUBECTL") or "kubectl")
    if kubectl_path is None:
        sys.exit(f"deploy_config_check: no kubectl (KUBECTL={os.environ.get('KUBECTL', '')!r}, "
                 f"PATH={os.environ.get('PATH', '')}): the Kubernetes checks read what "
                 f"`kubectl kustomize` renders; run deploy/setup_debian.sh, which installs "
                 f"Debian's kubernetes-client")
    kubectl = Kubectl(kubectl_path)
    errors, notes = check_all(a.root, bins, locations, kubectl)
    check_enum_help(bins, errors)
    notes.append(check_runtime_packages(a.root, bins, errors))
    for n in notes:
        print(n)
    for e in errors[:50]:
        print(f"ERROR: {e}")
    if len(errors) > 50:
        print(f"... and {len(errors) - 50} more")
    if errors:
        print(f"{len(errors)} errors")
        return 1
    print("deploy configs agree with the binaries and with each other")
    if not a.no_self_check:
        failures = self_check(a.root, bins, locations, kubectl)
        for f in failures:
            print(f"ERROR: {f}")
        if failures:
            return 1
        print(f"self-check: all {len(MUTATIONS) + 1} mutations were caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

The checks live in deploy_check/ beside this file, one concept a module
(deploy_check/__init__.py lists them); this file parses the arguments and
runs them.
"""

import argparse
import os
import shutil
import sys

# deploy_check/ and deploy_monitoring_check.py are beside this file, in
# Bazel's runfiles as in the source tree.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import yaml
except ImportError:
    sys.exit("deploy_config_check: python3-yaml is missing: run deploy/setup_debian.sh")
del yaml  # only checked for here; the modules import it

from deploy_check.binaries import BINARY_NAMES, Binary, check_enum_help  # noqa: E402
from deploy_check.checks import MUTATIONS, check_all, self_check  # noqa: E402
from deploy_check.dockerfiles import check_runtime_packages  # noqa: E402
from deploy_check.k8s import Kubectl  # noqa: E402


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

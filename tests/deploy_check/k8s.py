"""Kubernetes: every kustomization under deploy/k8s as `kubectl kustomize`
renders it (Kubectl; the base and the sync, async and gpu overlays, and
the admin pod) runs the mode and devices its name says; every pod's
command line, with $(VAR) expanded from the rendered ConfigMap, the
downward API and JOB_COMPLETION_INDEX, against its binary; the servers'
StatefulSet, Service, probes and checkpoint volumes and the workers' Job
(completions, parallelism, restarts, resources, GPUs) agree; every other
YAML file under k8s/ is named by some kustomization. The pods' security:
k8s_security.py."""

import hashlib
import json
import os
import re
import shutil
import tempfile

import yaml

from .binaries import check_argv, host_port, int_flag, parse_flags, run
from .k8s_security import (check_k8s_admin, check_k8s_tls, check_make_secrets,
                           check_network_policy, check_pod_hardening, k8s_mounts)
from .security import LOOPBACK_HOSTS, check_no_key_material, mount_for

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

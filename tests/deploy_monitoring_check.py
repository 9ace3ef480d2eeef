"""The monitoring checks of tests/deploy_config_check.py (deploy_check/checks.py
runs them, with their MUTATIONS, as part of //tests:deploy_config_test):
Prometheus in docker compose and the scrape settings of the Kubernetes pods.

What it checks (docs/metrics.md, "Deployments"):
  - Compose (docker-compose.yml, alone and with docker-compose.gpu.yml):
    every server service, and every worker service when this build's
    ps_worker has --metrics_listen, passes --metrics_listen=HOST:PORT with a
    fixed port on an address other containers reach (not loopback). Exactly
    one service is in a profile, `monitoring`: it builds
    deploy/Dockerfile.prometheus, which installs Debian's prometheus package
    on the same base image as deploy/Dockerfile's runtime stage and runs as
    the image's user (who can read the keys in the certificates volume); it
    runs `prometheus` with --config.file mounted read-only from
    deploy/prometheus/prometheus-compose.yml and --storage.tsdb.path on a
    writable named volume, mounts deploy/prometheus/alerts.yml read-only
    where the configuration's rule_files expects it, mounts the certificates
    volume read-only, starts after the certificates exist, is hardened like
    the others and publishes its web port on 127.0.0.1 only. The
    configuration scrapes exactly the servers' and workers' metrics ports by
    service name, over https with the CA and the reader (or admin)
    certificate from that mount, and `promtool check config` accepts it and
    the alert rules (with the /certs files stood in for).
  - docker-compose.unix.yml (no TLS): a --metrics_listen there stays on
    loopback, which is all ps_server allows in plaintext.
  - Kubernetes (every kustomization as kubectl renders it): the server pods,
    and the worker pods when ps_worker has --metrics_listen, pass
    --metrics_listen=0.0.0.0:PORT, have a containerPort named `metrics` with
    that port and the annotations prometheus.io/scrape "true",
    prometheus.io/port "PORT", prometheus.io/scheme https (they run TLS) and
    prometheus.io/path /metrics; a NetworkPolicy of theirs lets pods
    labelled app.kubernetes.io/name: prometheus (and only them) reach that
    port; deploy/k8s/make_secrets.sh makes ps-tls-reader, the certificate
    Prometheus needs.
"""

import os
import re
import shutil
import tempfile

import yaml

from deploy_check.binaries import host_port, parse_flags, run
from deploy_check.compose import (check_compose_certs, check_compose_hardening, compose_argv,
                                  compose_mounts, interpolate, merge_override)
from deploy_check.dockerfiles import dockerfile_stages
from deploy_check.k8s import KUSTOMIZATIONS
from deploy_check.k8s_security import check_make_secrets, selector_matches
from deploy_check.security import APP_LABEL, LOOPBACK_HOSTS

PROFILE = "monitoring"
DOCKERFILE = "deploy/Dockerfile.prometheus"
ALERTS = "deploy/prometheus/alerts.yml"
COMPOSE_CONFIG = "deploy/prometheus/prometheus-compose.yml"
# The label of the pods that the NetworkPolicies let reach the metrics ports.
PROMETHEUS_APP = "prometheus"
# Identities the metrics ports let scrape (rpc/authz.h).
SCRAPE_IDENTITIES = ("reader", "admin")


def worker_has_metrics(bins):
    return "metrics_listen" in bins["ps_worker"].flags


def metrics_port(flags, where, errors):
    """The --metrics_listen port, checked reachable from other containers."""
    value = flags.get("metrics_listen")
    if not value or value is True:
        errors.append(f"{where}: lacks --metrics_listen=HOST:PORT (Prometheus scrapes it)")
        return None
    host, port = host_port(value, where, errors)
    if host in LOOPBACK_HOSTS:
        errors.append(f"{where}: --metrics_listen={value}: Prometheus, in another container or "
                      f"pod, cannot reach the loopback")
    if port == 0:
        errors.append(f"{where}: --metrics_listen={value}: port 0 picks a random port, which "
                      f"Prometheus cannot know")
    return port


# --- compose -------------------------------------------------------------------

def base_image(path):
    """The image a Dockerfile's runtime stage (or its only stage) starts FROM."""
    stages = dockerfile_stages(path)
    for line, _ in stages:
        if re.search(r"\sAS\s+runtime$", line, re.I):
            return line.split()[1]
    return stages[-1][0].split()[1] if stages else None


def check_prometheus_dockerfile(root, docker_uid, errors):
    path = os.path.join(root, DOCKERFILE)
    if not os.path.isfile(path):
        errors.append(f"{DOCKERFILE} does not exist (the monitoring profile builds it)")
        return
    stages = dockerfile_stages(path)
    want = base_image(os.path.join(root, "deploy", "Dockerfile"))
    if len(stages) != 1 or stages[0][0].split()[1:2] != [want]:
        errors.append(f"{DOCKERFILE}: must be one stage FROM {want}, the same Debian base image "
                      f"as deploy/Dockerfile's runtime stage, has {[s[0] for s in stages]}")
        return
    text = " ".join(stages[0][1])
    if not re.search(r"apt-get install[^&]*\sprometheus(\s|$)", text):
        errors.append(f"{DOCKERFILE}: does not apt-get install Debian's prometheus package")
    if "rm -rf /var/lib/apt/lists" not in text:
        errors.append(f"{DOCKERFILE}: leaves apt lists in the image (rm -rf /var/lib/apt/lists/*)")
    users = [l.split()[1] for l in stages[0][1] if l.upper().startswith("USER ")]
    if docker_uid is not None and (not users or users[-1].split(":")[0] != str(docker_uid)):
        errors.append(f"{DOCKERFILE}: must end as USER {docker_uid}, the owner of reader.key in "
                      f"the certificates volume (mode 0400), has {users}")


def published_ports(svc, where, errors):
    """[(host_ip, container_port)] of a service's ports."""
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            out.append((str(p.get("host_ip", "")), int(p.get("target"))))
            continue
        parts = str(p).split("/")[0].split(":")
        if len(parts) == 3:
            out.append((parts[0], int(parts[2])))
        else:
            out.append(("", int(parts[-1])))
    return out


def check_scrape_config(config, targets, certs_dir, where, errors):
    """The configuration scrapes exactly TARGETS over https with a scraping
    identity's certificate from CERTS_DIR."""
    found = set()
    for job in config.get("scrape_configs") or []:
        w = f"{where}: job {job.get('job_name')}"
        for sc in job.get("static_configs") or []:
            found |= {str(t) for t in sc.get("targets") or []}
        if job.get("scheme") != "https":
            errors.append(f"{w}: scheme {job.get('scheme')}; the metrics ports serve https")
        tls = job.get("tls_config") or {}
        cert, key = str(tls.get("cert_file")), str(tls.get("key_file"))
        if tls.get("ca_file") != f"{certs_dir}/ca.pem":
            errors.append(f"{w}: tls_config.ca_file {tls.get('ca_file')}, expected "
                          f"{certs_dir}/ca.pem (the certificates volume)")
        if not any(cert == f"{certs_dir}/{i}.pem" and key == f"{certs_dir}/{i}.key"
                   for i in SCRAPE_IDENTITIES):
            errors.append(f"{w}: tls_config cert_file {cert}, key_file {key}: the metrics ports "
                          f"let only the reader or admin certificate scrape "
                          f"({certs_dir}/reader.pem and .key)")
        if tls.get("insecure_skip_verify"):
            errors.append(f"{w}: tls_config.insecure_skip_verify: the certificates name the services")
    if found != targets:
        errors.append(f"{where}: scrape targets {sorted(found)}, expected the servers' and "
                      f"workers' metrics ports {sorted(targets)}")


def check_promtool(root, config_text, mounts, errors):
    """`promtool check config` on the configuration, with the certificate
    files stood in for and the rule files read from the repository."""
    promtool = shutil.which("promtool")
    if promtool is None:
        errors.append("no promtool on PATH: run deploy/setup_debian.sh (Debian's prometheus)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        for target, source in mounts.items():
            if source is None:  # a volume: empty stand-ins for the files it holds
                config_text = config_text.replace(f"{target}/", f"{tmp}/")
            else:
                config_text = config_text.replace(target, source)
        for name in re.findall(rf"{re.escape(tmp)}/([\w.-]+)", config_text):
            open(os.path.join(tmp, name), "w").close()
        path = os.path.join(tmp, "prometheus.yml")
        with open(path, "w") as f:
            f.write(config_text)
        out = run([promtool, "check", "config", path])
        if out.returncode != 0:
            errors.append(f"promtool check config {COMPOSE_CONFIG} (alert rules included): "
                          f"{(out.stdout + out.stderr).strip()[-600:]}")


def check_compose_monitoring(root, doc, bins, docker_uid, where, errors):
    root = os.path.abspath(root)  # promtool reads rule files relative to the config
    services = doc.get("services") or {}
    profiled = {n: s for n, s in services.items() if s.get("profiles")}
    mon = [n for n, s in profiled.items() if PROFILE in (s.get("profiles") or [])]
    if len(mon) != 1 or len(profiled) != 1:
        errors.append(f"{where}: needs exactly one service in a profile, the '{PROFILE}' "
                      f"profile's Prometheus; services with profiles: "
                      f"{ {n: s.get('profiles') for n, s in profiled.items()} }")
        return
    name = mon[0]
    svc = services[name]
    w = f"{where}: {name}"
    check_compose_hardening(svc, w, errors)
    if (svc.get("build") or {}).get("dockerfile") != DOCKERFILE or not svc.get("image"):
        errors.append(f"{w}: must have an image and build {DOCKERFILE} (Debian's prometheus)")
    if (svc.get("build") or {}).get("context") != "..":
        errors.append(f"{w}: build context must be .. (the repository root)")
    if svc.get("user") not in (None, str(docker_uid), f"{docker_uid}:{docker_uid}"):
        errors.append(f"{w}: runs as user {svc.get('user')}, not the image's {docker_uid}")

    # Servers and workers: a reachable metrics port each.
    targets = set()
    want_workers = worker_has_metrics(bins)
    for n, s in services.items():
        argv = compose_argv(s, n, [])
        if argv[:1] == ["ps_server"] or (argv[:1] == ["ps_worker"] and want_workers):
            port = metrics_port(parse_flags(argv), f"{where}: {n}", errors)
            if port:
                targets.add(f"{n}:{port}")

    argv = compose_argv(svc, w, errors)
    flags = parse_flags(argv)
    if argv[:1] != ["prometheus"]:
        errors.append(f"{w}: must run prometheus, runs {argv[:1]}")
        return
    mounts = compose_mounts(svc)
    deploy_dir = os.path.join(root, "deploy")

    def bind_source(target, what):
        """The repository file mounted read-only at TARGET, or None."""
        m = mounts.get(target)
        if m is None or not str(m["source"]).startswith((".", "/")):
            errors.append(f"{w}: {what} {target} is not a file mounted from deploy/ "
                          f"(mounts {sorted(mounts)})")
            return None
        if not m["read_only"]:
            errors.append(f"{w}: {what} {target} is not mounted read-only")
        return os.path.normpath(os.path.join(deploy_dir, m["source"]))

    config_path = bind_source(str(flags.get("config.file")), "--config.file")
    if config_path and config_path != os.path.normpath(os.path.join(root, COMPOSE_CONFIG)):
        errors.append(f"{w}: --config.file comes from {os.path.relpath(config_path, root)}, "
                      f"expected {COMPOSE_CONFIG}")
    tsdb = mounts.get(str(flags.get("storage.tsdb.path")))
    if tsdb is None or tsdb["read_only"] or tsdb["source"] not in (doc.get("volumes") or {}):
        errors.append(f"{w}: --storage.tsdb.path={flags.get('storage.tsdb.path')} must be a "
                      f"writable named volume (the root filesystem is read-only)")
    listen = flags.get("web.listen-address", "0.0.0.0:9090")
    _, web_port = host_port(listen, w, errors)
    published = published_ports(svc, w, errors)
    if not published:
        errors.append(f"{w}: publishes no port; publish its web port on 127.0.0.1")
    for host_ip, port in published:
        if host_ip not in ("127.0.0.1", "[::1]", "::1"):
            errors.append(f"{w}: publishes port {port} on '{host_ip or 'every interface'}': only "
                          f"on the host's loopback 127.0.0.1 (the UI and API have no login)")
        if port != web_port:
            errors.append(f"{w}: publishes container port {port}, but --web.listen-address={listen}")

    # The certificates: the same volume as the servers', read-only, after ps-certs.
    certs = check_compose_certs(services, 1, 0, None, where, [])
    certs_dir = None
    if certs:
        certs_service, volume, _ = certs
        at = [t for t, m in mounts.items() if m["source"] == volume]
        if len(at) != 1 or not mounts[at[0]]["read_only"]:
            errors.append(f"{w}: must mount the certificates volume '{volume}' once, read-only "
                          f"(for reader.pem), mounts {mounts}")
        else:
            certs_dir = at[0]
        deps = svc.get("depends_on") or {}
        cond = deps.get(certs_service, {}).get("condition") if isinstance(deps, dict) else None
        if cond != "service_completed_successfully":
            errors.append(f"{w}: must depend on {certs_service} with condition "
                          f"service_completed_successfully (reader.pem exists), has {cond}")

    if not config_path or not os.path.isfile(config_path):
        errors.append(f"{w}: its configuration {COMPOSE_CONFIG} does not exist")
        return
    with open(config_path) as f:
        config_text = f.read()
    config = yaml.safe_load(config_text) or {}
    rule_files = [str(r) for r in config.get("rule_files") or []]
    alerts = os.path.normpath(os.path.join(root, ALERTS))
    rule_mounts = {r: bind_source(r, "rule file") for r in rule_files}
    if alerts not in rule_mounts.values():
        errors.append(f"{w}: the alert rules {ALERTS} are not mounted at a path of the "
                      f"configuration's rule_files {rule_files}")
    for r, source in rule_mounts.items():
        if source and not os.path.isfile(source):
            errors.append(f"{w}: rule file {r} is mounted from "
                          f"{os.path.relpath(source, root)}, which does not exist")
    if certs_dir:
        check_scrape_config(config, targets, certs_dir, f"{COMPOSE_CONFIG}", errors)
        if all(s and os.path.isfile(s) for s in rule_mounts.values()):
            check_promtool(root, config_text, {certs_dir: None, **rule_mounts}, errors)


def check_unix_metrics(doc, where, errors):
    """Without TLS, ps_server serves metrics in plaintext on loopback only."""
    for n, s in (doc.get("services") or {}).items():
        argv = compose_argv(s, n, [])
        f = parse_flags(argv)
        if argv[:1] in (["ps_server"], ["ps_worker"]) and f.get("metrics_listen"):
            host, _ = host_port(f["metrics_listen"], f"{where}: {n}", errors)
            if host not in LOOPBACK_HOSTS and not f.get("tls_cert"):
                errors.append(f"{where}: {n}: --metrics_listen={f['metrics_listen']} without "
                              f"TLS: the binary serves plaintext metrics on loopback only")


def check_compose(root, bins, docker_uid, errors):
    def load(fn):
        with open(os.path.join(root, "deploy", fn)) as f:
            return interpolate(yaml.safe_load(f), {}, fn, errors)
    base = load("docker-compose.yml")
    check_prometheus_dockerfile(root, docker_uid, errors)
    check_compose_monitoring(root, base, bins, docker_uid, "docker-compose.yml", errors)
    gpu = merge_override(base, load("docker-compose.gpu.yml"), "docker-compose.gpu.yml", [])
    check_compose_monitoring(root, gpu, bins, docker_uid,
                             "docker-compose.yml + docker-compose.gpu.yml", errors)
    unix = load("docker-compose.unix.yml")
    new = [n for n in (unix.get("services") or {}) if n not in base["services"]]
    check_unix_metrics(merge_override(base, unix, "docker-compose.unix.yml", [], new),
                       "docker-compose.yml + docker-compose.unix.yml", errors)


# --- Kubernetes ----------------------------------------------------------------

def check_pod_scrape(role, template, by_kind, where, errors):
    """One pod template: flag, named port, annotations, NetworkPolicy."""
    containers = template["spec"].get("containers") or [{}]
    c = containers[0]
    w = f"{where}: {role} pods"
    flags = parse_flags([str(a) for a in c.get("command", []) + c.get("args", [])])
    port = metrics_port(flags, w, errors)
    if port is None:
        return
    named = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    if named.get("metrics") != port:
        errors.append(f"{w}: need a containerPort named 'metrics' with the --metrics_listen "
                      f"port {port}, have {named}")
    notes = (template.get("metadata") or {}).get("annotations") or {}
    scheme = "https" if flags.get("tls_cert") else "http"
    for key, want in (("prometheus.io/scrape", "true"), ("prometheus.io/port", str(port)),
                      ("prometheus.io/scheme", scheme), ("prometheus.io/path", "/metrics")):
        if notes.get(key) != want:
            errors.append(f"{w}: annotation {key}: {notes.get(key)!r}, expected {want!r} "
                          f"(--metrics_listen={flags.get('metrics_listen')}, TLS {scheme})")
    labels = (template.get("metadata") or {}).get("labels") or {}
    let_in = False
    for p in by_kind.get("NetworkPolicy", []):
        if not selector_matches((p.get("spec") or {}).get("podSelector"), labels):
            continue
        for rule in p["spec"].get("ingress") or []:
            ports = {named.get(pp.get("port"), pp.get("port")) for pp in rule.get("ports") or []}
            if port not in ports and rule.get("ports"):
                continue
            pw = f"{w}: NetworkPolicy {p['metadata']['name']}"
            peers = rule.get("from") or []
            if not peers:
                errors.append(f"{pw}: lets every pod and address reach the metrics port {port}")
            for peer in peers:
                sel = peer.get("podSelector") or {}
                app = (sel.get("matchLabels") or {}).get(APP_LABEL)
                if (set(peer) - {"podSelector", "namespaceSelector"} or sel.get("matchExpressions")
                        or set(sel.get("matchLabels") or {}) != {APP_LABEL}):
                    errors.append(f"{pw}: lets {peer} reach the metrics port {port}; only pods "
                                  f"labelled {APP_LABEL}: {PROMETHEUS_APP} may")
                elif app == PROMETHEUS_APP and port in ports:
                    let_in = True
    if not let_in:
        errors.append(f"{w}: no NetworkPolicy lets Prometheus (pods labelled {APP_LABEL}: "
                      f"{PROMETHEUS_APP}) reach the metrics port {port}")


def check_k8s(root, bins, kubectl, errors):
    k8s = os.path.join(root, "deploy", "k8s")
    names = [n for n, e in KUSTOMIZATIONS.items() if not e.get("admin")
             and os.path.isfile(os.path.join(k8s, n, "kustomization.yaml"))]
    rendered = kubectl.render(k8s, sorted(KUSTOMIZATIONS))  # cached by deploy_config_check
    for name in names:
        resources, _ = rendered.get(name, (None, None))
        if resources is None:
            continue  # deploy_config_check reports it
        by_kind = {}
        for r in resources:
            by_kind.setdefault(r.get("kind"), []).append(r)
        for sts in by_kind.get("StatefulSet", []):
            check_pod_scrape("server", sts["spec"]["template"], by_kind, f"k8s/{name}", errors)
        if worker_has_metrics(bins):
            for job in by_kind.get("Job", []):
                check_pod_scrape("worker", job["spec"]["template"], by_kind, f"k8s/{name}", errors)
    check_make_secrets(root, {"ps-tls-reader"}, errors)


def check_all(root, bins, docker_uid, kubectl, errors):
    check_compose(root, bins, docker_uid, errors)
    check_k8s(root, bins, kubectl, errors)
    workers = ("servers and workers" if worker_has_metrics(bins) else
               "servers (this build's ps_worker has no --metrics_listen: workers not required)")
    return (f"monitoring: compose profile '{PROFILE}' ({DOCKERFILE}, {COMPOSE_CONFIG}, "
            f"{ALERTS}) and Kubernetes scrape annotations of the {workers}")


# (description, file under the root, old text, new text, expected error part),
# as deploy_check.checks.MUTATIONS.
MUTATIONS = [
    ("a compose server without --metrics_listen", "deploy/docker-compose.yml",
     "    - --metrics_listen=0.0.0.0:9100\n", "", "lacks --metrics_listen"),
    ("compose metrics on the containers' loopback", "deploy/docker-compose.yml",
     "--metrics_listen=0.0.0.0:9100", "--metrics_listen=127.0.0.1:9100", "cannot reach the loopback"),
    ("Prometheus scraping a port no server listens on", COMPOSE_CONFIG,
     "ps-server-1:9100", "ps-server-1:9101", "scrape targets"),
    ("Prometheus scraping with a worker's certificate", COMPOSE_CONFIG,
     "cert_file: /certs/reader.pem", "cert_file: /certs/worker-0.pem",
     "let only the reader or admin certificate scrape"),
    ("Prometheus scraping in plaintext", COMPOSE_CONFIG,
     "    scheme: https\n", "    scheme: http\n", "the metrics ports serve https"),
    ("the alert rules not mounted", "deploy/docker-compose.yml",
     "      - ./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro\n", "",
     "rule file /etc/prometheus/alerts.yml is not a file mounted"),
    ("the alert rules mounted from a file that does not exist", "deploy/docker-compose.yml",
     "./prometheus/alerts.yml:", "./prometheus/alert.yml:", "which does not exist"),
    ("the Prometheus UI published on every interface", "deploy/docker-compose.yml",
     "- 127.0.0.1:9090:9090", "- 9090:9090", "only on the host's loopback"),
    ("Prometheus outside the monitoring profile", "deploy/docker-compose.yml",
     "profiles: [monitoring]", "profiles: [debug]", "the 'monitoring' profile's Prometheus"),
    ("Prometheus on a registry's image", DOCKERFILE,
     "FROM debian:12-slim", "FROM prom/prometheus:v2.42.0", "the same Debian base image"),
    ("Prometheus as a user who cannot read reader.key", DOCKERFILE,
     "USER 10001:10001", "USER 65534", "the owner of reader.key"),
    ("Prometheus before the certificates exist", "deploy/docker-compose.yml",
     "    depends_on:\n      ps-certs:\n        condition: service_completed_successfully\n"
     "    volumes:\n      - ./prometheus",
     "    volumes:\n      - ./prometheus", "(reader.pem exists)"),
    ("a bad setting in the Prometheus configuration", COMPOSE_CONFIG,
     "scrape_interval: 15s", "scrape_interval: 15 seconds", "promtool check config"),
    ("server pods announcing another metrics port", "deploy/k8s/base/server-statefulset.yaml",
     'prometheus.io/port: "9100"', 'prometheus.io/port: "9101"', "annotation prometheus.io/port"),
    ("server pods announcing plaintext metrics", "deploy/k8s/base/server-statefulset.yaml",
     "prometheus.io/scheme: https", "prometheus.io/scheme: http", "annotation prometheus.io/scheme"),
    ("server pods without a port named metrics", "deploy/k8s/base/server-statefulset.yaml",
     "- name: metrics\n", "- name: prom\n", "need a containerPort named 'metrics'"),
    ("server pods without --metrics_listen", "deploy/k8s/base/server-statefulset.yaml",
     "            - --metrics_listen=0.0.0.0:9100\n", "", "server pods: lacks --metrics_listen"),
    ("the servers' metrics port open to every namespace", "deploy/k8s/base/network-policy.yaml",
     "        - namespaceSelector: {}\n          podSelector:\n            matchLabels:\n"
     "              app.kubernetes.io/name: prometheus\n",
     "        - namespaceSelector: {}\n", "only pods labelled app.kubernetes.io/name: prometheus"),
    ("no NetworkPolicy rule for Prometheus", "deploy/k8s/base/network-policy.yaml",
     "app.kubernetes.io/name: prometheus", "app.kubernetes.io/name: grafana",
     "no NetworkPolicy lets Prometheus"),
    # Workers (ps_worker --metrics_listen).
    ("Prometheus not scraping a worker", COMPOSE_CONFIG,
     ", ps-worker-2:9100]", "]", "scrape targets"),
    ("worker pods announcing another metrics port", "deploy/k8s/base/worker-job.yaml",
     'prometheus.io/port: "9100"', 'prometheus.io/port: "9101"',
     "worker pods: annotation prometheus.io/port"),
    ("the workers' metrics port closed by their NetworkPolicy", "deploy/k8s/base/network-policy.yaml",
     "          port: metrics\n", "          port: grpc\n",
     "worker pods: no NetworkPolicy lets Prometheus"),
]

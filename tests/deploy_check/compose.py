"""Docker compose, the base file deploy/docker-compose.yml: compose's variable
substitution and override merge (as far as this test models them), every
service's command line against its binary, and the servers, workers and
mode agreeing (shard ids, --num_shards, --num_workers, every --servers
list in shard order, ports, health checks, depends_on, volumes); the
certificates' one-shot service (make_certs.sh) and every service's mutual
TLS and hardening (read_only, cap_drop ALL, no-new-privileges).
compose_overrides.py runs check_compose on every environment, alone and
with the GPU override."""

import copy
import os
import re

from .binaries import check_argv, host_port, int_flag, parse_flags
from .security import LOOPBACK_HOSTS, MAKE_CERTS_FLAGS, check_tls_flags, mount_for

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

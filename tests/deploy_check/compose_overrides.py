"""Docker compose, the files together: deploy/.env names the project, no file
has a top-level name:, every ${VAR} has a default, and check_compose_files
checks docker-compose.yml (compose.check_compose) in every environment (the
defaults, then each of ALTERNATIVES) alone and with each override:
docker-compose.gpu.yml (the workers on CUDA with a GPU),
docker-compose.python.yml (check_python_override: `python3 -u` with the
worker script and the cluster in the environment) and
docker-compose.unix.yml (check_unix_override: unix sockets in one 0700
folder, no TLS, every other flag as in the base file)."""

import os
import re

import yaml

from .binaries import check_argv, parse_flags
from .compose import (check_compose, check_compose_hardening, compose_argv, compose_mounts,
                      compose_variables, interpolate, merge_override)
from .dockerfiles import PYTHON_WORKER_SCRIPT

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

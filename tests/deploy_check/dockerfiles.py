"""The Dockerfiles: deploy/Dockerfile and deploy/Dockerfile.cuda build every
binary and copy it from where the build puts it; the runtime stage runs
as a numeric non-root user (the same in both) and installs the dataset,
the runtime packages, openssl and make_certs.sh; deploy/Dockerfile's
default target is the runtime image and its python target adds python3,
numpy, torch, the wheel and deploy/python_worker.py (check_python_stages);
.dockerignore keeps Bazel's trees and .git out of the build context; and
deploy/runtime_packages.sh works on this build's binaries."""

import fnmatch
import os
import re

from .binaries import BINARY_NAMES, run

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

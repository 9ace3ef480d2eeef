"""The images of compose_test: building deploy/'s Dockerfiles, what the
images hold (runtime user, apt leftovers, size), the standalone run, and
the CUDA and Python images."""
import json
import os
import re
import time

from .common import COMPOSE_FILE, GPU_FILE, MIN_ACCURACY, WORKERS, run, tail


def image_size(image):
    p = run(["docker", "image", "inspect", "-f", "{{.Size}}", image], timeout=30)
    return int(p.stdout) / 1e6 if p.returncode == 0 else None


def build_image(checks, dockerfile, image, name, target=None):
    """deploy/README.md's build command; returns its wall time, or None."""
    argv = ["docker", "build", "-f", dockerfile, "-t", image, "."]
    if target:
        argv[4:4] = [f"--target={target}"]
    t0 = time.monotonic()
    p = run(argv, env=dict(os.environ, DOCKER_BUILDKIT="1"), timeout=1800)
    took = time.monotonic() - t0
    warnings = [l for l in p.stdout.splitlines() if re.search(r"useradd.*warning", l, re.I)]
    ok = p.returncode == 0 and not warnings
    checks.check(f"{name}: DOCKER_BUILDKIT=1 docker build -f {dockerfile}"
                 + (f" --target={target}" if target else ""), ok,
                 f"{took:.0f} s, {image_size(image) or 0:.0f} MB" if ok
                 else tail(p.stdout, 25) + "\n" + "\n".join(warnings))
    return took if ok else None



def check_runtime_image(checks, image, name="image", entrypoint=None):
    """The image's user and apt leftovers; `entrypoint`: a shell to run them
    with, for an image whose ENTRYPOINT is not one (prometheus)."""
    first = [f"--entrypoint={entrypoint}"] if entrypoint else []
    ids = run(["docker", "run", "--rm"] + first + [image] + ([] if entrypoint else ["sh"])
              + ["-c", "id -u; id -g"], timeout=120)
    # As root, to see into apt's private directories; empty files (apt's
    # lock) are no cache.
    find = "find /var/lib/apt/lists /var/cache/apt -type f -size +0c"
    apt = run(["docker", "run", "--rm", "--user=0"] + first + [image]
              + (["-c", find] if entrypoint else find.split()), timeout=120)
    checks.check(f"{name}: runs as 10001:10001 with no apt lists or caches",
                 ids.stdout.split() == ["10001", "10001"] and apt.returncode == 0
                 and not apt.stdout.split(),
                 f"uid, gid: {ids.stdout.split()}; apt files: {apt.stdout.split() or 'none'}")


def standalone(checks, image):
    t0 = time.monotonic()
    p = run(["docker", "run", "--rm", image], timeout=600)
    m = re.search(r"final test_accuracy ([0-9.]+)", p.stdout)
    acc = float(m.group(1)) if m else None
    checks.check("docker run --rm (standalone, 1 epoch)",
                 p.returncode == 0 and acc is not None and acc >= MIN_ACCURACY,
                 f"exit {p.returncode}, test_accuracy {acc}, {time.monotonic() - t0:.1f} s")


def cuda_image(checks, cluster, image):
    cuda = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    if not os.access(os.path.join(cuda, "bin", "nvcc"), os.X_OK):
        checks.check("cuda image", False, f"no CUDA toolkit at {cuda} (set CUDA_PATH, or --no-cuda)")
        return
    p = run(["deploy/base_image.sh", "--cuda"], timeout=900)
    if not checks.check("deploy/base_image.sh --cuda", p.returncode == 0, tail(p.stdout, 5)):
        return
    if build_image(checks, "deploy/Dockerfile.cuda", image, "cuda image") is None:
        return
    p = run(["docker", "run", "--rm", image, "ps_worker", "--standalone", "--device=auto",
             "--max_steps=50"], timeout=300)
    first = next((l for l in p.stdout.splitlines() if l.startswith("worker 0/1:")), "")
    checks.check("cuda image: ps_worker --device=auto falls back to the CPU and says why",
                 p.returncode == 0 and re.search(r"on cpu .*; auto: \S.*", first) is not None,
                 first or tail(p.stdout, 5))
    p = run(["docker", "run", "--rm", image, "ps_worker", "--standalone", "--device=cuda",
             "--max_steps=1"], timeout=300)
    checks.check("cuda image: ps_worker --device=cuda fails and says why",
                 p.returncode != 0 and "no CUDA device" in p.stdout, tail(p.stdout, 1))

    # The GPU override, as compose resolves it.
    import yaml
    p = run(cluster.cmd("config", files=(COMPOSE_FILE, GPU_FILE)),
            env=cluster.env(PS_CUDA_IMAGE=image), timeout=60)
    problems = []
    if p.returncode != 0:
        problems.append(tail(p.stdout, 5))
    else:
        services = yaml.safe_load(p.stdout)["services"]
        for s in WORKERS:
            svc = services.get(s, {})
            devices = svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get(
                "devices", [])
            if svc.get("image") != image or "--device=cuda" not in svc.get("command", []) or \
                    not any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", [])
                            and int(d.get("count", 0)) == 1 for d in devices):
                problems.append(f"{s}: {json.dumps(svc)[:300]}")
        for s in ("ps-server-0", "ps-server-1"):
            if services.get(s, {}).get("image") != cluster.image:
                problems.append(f"{s} runs {services.get(s, {}).get('image')}, not the CPU image")
    checks.check(f"compose config with {GPU_FILE}", not problems, "; ".join(problems) or
                 "each worker: the CUDA image, --device=cuda, one nvidia GPU reserved")



def python_image(checks, cluster, image):
    """The Dockerfile's python target (timed: the Python workers' extra build
    time), what it holds, and 2 Python workers in compose."""
    took = build_image(checks, "deploy/Dockerfile", image, "python image", target="python")
    if took is None:
        return
    p = run(["docker", "run", "--rm", image, "python3", "-c",
             "import ps, ps.torch, torch; print(ps.__file__, torch.__version__)"], timeout=120)
    checks.check("python image: ps and ps.torch import, from /usr/local",
                 p.returncode == 0 and "/usr/local/lib/python3" in p.stdout,
                 tail(p.stdout, 3))
    checks.figure(f"python image build: {took:.0f} s after the default image, size "
                  f"{image_size(image) or 0:.0f} MB")
    cluster.python_workers(image)


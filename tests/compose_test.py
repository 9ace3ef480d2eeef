#!/usr/bin/python3
"""compose_test: builds deploy/'s images and runs its docker-compose cluster
for real, with deploy/README.md's commands, on this machine's Docker.

    tests/compose_test.py [--data-root=DIR] [--no-cuda] [--no-python] [--sync-only]

What it does, each step a check printed as `compose_test: PASS|FAIL <name>`:
  - installs docker.io and docker-compose with apt when missing;
  - uses a Docker daemon that answers, or starts its own `dockerd` (on a
    private socket and data root) and stops it afterwards by its PID,
    restoring the host's iptables rules, IP forwarding and bridge sysctls as
    it found them and deleting the interfaces it left;
  - deploy/base_image.sh (debian:12 and -slim from the Debian mirror when
    absent), then `DOCKER_BUILDKIT=1 docker build -f deploy/Dockerfile`
    cold and again warm (timed), checking the runtime user (10001:10001, no
    useradd warning), that no apt lists or caches are left, and the size;
  - `docker run --rm` of the image (standalone training, accuracy >= 0.80);
  - the compose cluster (2 servers, 3 workers, 1 epoch) in sync and then
    async mode: every worker exits 0, worker 0's final test accuracy is
    >= 0.80, the `model` volume holds finite float32 .npy files with as many
    values as the model has parameters, every worker wrote its metrics;
  - after the sync run, with its servers still up: both serve mutual TLS
    with the health port in plaintext on loopback; ps_ctl in plaintext is
    refused, the reader certificate may read the status but not write a
    checkpoint (PERMISSION_DENIED), the admin one may; the `certs` volume
    holds no CA key and keys of mode 0400 for uid 10001, and is read-only
    like the root filesystem; `run --rm ps-certs` keeps the certificates,
    `run --rm ps-certs --force` replaces them and the running servers accept
    the new CA's certificates without a restart;
  - before those, with the same servers up, the `monitoring` profile:
    `--profile monitoring build prometheus` (deploy/Dockerfile.prometheus:
    runs as 10001:10001, no apt lists or caches, size), `--profile monitoring
    up -d prometheus`; within 120 s http://127.0.0.1:9090/api/v1/targets
    lists exactly the 2 ps-server and 3 ps-worker targets of
    deploy/prometheus/prometheus-compose.yml with both ps-server targets up
    (the workers have exited, so theirs are down: reported, not asserted);
    ps_server_model_version of each server equals the version `ps_ctl
    status` reports; /api/v1/rules holds every alert of
    deploy/prometheus/alerts.yml, none in error; then it is stopped and
    removed;
  - sync mode with worker 2's container killed mid-run: the servers drop it
    once its lease (PS_WORKER_TIMEOUT=3) expires, and the other workers
    finish with accuracy >= 0.80;
  - sync mode with ps-server-1's process killed (SIGKILL from the host):
    Docker restarts it, it restores its newest checkpoint, the workers bring
    it to their step, and every worker finishes with accuracy >= 0.80;
  - Python workers (deploy/docker-compose.python.yml): the Dockerfile's
    python target built on the same build cache (timed, sized), then sync
    mode with 2 workers running deploy/python_worker.py (ps.torch): both
    exit 0 after the same number of steps, each at server version = steps,
    with the same test accuracy (>= 0.75), and the servers' version is that
    step count;
  - `down -v` after each run; at the end no container, network or volume of
    the test's compose project is left, nor any image it built;
  - the CUDA image (deploy/base_image.sh --cuda from this machine's toolkit,
    then deploy/Dockerfile.cuda): `ps_worker --device=auto` falls back to
    the CPU and says why (no GPU here), `--device=cuda` fails saying why;
    the GPU override (docker-compose.gpu.yml) is checked with `config`.

The compose command is `docker-compose` (Debian 12's v1) when installed,
else `docker compose` (v2); PS_COMPOSE overrides it. Where the docker CLI on
PATH cannot use BuildKit (a CLI of 23 or later without the buildx plugin, as
on this project's machines next to docker.io's 20.10 daemon), docker.io's own
/usr/bin/docker is put first on PATH.

Skips, with the reason and exit status 77, where Docker cannot run: not
root (needed to install Docker and start dockerd), or a dockerd that does not
come up (no kernel support). Otherwise exits 0 when every check passed, else
1. The last line is `compose_test: N passed, N failed`.

--data-root=DIR: with a dockerd of its own, keep its images and build cache
in DIR between runs (for development; the default is a temporary directory,
deleted at the end). --no-cuda: leave the CUDA image out. --no-python:
leave the Python workers out. --sync-only (for development): after the cold
image build, only the sync cluster with its monitoring and security checks.
"""
import argparse
import os
import signal
import sys
import time

# compose_checks/ is beside this file. No .pyc files there: the repository
# is the images' build context.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compose_checks.cluster import Cluster  # noqa: E402
from compose_checks.common import PROJECT, Checks, Skip, run, tail  # noqa: E402
from compose_checks.docker_host import image_tags, setup  # noqa: E402
from compose_checks.images import (build_image, check_runtime_image, cuda_image,  # noqa: E402
                                   image_size, python_image, standalone)


def run_checks(checks, args, compose, image, cuda_image_tag):
    t0 = time.monotonic()
    p = run(["deploy/base_image.sh"], timeout=900)
    if not checks.check("deploy/base_image.sh", p.returncode == 0, tail(p.stdout, 5)):
        return
    checks.figure(f"base images: {time.monotonic() - t0:.0f} s")

    cold = build_image(checks, "deploy/Dockerfile", image, "image")
    if cold is None:
        return
    if args.sync_only:
        Cluster(compose, image, checks).train("sync", build=True)
        return
    warm = build_image(checks, "deploy/Dockerfile", image, "image (warm)")
    checks.figure(f"image build: cold {cold:.0f} s, warm {warm or 0:.0f} s, "
                  f"size {image_size(image):.0f} MB")
    check_runtime_image(checks, image)
    standalone(checks, image)

    cluster = Cluster(compose, image, checks)
    cluster.train("sync", build=True)
    cluster.train("async", build=False)
    cluster.kill_worker()
    cluster.kill_server()
    if not args.no_python:
        python_image(checks, cluster, image.replace("ps:", "ps-python:", 1))
    if not args.no_cuda:
        cuda_image(checks, cluster, cuda_image_tag)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", help="a dockerd of the test's own keeps its data here "
                    "(images, build cache) between runs")
    ap.add_argument("--no-cuda", action="store_true", help="leave the CUDA image out")
    ap.add_argument("--no-python", action="store_true", help="leave the Python workers out")
    ap.add_argument("--sync-only", action="store_true", help="for development: after the cold "
                    "build, only the sync cluster with its monitoring and security checks")
    args = ap.parse_args()

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)

    t_start = time.monotonic()
    try:
        compose, daemon = setup(args)
    except Skip as e:
        print(f"compose_test: SKIPPED: {e}", flush=True)
        sys.exit(77)

    checks = Checks()
    # A daemon of our own gets deploy/README.md's tags; someone else's, this run's.
    suffix = "latest" if daemon else f"compose-test-{os.getpid()}"
    tags_before = image_tags()
    try:
        run_checks(checks, args, compose, f"ps:{suffix}", f"ps-cuda:{suffix}")
    except KeyboardInterrupt as e:
        checks.check("run", False, f"interrupted ({e})")
    except Exception as e:  # a bug of the test, or a tool that failed outright
        checks.check("run", False, f"{type(e).__name__}: {e}")
    finally:
        left = Cluster(compose, "", checks).leftovers()
        # Images this run made; a daemon of our own with --data-root keeps
        # them for the next run (its data root is otherwise deleted).
        made = sorted(image_tags() - tags_before)
        if not (daemon and daemon.keep_data):
            for tag in made:
                run(["docker", "image", "rm", "-f", tag], timeout=120)
            left_images = sorted(image_tags() & set(made))
            if left_images:
                left["image"] = left_images
        checks.check("nothing left behind (containers, networks, volumes, images)", not left,
                     f"left: {left}" if left else
                     f"project {PROJECT}: no containers, networks or volumes; images "
                     f"{'kept in --data-root' if daemon and daemon.keep_data else 'removed'}: "
                     f"{made}")
        if daemon:
            problems = daemon.stop()
            checks.check("dockerd stopped; iptables, forwarding and interfaces restored",
                         not problems, "; ".join(problems))
    checks.figure(f"compose_test total: {time.monotonic() - t_start:.0f} s")
    print(f"compose_test: {checks.passed} passed, {checks.failed} failed", flush=True)
    sys.exit(0 if checks.failed == 0 else 1)


if __name__ == "__main__":
    main()

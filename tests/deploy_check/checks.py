"""All the checks (check_all: the Dockerfiles, compose, Kubernetes,
make_certs.sh's flags and tests/deploy_monitoring_check.py), and the
self-check that proves they can fail: each of MUTATIONS (and the monitoring
module's) applied to a copy of deploy/, and a flag renamed in ps_server,
must make check_all report the expected error."""

import copy
import os
import shutil
import tempfile

# Found on sys.path as tests/deploy_config_check.py sets it up (which also
# registers itself as the deploy_config_check that this module imports).
import deploy_monitoring_check as monitoring

from .binaries import run
from .compose_overrides import check_compose_files
from .dockerfiles import check_dockerfiles
from .k8s import check_k8s
from .security import MAKE_CERTS_FLAGS

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
     "bazel-bin/tools/bench/ps_bench", "bazel-bin/tests/ps_bench", "the build puts it at"),
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

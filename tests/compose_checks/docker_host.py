"""Docker on this machine for compose_test: installing docker.io and
docker-compose, choosing a docker CLI that can use BuildKit and a compose
command, a dockerd of the test's own (on a private socket and data root)
that restores the host's iptables rules, forwarding, bridge sysctls and
interfaces when it stops, and the image tags the test may leave."""
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from .common import Skip, log, run, tail


# --- installing and choosing the tools ---------------------------------------
def install_docker():
    need = [pkg for cmd, pkg in (("dockerd", "docker.io"), ("docker-compose", "docker-compose"))
            if shutil.which(cmd) is None]
    if shutil.which("docker-compose") is not None or (shutil.which("docker") and subprocess.run(
            ["docker", "compose", "version"], capture_output=True).returncode == 0):
        need = [p for p in need if p != "docker-compose"]
    if not need:
        return
    log(f"installing {' '.join(need)} with apt")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + need
    if run(cmd, env=env).returncode != 0:
        run(["apt-get", "update", "-qq"], env=env)
        p = run(cmd, env=env)
        if p.returncode != 0:
            raise Skip(f"cannot install {' '.join(need)}: {tail(p.stdout, 5)}")


def choose_docker_cli():
    """Puts a docker CLI that can use BuildKit first on PATH; returns its path."""
    cli = shutil.which("docker")
    if cli is None:
        raise Skip("no docker CLI after installing docker.io")
    version = run([cli, "version", "--format", "{{.Client.Version}}"], timeout=30).stdout
    major = int(re.match(r"\s*(\d+)", version).group(1)) if re.match(r"\s*\d+", version) else 0
    has_buildx = run([cli, "buildx", "version"], timeout=30).returncode == 0
    if major >= 23 and not has_buildx and os.path.realpath(cli) != "/usr/bin/docker" \
            and os.access("/usr/bin/docker", os.X_OK):
        log(f"{cli} (client {version.strip()}) has no buildx, so it cannot build with BuildKit; "
            "using docker.io's /usr/bin/docker")
        os.environ["PATH"] = "/usr/bin:" + os.environ["PATH"]
        cli = "/usr/bin/docker"
    return cli


def choose_compose():
    if os.environ.get("PS_COMPOSE"):
        return os.environ["PS_COMPOSE"].split()
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return ["docker", "compose"]


# --- the daemon -------------------------------------------------------------
def sysctl_paths():
    return ["/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"] + \
        sorted(glob.glob("/proc/sys/net/bridge/bridge-nf-call-*"))


def read(path):
    with open(path) as f:
        return f.read()


def iptables_tables(dump):
    """{table: (policies, rules)} of an iptables-save dump, without counters;
    a table with only built-in chains, ACCEPT policies and no rules is left
    out: it filters nothing, exactly like an absent table."""
    tables, name = {}, None
    for line in dump.splitlines():
        if line.startswith("*"):
            name, chains, rules = line[1:], [], []
        elif name and line.startswith(":"):
            chain, policy = line[1:].split()[:2]
            chains.append((chain, policy))
        elif name and line.startswith("-"):
            rules.append(line)
        elif name and line == "COMMIT":
            if rules or any(p not in ("ACCEPT",) for _, p in chains):
                tables[name] = (sorted(chains), rules)
            name = None
    return tables


class HostNetState:
    """iptables/ip6tables rules, forwarding and bridge sysctls, links."""

    def __init__(self):
        self.dumps = {}
        for tool in ("iptables", "ip6tables"):
            if shutil.which(f"{tool}-save"):
                self.dumps[tool] = run([f"{tool}-save"], timeout=30).stdout
        self.sysctls = {p: read(p) for p in sysctl_paths() if os.path.exists(p)}
        self.links = self.link_names()

    @staticmethod
    def link_names():
        out = run(["ip", "-o", "link", "show"], timeout=30).stdout
        return {l.split(":")[1].strip().split("@")[0] for l in out.splitlines() if ":" in l}

    def restore(self):
        problems = []
        for tool, before in self.dumps.items():
            saved = iptables_tables(before)
            now = run([f"{tool}-save"], timeout=30).stdout
            for table in re.findall(r"^\*(\S+)", now, re.M):
                if table in saved:
                    continue
                run([tool, "-t", table, "-F"], timeout=30)
                run([tool, "-t", table, "-X"], timeout=30)
                for chain, policy in re.findall(r"^:(\S+) (\S+)", run(
                        [f"{tool}-save", "-t", table], timeout=30).stdout, re.M):
                    if policy != "-":
                        run([tool, "-t", table, "-P", chain, "ACCEPT"], timeout=30)
            if saved:
                run([f"{tool}-restore"], input=before, timeout=30)
            after = iptables_tables(run([f"{tool}-save"], timeout=30).stdout)
            if after != saved:
                problems.append(f"{tool} rules differ after restoring: {sorted(after)} vs "
                                f"{sorted(saved)}")
        for path, value in self.sysctls.items():
            try:
                with open(path, "w") as f:
                    f.write(value)
            except OSError as e:
                problems.append(f"cannot restore {path}: {e}")
            if read(path) != value:
                problems.append(f"{path} is {read(path).strip()}, was {value.strip()}")
        for link in sorted(self.link_names() - self.links):
            run(["ip", "link", "delete", link], timeout=30)
        left = self.link_names() - self.links
        if left:
            problems.append(f"interfaces left: {sorted(left)}")
        return problems


class OwnDaemon:
    """A dockerd of the test's own, on a private socket and data root."""

    def __init__(self, data_root):
        self.tmp = tempfile.mkdtemp(prefix="ps-dockerd.")
        self.keep_data = data_root is not None
        self.data_root = data_root or os.path.join(self.tmp, "data")
        self.socket = os.path.join(self.tmp, "docker.sock")
        self.log_path = os.path.join(self.tmp, "dockerd.log")
        self.net = HostNetState()
        os.makedirs(self.data_root, exist_ok=True)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["dockerd", f"--data-root={self.data_root}",
             f"--exec-root={os.path.join(self.tmp, 'exec')}",
             f"--pidfile={os.path.join(self.tmp, 'docker.pid')}",
             f"--host=unix://{self.socket}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        os.environ["DOCKER_HOST"] = f"unix://{self.socket}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if run(["docker", "info"], timeout=10).returncode == 0:
                log(f"started dockerd (pid {self.proc.pid}) on {self.socket}, data root "
                    f"{self.data_root}")
                return
            time.sleep(0.5)
        why = tail(read(self.log_path), 10)
        self.stop()
        raise Skip(f"dockerd does not come up (no kernel support?):\n{why}")

    def stop(self):
        """Stops dockerd by its PID; returns the problems found restoring."""
        problems = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                problems.append("dockerd did not stop within 60 s of SIGTERM; killed")
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:  # its containerd and shims, if any outlived it
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.log.close()
        os.environ.pop("DOCKER_HOST", None)
        problems += self.net.restore()
        mounts = [l.split()[1] for l in read("/proc/mounts").splitlines()
                  if l.split()[1].startswith(self.tmp) or l.split()[1].startswith(self.data_root)]
        for m in sorted(mounts, reverse=True):
            run(["umount", "-l", m], timeout=30)
        if not self.keep_data:
            shutil.rmtree(self.data_root, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if os.path.exists(self.tmp) or (not self.keep_data and os.path.exists(self.data_root)):
            problems.append(f"could not delete {self.tmp}")
        return problems



OUR_REPOSITORIES = ("debian", "ps", "ps-python", "ps-prometheus", "ps-cuda", "ps-cuda-devel",
                    "ps-cuda-runtime")


def image_tags():
    out = run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], timeout=30).stdout
    return {t for t in out.split() if t.split(":")[0] in OUR_REPOSITORIES}


def setup(args):
    """Root, Docker installed, a daemon: (compose argv, OwnDaemon or None)."""
    if os.geteuid() != 0:
        raise Skip("needs root (to install Docker and start dockerd)")
    install_docker()
    cli = choose_docker_cli()
    compose = choose_compose()
    daemon = None
    if run(["docker", "info"], timeout=30).returncode == 0:
        log("using the Docker daemon that answers")
    else:
        daemon = OwnDaemon(args.data_root)
    versions = run(["docker", "version", "--format",
                    "client {{.Client.Version}}, server {{.Server.Version}}"], timeout=30)
    compose_version = run(compose + ["version", "--short"], timeout=30).stdout.strip()
    log(f"docker: {cli} ({versions.stdout.strip()}); compose: {' '.join(compose)} "
        f"{compose_version}")
    return compose, daemon


"""The checks compose_test makes on the cluster of a finished sync run, with
its servers still up: the `monitoring` profile's Prometheus (targets,
ps_server_model_version, alert rules) and the security of the cluster
(mutual TLS, identities, the certificates' volume, rotation). A mixin of
cluster.Cluster, whose compose plumbing (cmd, container, ctl, logs) it uses."""
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

from .common import ALERTS_FILE, PROMETHEUS_API, PROMETHEUS_CONFIG, PROMETHEUS_WAIT, ROOT, \
    run, tail
from .images import check_runtime_image, image_size


def prometheus_api(path):
    """The `data` of a Prometheus HTTP API answer (PROMETHEUS_API + path)."""
    with urllib.request.urlopen(PROMETHEUS_API + path, timeout=10) as r:
        answer = json.load(r)
    if answer.get("status") != "success":
        raise ValueError(f"{path}: {answer}")
    return answer["data"]



class RunningClusterChecks:
    """Monitoring and security checks of cluster.Cluster."""

    def check_monitoring(self, env):
        """With the cluster of a finished sync run still up: the `monitoring`
        profile's Prometheus built and started with the compose file's own
        commands, scraping the servers over mutual TLS and loading the alert
        rules; stopped and removed at the end, whatever happened."""
        name = "monitoring"
        monitoring = ("--profile", "monitoring")
        t0 = time.monotonic()
        p = run(self.cmd(*monitoring, "build", "prometheus"), env=env, timeout=900)
        took = time.monotonic() - t0
        size = image_size(self.prometheus_image)
        if not self.checks.check(f"{name}: --profile monitoring build prometheus",
                                 p.returncode == 0 and size is not None,
                                 f"{took:.0f} s, {size or 0:.0f} MB" if p.returncode == 0
                                 else tail(p.stdout, 25)):
            return
        self.checks.figure(f"prometheus image build: {took:.0f} s, size {size:.0f} MB")
        check_runtime_image(self.checks, self.prometheus_image, "prometheus image",
                            entrypoint="sh")
        try:
            p = run(self.cmd(*monitoring, "up", "-d", "prometheus"), env=env, timeout=300)
            if not self.checks.check(f"{name}: --profile monitoring up -d prometheus",
                                     p.returncode == 0, tail(p.stdout, 3)):
                return
            self.check_prometheus(name)
        except (OSError, ValueError, KeyError, TypeError) as e:  # the API's answers
            self.checks.check(name, False, f"{type(e).__name__}: {e}")
        finally:
            p = run(self.cmd(*monitoring, "rm", "-f", "-s", "prometheus"), env=env, timeout=120)
            left = self.container("prometheus")
            self.checks.check(f"{name}: prometheus stopped and removed",
                              p.returncode == 0 and left is None,
                              "" if p.returncode == 0 and left is None
                              else f"container {left}: {tail(p.stdout, 3)}")

    def check_prometheus(self, name):
        """The targets, ps_server_model_version and the rules, through
        Prometheus's HTTP API on the host's loopback."""
        import yaml
        with open(os.path.join(ROOT, PROMETHEUS_CONFIG)) as f:
            config = yaml.safe_load(f)
        configured = {(job["job_name"], t) for job in config["scrape_configs"]
                      for sc in job["static_configs"] for t in sc["targets"]}
        servers = sorted(t for job, t in configured if job == "ps-server")
        t0 = time.monotonic()
        targets, why = {}, ""
        while time.monotonic() - t0 < PROMETHEUS_WAIT:
            try:
                active = prometheus_api("targets")["activeTargets"]
                targets = {(t["labels"]["job"], t["labels"]["instance"]):
                           (t["health"], t.get("lastError", "")) for t in active}
                if all(targets.get(("ps-server", s), ("",))[0] == "up" for s in servers):
                    break
            except (OSError, ValueError) as e:  # not listening yet
                why = f"{type(e).__name__}: {e}"
            time.sleep(2)
        waited = time.monotonic() - t0
        up = all(targets.get(("ps-server", s), ("",))[0] == "up" for s in servers)
        self.checks.check(
            f"{name}: /api/v1/targets lists the {len(configured)} configured targets, both "
            f"ps-server targets up (the exited workers' are not asserted)",
            set(targets) == configured and up,
            f"after {waited:.1f} s: " + ("; ".join(
                f"{job} {inst} {health}" + (f" ({err[:80]})" if err and health != "up" else "")
                for (job, inst), (health, err) in sorted(targets.items())) or why or "none")
            + ("" if set(targets) == configured else f"; configured: {sorted(configured)}"))

        # The servers' versions: Prometheus's last scrape against ps_ctl
        # status (training has finished, so neither moves).
        status = self.ctl("ps-server-0", "status", "reader", ",".join(
            s.replace(":9100", ":50051") for s in servers))
        versions = {}
        for line in status.stdout.splitlines():
            if line.startswith("{"):
                reply = json.loads(line)
                versions[reply["server"].split(":")[0]] = int(reply["version"])
        result = prometheus_api("query?query=ps_server_model_version")["result"]
        scraped = {r["metric"]["instance"].split(":")[0]: int(float(r["value"][1]))
                   for r in result if r["metric"].get("job") == "ps-server"}
        self.checks.check(
            f"{name}: ps_server_model_version equals each server's version in ps_ctl status",
            status.returncode == 0 and len(versions) == len(servers) and scraped == versions
            and all(v > 0 for v in versions.values()),
            f"Prometheus {scraped}; ps_ctl status {versions}"
            + ("" if status.returncode == 0 else f"; ps_ctl: {tail(status.stdout, 2)}"))

        with open(os.path.join(ROOT, ALERTS_FILE)) as f:
            alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]
                      if "alert" in r}
        rules = [r for g in prometheus_api("rules")["groups"] for r in g["rules"]]
        loaded = {r["name"] for r in rules if r.get("type") == "alerting"}
        errors = {r["name"]: r.get("lastError", "") for r in rules if r.get("health") == "err"}
        self.checks.check(
            f"{name}: /api/v1/rules holds every alert of {ALERTS_FILE}, none in error",
            alerts and loaded == alerts and not errors,
            f"{len(loaded)} alerting rules loaded, {len(alerts)} in the file"
            + (f"; missing {sorted(alerts - loaded)}" if alerts - loaded else "")
            + (f"; extra {sorted(loaded - alerts)}" if loaded - alerts else "")
            + (f"; in error: {errors}" if errors else ""))

    def check_security(self):
        """With the cluster of a finished run still up: mutual TLS is on, the
        identities decide what a client may do, the certificates' volume is
        as deploy/docker-compose.yml says, and a rerun of ps-certs --force
        rotates every certificate without a restart."""
        name = "security"
        logs = self.logs("ps-server-0", "ps-server-1")
        modes = re.findall(r"security: ([^\n]*)", logs)
        self.checks.check(f"{name}: both servers serve mutual TLS, health in plaintext on loopback",
                          len(modes) == 2 and all(m.startswith("mutual TLS; health probes "
                                                               "(plaintext) on 127.0.0.1:8081")
                                                  for m in modes), f"{modes}")
        plain = self.ctl("ps-server-0", "status", None)
        reader = self.ctl("ps-server-0", "status", "reader", "ps-server-0:50051,ps-server-1:50051")
        reader_ckpt = self.ctl("ps-server-0", "checkpoint", "reader")
        admin_ckpt = self.ctl("ps-server-0", "checkpoint", "admin")
        self.checks.check(
            f"{name}: plaintext refused; reader may read the status but not checkpoint; admin may",
            plain.returncode != 0 and reader.returncode == 0 and '"version"' in reader.stdout
            and reader_ckpt.returncode != 0 and "PERMISSION_DENIED" in reader_ckpt.stdout
            and admin_ckpt.returncode == 0,
            f"plaintext: exit {plain.returncode} {tail(plain.stdout, 1)}; reader status: exit "
            f"{reader.returncode}; reader checkpoint: exit {reader_ckpt.returncode} "
            f"{tail(reader_ckpt.stdout, 1)}; admin checkpoint: exit {admin_ckpt.returncode} "
            f"{tail(admin_ckpt.stdout, 1)}")
        # The volume: keys only for uid 10001, no CA key; mounted read-only;
        # the root filesystem read-only too.
        server = self.container("ps-server-0")
        listing = run(["docker", "exec", server, "sh", "-c",
                       "cd /certs && stat -c '%n %u:%g %a' *"], timeout=30).stdout.split("\n")
        files = dict(l.split(" ", 1) for l in listing if l.count(" ") == 2)
        keys = {n: v for n, v in files.items() if n.endswith(".key")}
        writes = run(["docker", "exec", server, "sh", "-c",
                      "touch /certs/x 2>&1; touch /x 2>&1; touch /tmp/x && echo tmp-ok"],
                     timeout=30).stdout
        self.checks.check(
            f"{name}: certs volume: keys 0400 of 10001:10001, no ca.key, read-only; root "
            f"filesystem read-only, /tmp writable",
            "ca.pem" in files and "ca.key" not in files and len(keys) >= 7
            and all(v == "10001:10001 400" for v in keys.values())
            and writes.count("Read-only file system") == 2 and "tmp-ok" in writes,
            f"{len(files)} files, keys {sorted(set(keys.values()))}; writes: "
            f"{' | '.join(writes.split(chr(10)))}")
        # ps-certs again: keeps the certificates; with --force, a new CA and
        # certificates, which the running servers pick up.
        def ca_digest():
            return run(["docker", "exec", server, "sha256sum", "/certs/ca.pem"],
                       timeout=30).stdout.split()[:1]
        started = {s: run(["docker", "inspect", "-f", "{{.State.StartedAt}}", self.container(s)],
                          timeout=30).stdout.strip() for s in ("ps-server-0", "ps-server-1")}
        before = ca_digest()
        keep = run(self.cmd("run", "--rm", "-T", "ps-certs"), env=self.env(), timeout=120,
                   stdin=subprocess.DEVNULL)
        kept = ca_digest()
        rotate = run(self.cmd("run", "--rm", "-T", "ps-certs", "--force"), env=self.env(),
                     timeout=120, stdin=subprocess.DEVNULL)
        rotated = ca_digest()
        t0 = time.monotonic()
        ok = None
        while time.monotonic() - t0 < 40:  # the servers re-read every 10 s
            p = self.ctl("ps-server-0", "status", "reader", "ps-server-0:50051,ps-server-1:50051")
            if p.returncode == 0:
                ok = time.monotonic() - t0
                break
            time.sleep(1)
        after = {s: run(["docker", "inspect", "-f", "{{.State.StartedAt}}", self.container(s)],
                        timeout=30).stdout.strip() for s in ("ps-server-0", "ps-server-1")}
        self.checks.check(
            f"{name}: ps-certs keeps the certificates; ps-certs --force rotates them and the "
            f"running servers accept the new ones without a restart",
            keep.returncode == 0 and before == kept and rotate.returncode == 0
            and rotated != before and ok is not None and after == started,
            f"keep: exit {keep.returncode}, CA {'unchanged' if before == kept else 'changed'}; "
            f"--force: exit {rotate.returncode}, CA {'new' if rotated != before else 'unchanged'}; "
            + (f"status with the new reader certificate {ok:.1f} s later" if ok is not None
               else f"status still failing after 40 s: {tail(p.stdout, 2)}")
            + ("" if after == started else f"; servers restarted: {started} -> {after}")
            + ("" if rotate.returncode == 0 else "\n" + tail(rotate.stdout, 5)))
        if ok is not None:
            self.checks.figure(f"certificate rotation: the servers accepted the new CA's "
                               f"certificates {ok:.1f} s after ps-certs --force")


#!/usr/bin/env bash
# A real Prometheus (Debian's /usr/bin/prometheus) scrapes a loopback
# cluster started by local_cluster.sh --metrics: 2 ps_servers and 2
# ps_workers in sync mode with mutual TLS (the scrapes present the reader
# certificate), a short job, the servers kept running after it
# (--keep_servers). Checks, through Prometheus's HTTP API:
#   - its targets: both servers up, both workers configured;
#   - each worker's ps_worker_steps_total, scraped while the workers keep
#     serving /metrics after the job (ps_worker --metrics_linger), is the
#     job's step count;
#   - its rules: the six alerts of deploy/prometheus/alerts.yml loaded and
#     evaluated without error;
#   - after the job, per shard, ps_server_model_version,
#     ps_server_workers{state="live"} and ps_server_pushes_total{outcome=
#     "applied"} as Prometheus scraped them equal what `ps_ctl status` says
#     (version, live_workers, pushes_accepted), which is unchanged before
#     and after; and the version is the job's step count.
# Every wait is bounded; the trap stops Prometheus and the cluster.
#
# usage: prometheus_test.sh LAUNCHER PS_SERVER PS_WORKER PS_CTL MAKE_CERTS
set -euo pipefail
LAUNCHER="$1" SERVER="$2" WORKER="$3" CTL="$4" MAKE_CERTS="$5"
T="${TEST_TMPDIR:-$(mktemp -d)}"
STEPS=30
LINGER=20  # seconds the workers serve /metrics after the job
PROMETHEUS=/usr/bin/prometheus
source "$(dirname "$0")/wait_lib.sh"

pids=()
cleanup() {
  # TERM first: the launcher then stops its own servers and workers.
  [ ${#pids[@]} -eq 0 ] && return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "${pids[@]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$T"/*.log; do echo "--- $f"; tail -25 "$f"; done >&2
  exit 1
}

[ -x "$PROMETHEUS" ] || fail "$PROMETHEUS not found (apt-get install prometheus)"

"$MAKE_CERTS" "$T/certs" --servers=2 --workers=2 >/dev/null || fail "make_certs.sh failed"
C="$T/certs"
CTL_FLAGS=(--tls_ca="$C/ca.pem" --tls_cert="$C/admin.pem" --tls_key="$C/admin.key" --timeout=5)

# The launcher's folder (and so prometheus.yml) goes under $T.
TMPDIR="$T" "$LAUNCHER" --server_bin="$SERVER" --worker_bin="$WORKER" --certs_dir="$C" \
  --metrics --keep_servers --servers=2 --workers=2 --mode=sync --worker_timeout=600 -- \
  --max_steps=$STEPS --batch_size=32 --hidden=64 --log_every=0 --threads=1 \
  --metrics_linger=$LINGER \
  >"$T/cluster.log" 2>&1 &
pids+=($!)
launcher=$!

wait_for_line 60 "$T/cluster.log" '^local_cluster: metrics at .*; Prometheus config ' ||
  fail "the launcher printed no Prometheus config"
config=$(sed -nE 's/^local_cluster: metrics at .*; Prometheus config (.*)$/\1/p' "$T/cluster.log")
servers=$(sed -nE 's/^local_cluster: 2 servers .* at ([^;]+); starting 2 workers$/\1/p' "$T/cluster.log")
[ -s "$config" ] || fail "no config at '$config'"
[ -n "$servers" ] || fail "the launcher printed no server addresses"
grep -q "^local_cluster: run: prometheus --config.file=$config " "$T/cluster.log" ||
  fail "the launcher printed no prometheus command line"
echo "--- $config"; cat "$config"

# A free port for Prometheus's web API.
PROM_PORT=$(/usr/bin/python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
API="http://127.0.0.1:$PROM_PORT/api/v1"
"$PROMETHEUS" --config.file="$config" --storage.tsdb.path="$T/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$T/prometheus.log" 2>&1 &
pids+=($!)

# api.py ARGS: Prometheus API checks (tests/prometheus_test.sh), one per
# subcommand; exit 0 iff it holds, printing why not otherwise.
cat >"$T/api.py" <<'PY'
import json, sys, urllib.parse, urllib.request

api, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]

def get(path, **params):
    url = api + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        sys.exit(f"{path}: {body}")
    return body["data"]

def by_shard(query, shard_of):
    """{shard: value} of an instant query, one series per server."""
    out = {}
    for r in get("/query", query=query)["result"]:
        out[shard_of[r["metric"]["instance"]]] = float(r["value"][1])
    return out

if cmd == "targets_up":  # the servers up, the workers configured
    active = get("/targets")["activeTargets"]
    jobs = {}
    for t in active:
        jobs.setdefault(t["labels"]["job"], []).append(t["health"])
    if jobs.get("ps_server") != ["up", "up"]:
        sys.exit(f"server targets not both up: {jobs}")
    if len(jobs.get("ps_worker", [])) != 2:
        sys.exit(f"not 2 worker targets: {jobs}")
elif cmd == "worker_steps":  # both workers scraped at the end of the job
    got = {r["metric"]["instance"]: float(r["value"][1])
           for r in get("/query", query="ps_worker_steps_total")["result"]}
    if len(got) != 2 or set(got.values()) != {float(args[0])}:
        sys.exit(f"ps_worker_steps_total {got}, want {args[0]} for 2 workers")
elif cmd == "rules":  # the six alerts, loaded and evaluated
    want = {"PsSyncStepStalled", "PsWorkerDropped", "PsServerRestarted",
            "PsNoRecentCheckpoint", "PsHighStaleness", "PsCallsRefused"}
    rules = [r for g in get("/rules")["groups"] for r in g["rules"]]
    names = {r["name"] for r in rules if r["type"] == "alerting"}
    if names != want:
        sys.exit(f"alerting rules {sorted(names)}, want {sorted(want)}")
    bad = [(r["name"], r.get("health"), r.get("lastError")) for r in rules
           if r.get("health") != "ok"]
    if bad:
        sys.exit(f"rules not evaluated ok: {bad}")
elif cmd == "matches":  # Prometheus's last scrape == the ps_ctl status lines
    status = [json.loads(l) for l in open(args[0]) if l.startswith("{")]
    shard_of = {r["metric"]["instance"]: int(r["metric"]["shard"])
                for r in get("/query", query="ps_build_info")["result"]}
    if sorted(shard_of.values()) != [0, 1]:
        sys.exit(f"ps_build_info shards: {shard_of}")
    scraped = {
        "version": by_shard("ps_server_model_version", shard_of),
        "live_workers": by_shard('ps_server_workers{state="live"}', shard_of),
        "pushes_accepted": by_shard('ps_server_pushes_total{outcome="applied"}', shard_of),
    }
    for s in status:
        want = {"version": int(s["version"]), "live_workers": len(s["live_workers"]),
                "pushes_accepted": int(s["pushes_accepted"])}
        got = {k: scraped[k].get(s["shard_id"]) for k in want}
        if got != want:
            sys.exit(f"shard {s['shard_id']}: Prometheus has {got}, ps_ctl status {want}")
    print("Prometheus and ps_ctl status agree:", json.dumps(scraped, sort_keys=True))
else:
    sys.exit(f"unknown command {cmd}")
PY
api() { /usr/bin/python3 "$T/api.py" "$API" "$@"; }

wait_until 60 api targets_up 2>"$T/targets.err" ||
  fail "Prometheus's targets: $(cat "$T/targets.err")"
echo "Prometheus scrapes both servers"
wait_until 60 api rules 2>"$T/rules.err" || fail "Prometheus's rules: $(cat "$T/rules.err")"
echo "Prometheus loaded the six alerts"

# Until Prometheus has both workers' last steps, or the workers are gone.
workers_scraped_or_gone() {
  api worker_steps $STEPS 2>"$T/workers.err" ||
    grep -q '^local_cluster: all 2 workers finished' "$T/cluster.log"
}
wait_until 300 workers_scraped_or_gone || fail "the workers did not finish"
api worker_steps $STEPS 2>"$T/workers.err" ||
  fail "Prometheus's worker steps: $(cat "$T/workers.err")"
echo "Prometheus scraped both workers' $STEPS steps"

WAIT_POLL=0.5 wait_for_line 300 "$T/cluster.log" '^local_cluster: servers still running at ' ||
  fail "the job did not finish"
# The numbers after the job: the servers' status, then Prometheus's scrapes
# until they catch up with it (a scrape a second), then the status again.
"$CTL" status --servers="$servers" "${CTL_FLAGS[@]}" >"$T/status1.json" ||
  fail "ps_ctl status failed"
cat "$T/status1.json"
/usr/bin/python3 - "$T/status1.json" $STEPS <<'PY' || fail "ps_ctl status does not show the whole job"
import json, sys
status = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
steps = int(sys.argv[2])
assert sorted(s["shard_id"] for s in status) == [0, 1], status
for s in status:
    # Sync: one update per step, from both workers' pushes; both leases held
    # (--worker_timeout=600).
    assert int(s["version"]) == steps, s
    assert int(s["pushes_accepted"]) == 2 * steps, s
    assert sorted(s["live_workers"]) == [0, 1], s
PY
wait_until 30 api matches "$T/status1.json" >/dev/null 2>"$T/matches.err" ||
  fail "Prometheus's values: $(cat "$T/matches.err")"
api matches "$T/status1.json"
"$CTL" status --servers="$servers" "${CTL_FLAGS[@]}" >"$T/status2.json" ||
  fail "ps_ctl status failed"
/usr/bin/python3 - "$T/status1.json" "$T/status2.json" <<'PY' || fail "the status changed after the job"
import json, sys
def load(p):
    return {s["shard_id"]: (s["version"], s["pushes_accepted"], s["live_workers"])
            for s in map(json.loads, filter(lambda l: l.startswith("{"), open(p)))}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a == b, (a, b)
PY
kill -0 "$launcher" 2>/dev/null || fail "the launcher exited with its servers"
echo PASS

#!/usr/bin/env bash
# Keeps ps_bench from rotting: each mode runs on tiny sizes for a moment and
# must print its figures (as a table and as JSON). Values are not checked:
# performance is measured by running ps_bench, never asserted in tests.
#
# usage: ps_bench_smoke_test.sh PS_BENCH MAKE_CERTS
set -euo pipefail
BENCH="$1" MAKE_CERTS="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$BENCH" transport --sizes=4096,65536 --seconds=0.05 --warmup=1)
echo "$out"
for op in push pull push_pull; do
  for transport in stream unary; do
    [ "$(grep -c "^$op/$transport " <<<"$out")" -eq 2 ] ||
      fail "transport table lacks two $op/$transport rows"
  done
done
json=$("$BENCH" transport --sizes=4096 --seconds=0.05 --warmup=1 --clients=2 --shards=2 --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["mode"] == "transport" and len(d["rows"]) == 6, d
for r in d["rows"]:
    for k in ("value", "baseline", "ratio", "p50_us", "p99_us", "cpu_us_per_mb",
              "baseline_cpu_us_per_mb"):
        assert r[k] > 0, (k, r)
' "$json"

out=$("$BENCH" transport --sizes=4096 --seconds=0.05 --warmup=1 --ops=pull --transports=stream)
echo "$out"
[ "$(grep -c "^pu" <<<"$out")" -eq 1 ] || fail "--ops=pull should give one pull row"
if "$BENCH" transport --ops=fetch 2>/dev/null; then fail "--ops=fetch should be an error"; fi

# --unix: each operation again over unix sockets, against loopback TCP.
out=$("$BENCH" transport --unix --sizes=4096 --seconds=0.05 --warmup=1 --ops=push_pull)
echo "$out"
for transport in stream unary; do
  [ "$(grep -c "^push_pull/$transport+unix " <<<"$out")" -eq 1 ] ||
    fail "--unix gave no push_pull/$transport+unix row"
done

# --tls: each operation again over mutual TLS, against plaintext.
certs="$TEST_TMPDIR/certs"
"$MAKE_CERTS" "$certs" --servers=1 --workers=2 >/dev/null
json=$("$BENCH" transport --tls --tls_dir="$certs" --sizes=4096 --seconds=0.05 --warmup=1 \
  --clients=2 --ops=push_pull --transports=stream --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
names = [r["name"] for r in d["rows"]]
assert names == ["push_pull/stream", "push_pull/stream+tls"], names
plain, tls = d["rows"]
assert tls["baseline"] == plain["value"] and tls["value"] > 0, d
' "$json"
if "$BENCH" transport --tls 2>/dev/null; then fail "--tls without --tls_dir should be an error"; fi

# --server_process: TLS per side, the shard a real ps_server process pinned
# apart from the clients (on one CPU where the machine has only one).
cpus=$(nproc)
client_cpu=$(( cpus > 1 ? 1 : 0 ))
json=$("$BENCH" transport --server_process --tls --tls_dir="$certs" --server_cpus=0 \
  --client_cpus=$client_cpu --sizes=4096 --seconds=0.05 --warmup=1 --clients=2 \
  --ops=push_pull --transports=stream,unary --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
names = [r["name"] for r in d["rows"]]
assert names == ["push_pull/stream+tls", "push_pull/unary+tls"], names
for r in d["rows"]:
    assert r["value"] > 0 and r["baseline"] > 0 and r["cpu_us_per_mb"] > 0, r
    # The server side is read in clock ticks: a tiny run may see none.
    assert r["server_cpu_us_per_mb"] >= 0 and r["baseline_server_cpu_us_per_mb"] >= 0, r
' "$json"
if "$BENCH" transport --server_process --sizes=4096 2>/dev/null; then
  fail "--server_process without --tls should be an error"
fi
if "$BENCH" transport --server_process --tls --tls_dir="$certs" --server_cpus=x 2>/dev/null; then
  fail "--server_cpus=x should be an error"
fi

# sparse, cold (the default): ps_server processes, two client processes,
# both sockets, a row per op, dist and socket.
json=$("$BENCH" sparse --sparse_ids=100 --dims=4 --pool_rows=2000 --seconds=0.05 \
  --warmup_seconds=0.05 --sparse_clients=2 --sockets=tcp,unix --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["mode"] == "sparse" and len(d["rows"]) == 12, d
names = {r["name"] for r in d["rows"]}
for op in ("push", "pull", "push_pull"):
    for dist in ("uniform", "zipf"):
        for sock in ("tcp", "unix"):
            assert f"{op} {dist} d4 {sock}" in names, (op, dist, sock, names)
for r in d["rows"]:
    assert r["value"] > 0 and r["rows_per_s"] > 0 and r["ids"] == 100, r
' "$json"
# With a memory budget: rows past it on disk, the tier's figures in each row.
out=$("$BENCH" sparse --sparse_ids=100 --dims=4 --dists=zipf --ops=pull,push --pool_rows=2000 \
  --seconds=0.05 --warmup_seconds=0.05 --sparse_table_budget=2000)
echo "$out"
[ "$(grep -cE "^(pull|push) zipf d4 tcp; budget 0.0 MiB: hit rate [0-9.]+% \(disk [0-9.]+%, new [0-9.]+%\), [0-9]+ rows on disk, server peak RSS [0-9.]+ MiB" <<<"$out")" -eq 2 ] ||
  fail "sparse --sparse_table_budget: no tier figures in the rows"
if "$BENCH" sparse --sparse_table_budget=-1 2>/dev/null; then
  fail "--sparse_table_budget=-1 should be an error"
fi
if "$BENCH" sparse --sockets=pipe 2>/dev/null; then fail "--sockets=pipe should be an error"; fi
if "$BENCH" sparse --sparse_workload=hot 2>/dev/null; then fail "--sparse_workload=hot should be an error"; fi

# sparse, warm: a row per op, dist and dim, each against the dense path.
json=$("$BENCH" sparse --sparse_workload=warm --sparse_ids=100 --dims=4,8 --seconds=0.05 --warmup=1 --vocab=1000 --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["mode"] == "sparse" and len(d["rows"]) == 12, d
for r in d["rows"]:
    assert r["value"] > 0 and r["baseline"] > 0 and r["rows_per_s"] > 0, r
    assert r["ids"] == 100 and 0 < r["unique_fraction"] <= 1, r
' "$json"
out=$("$BENCH" sparse --sparse_workload=warm --sparse_ids=50 --dims=4 --dists=zipf --ops=pull --seconds=0.05 --warmup=1)
echo "$out"
[ "$(grep -c "^pull zipf d4 " <<<"$out")" -eq 1 ] || fail "sparse table lacks its pull zipf d4 row"
if "$BENCH" sparse --dists=normal 2>/dev/null; then fail "--dists=normal should be an error"; fi
if "$BENCH" sparse --sparse_workload=warm --dists=normal 2>/dev/null; then
  fail "warm --dists=normal should be an error"
fi

out=$("$BENCH" apply --apply_elements=100000 --seconds=0.05)
echo "$out"
grep -q "^sgd_apply" <<<"$out" && grep -q "^sgd_shard" <<<"$out" || fail "apply table lacks sgd_apply and sgd_shard rows"

json=$("$BENCH" train --max_steps=20 --checkpoint_every=5 --tls --tls_dir="$certs" --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
names = [r["name"] for r in d["rows"]]
assert d["mode"] == "train" and len(names) == 6, names
assert names[0].startswith("standalone") and names[1].startswith("sync") and names[2].startswith("async"), names
assert names[3] == "sync, fault tolerant (ckpt every 5)", names
assert names[4].startswith("sync, mutual TLS") and names[5].startswith("async, mutual TLS"), names
for r in d["rows"]:
    assert r["value"] > 0 and 0 < r["test_accuracy"] <= 1, r
' "$json"
# --scrape_every: the scraped sync row (rounds of plain, scraped, scraped,
# plain) right after the plain one, its servers and workers scraped; with
# --repeats=2, two rounds and the standard error of their ratios.
json=$("$BENCH" train --max_steps=20 --checkpoint_every=0 --scrape_every=0.1 --repeats=2 --json)
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
names = [r["name"] for r in d["rows"]]
assert len(names) == 4 and names[2].startswith("sync, /metrics scraped every"), names
r = d["rows"][2]
assert r["value"] > 0 and r["baseline"] > 0 and 0 < r["test_accuracy"] <= 1, r
assert r["ratio_se"] >= 0, r
assert all("ratio_se" not in x for i, x in enumerate(d["rows"]) if i != 2), d
' "$json" || fail "train --scrape_every rows: $json"
"$BENCH" train --repeats=0 >/dev/null 2>"$TEST_TMPDIR/err" && fail "train --repeats=0 was accepted"
grep -q -- "--repeats must be >= 1" "$TEST_TMPDIR/err" || fail "train --repeats=0: $(cat "$TEST_TMPDIR/err")"
# --processes: sync and async again as real ps_server and ps_worker
# processes, on a unix socket and on loopback TCP, against the same
# standalone row.
json=$("$BENCH" train --max_steps=20 --checkpoint_every=0 --processes --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
names = [r["name"] for r in d["rows"]]
assert names == [names[0], names[1], names[2],
                 "sync, separate processes, unix socket", "async, separate processes, unix socket",
                 "sync, separate processes, loopback TCP",
                 "async, separate processes, loopback TCP"], names
base = d["rows"][0]["value"]
for r in d["rows"]:
    assert r["value"] > 0 and r["baseline"] == base and 0 < r["test_accuracy"] <= 1, r
' "$json"
out=$("$BENCH" train --max_steps=20 --checkpoint_every=0 --processes --process_sockets=unix)
echo "$out"
[ "$(grep -c "separate processes, unix socket" <<<"$out")" -eq 2 ] &&
  ! grep -q "loopback TCP" <<<"$out" || fail "--process_sockets=unix should give the two unix rows"
set +e
"$BENCH" train --processes --process_sockets=pipe >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--process_sockets=pipe: exit status $rc, expected 2"
if "$BENCH" train --max_steps=5 --checkpoint_every=0 --processes --process_sockets=unix \
    --server_binary=/bin/false >"$TEST_TMPDIR/false.txt" 2>&1; then
  fail "a ps_server that cannot start should fail ps_bench train --processes"
fi
cat "$TEST_TMPDIR/false.txt"
grep -q "ps_server did not start" "$TEST_TMPDIR/false.txt" || fail "no message naming ps_server"
# The failed row's logs are kept, and named: remove them.
kept=$(sed -n 's/^(logs kept in \(.*\))$/\1/p' "$TEST_TMPDIR/false.txt")
[ -n "$kept" ] && [ -f "$kept/server.log" ] || fail "the failed row's logs were not kept"
rm -rf "$kept"

# train --model=ctr: standalone, then 1 and 2 servers x sync and async (and
# the one-server runs again with the table past its memory budget, and with
# admission), as a table and as JSON (tiny sizes: the figures are not
# checked).
out=$("$BENCH" train --model=ctr --max_steps=5 --ctr_batch=16 --ctr_eval_examples=100 \
  --ctr_vocab=100)
echo "$out"
[ "$(grep -c "^ctr standalone " <<<"$out")" -eq 1 ] || fail "train --model=ctr: no standalone row"
for row in "sync (1 server," "async (1 server," "sync (2 servers," "async (2 servers,"; do
  [ "$(grep -cF "ctr $row 2 workers" <<<"$out")" -eq 1 ] ||
    fail "train --model=ctr: no '$row' row"
done
# The tiered reruns: the table past its memory budget, rows on disk.
for mode in sync async; do
  [ "$(grep -cE "^ctr $mode \(1 server, table [0-9]+ rows = [0-9.]+x its memory budget .*hit rate [0-9.]+%, reads from disk [0-9.]+%\) vs all in memory" <<<"$out")" -eq 1 ] ||
    fail "train --model=ctr: no tiered $mode row"
  [ "$(grep -cE "^ctr $mode \(1 server, prefetching each next batch, table [0-9]+ rows = .*hit rate [0-9.]+%" <<<"$out")" -eq 1 ] ||
    fail "train --model=ctr: no tiered $mode row with prefetch"
  [ "$(grep -cE "^ctr $mode \(1 server, admission count:2: [0-9]+ rows resident vs [0-9]+, [0-9.-]+% fewer; AUC [0-9.]+ vs [0-9.]+\) vs no admission" <<<"$out")" -eq 1 ] ||
    fail "train --model=ctr: no admission $mode row"
done
json=$("$BENCH" train --model=ctr --max_steps=5 --ctr_batch=16 --ctr_eval_examples=100 \
  --ctr_vocab=100 --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["mode"] == "train" and len(d["rows"]) == 11, d
for r in d["rows"]:
    assert r["value"] > 0 and r["baseline"] > 0 and 0 <= r["test_accuracy"] <= 1, r
' "$json"
set +e
"$BENCH" train --model=dlrm >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "train --model=dlrm: exit status $rc, expected 2"

# elastic: a real etcd, a worker joining and leaving; three rows with pauses.
json=$("$BENCH" elastic --elastic_window=1 --elastic_batch_size=250 --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
names = [r["name"] for r in d["rows"]]
assert d["mode"] == "elastic" and names == ["steady W=1", "join +1 W=2", "leave -1 W=1"], names
for r in d["rows"]:
    assert r["value"] > 0 and r["baseline"] == d["rows"][0]["value"] and r["pause_ms"] > 0, r
' "$json"
if "$BENCH" elastic --elastic_window=0.5 2>/dev/null; then fail "--elastic_window=0.5 should be an error"; fi
echo PASS

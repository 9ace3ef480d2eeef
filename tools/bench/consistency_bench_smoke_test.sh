#!/usr/bin/env bash
# Keeps `ps_bench consistency` from rotting: --quick runs every row for 30
# steps on real ps_server/ps_worker processes. Checks that the table has one
# line per (mode, optimizer), each either measured (an accuracy and the
# staleness) or "not supported by this build (...)"; that the rows every
# build supports (sync, sync with a quorum, async; SGD) ran; that the CSV
# holds their evaluations and the PNG was drawn; and that bad flags and a
# server that cannot start are errors. Accuracies and times are not
# checked: performance is measured by running ps_bench, never asserted here.
#
# usage: consistency_bench_smoke_test.sh PS_BENCH
set -euo pipefail
BENCH="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp="${TEST_TMPDIR:-$(mktemp -d)}"

"$BENCH" consistency --quick --png="$tmp/c.png" --log_dir="$tmp" >"$tmp/out.txt" 2>"$tmp/err.txt" ||
  { cat "$tmp/out.txt" "$tmp/err.txt"; fail "ps_bench consistency --quick failed"; }
cat "$tmp/out.txt"
/usr/bin/python3 - "$tmp/out.txt" "$tmp/c.csv" "$tmp/c.png" <<'EOF'
import csv, re, sys
out, csv_path, png = sys.argv[1:]
lines = open(out).read().splitlines()
head = [i for i, l in enumerate(lines) if l.startswith("mode ") and "final acc" in l]
assert len(head) == 1, "no table header"
table = lines[head[0] + 1:]
modes = ["sync", "sync, quorum 3", "ssp S=1", "ssp S=3", "async", "async, lr/(1+staleness)"]
ran = set()
for mode in modes:
    for opt, lr in (("sgd", "0.1"), ("adam", "0.001")):
        pat = re.compile(r"^%s +%s +%s +(.*)$" % (re.escape(mode), opt, re.escape(lr)))
        found = [pat.match(l).group(1) for l in table if pat.match(l)]
        assert len(found) == 1, (mode, opt, found)
        rest = found[0]
        if rest.startswith("not supported by this build ("):
            continue
        # to-target  vs-sync  step  final-acc  at-s  mean-stale  max-stale
        f = rest.split()
        assert len(f) >= 7 and (f[0] == "not" or float(f[0]) > 0), rest
        if f[0] == "not":
            f = [" ".join(f[:2])] + f[2:]
        acc, at, mean, mx = float(f[3]), float(f[4]), float(f[5]), int(f[6])
        assert 0 < acc <= 1 and at > 0 and mean >= 0 and mx >= mean, rest
        if mode.startswith("sync"):
            assert mx == 0, ("sync applies no stale gradient", rest)
        ran.add((mode, opt))
for must in (("sync", "sgd"), ("sync, quorum 3", "sgd"), ("async", "sgd")):
    assert must in ran, ("every build runs this row", must)
points = {}
for r in csv.DictReader(open(csv_path)):
    assert 0 < float(r["test_accuracy"]) <= 1 and float(r["t_s"]) > 0, r
    points.setdefault((r["mode"], r["optimizer"]), []).append(int(r["step"]))
assert set(points) == ran, (sorted(points), sorted(ran))
for key, steps in points.items():
    # --quick: 30 steps, evaluated every 10 (and at the end).
    assert len(steps) >= 2 and steps == sorted(steps), (key, steps)
assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
print("table, CSV and PNG: OK;", len(ran), "rows ran")
EOF

# --repeats=2: each row twice; the table gives each run's time, the CSV
# both runs' evaluations.
"$BENCH" consistency --quick --repeats=2 --modes=sync,async --optimizers=sgd:0.1 \
  --csv="$tmp/r.csv" --log_dir="$tmp/r" >"$tmp/r.txt" 2>&1 ||
  { cat "$tmp/r.txt"; fail "--repeats=2 failed"; }
cat "$tmp/r.txt"
grep -q "^medians of 2 runs" "$tmp/r.txt" || fail "--repeats=2: no line saying the table holds medians"
/usr/bin/python3 - "$tmp/r.txt" "$tmp/r.csv" <<'EOF'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
for mode in ("sync", "async"):
    row = [l for l in lines if l.startswith(mode + " ") and " sgd " in l]
    assert len(row) == 1, (mode, row)
    # ... max-stale, then each run's time to target ("-": not reached)
    f = row[0].replace("not reached", "not_reached").split()
    assert len(f) == 12, row
runs = {(r["mode"], r["run"]) for r in csv.DictReader(open(sys.argv[2]))}
assert runs == {("sync", "1"), ("sync", "2"), ("async", "1"), ("async", "2")}, runs
EOF

# --straggler=rotating: every worker slowed on its turn (the setup line says so).
"$BENCH" consistency --quick --straggler=rotating --modes=ssp1 --optimizers=sgd:0.1 \
  --log_dir="$tmp/rot" >"$tmp/rot.txt" 2>&1 || { cat "$tmp/rot.txt"; fail "--straggler=rotating failed"; }
grep -q "each worker sleeps 2x its usual step time on every 4th step, in turn" "$tmp/rot.txt" ||
  { cat "$tmp/rot.txt"; fail "--straggler=rotating: no setup line saying so"; }
grep -qE "^ssp S=1 +sgd" "$tmp/rot.txt" || { cat "$tmp/rot.txt"; fail "--straggler=rotating: no ssp row"; }

for bad in --modes=bsp --optimizers=sgd --optimizers=sgd:0 --target_accuracy=0 --json \
    --repeats=0 --straggler=random; do
  set +e
  "$BENCH" consistency --quick "$bad" >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$bad: exit status $rc, expected 2"
done
# A "server" that exits at once with status 1 is a failure, not a row this
# build does not support.
set +e
"$BENCH" consistency --quick --modes=sync --optimizers=sgd:0.1 --server_binary=/bin/false \
  >"$tmp/false.txt" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { cat "$tmp/false.txt"; fail "a ps_server that cannot start should fail the bench"; }
echo PASS

#!/usr/bin/python3
"""Tests tools/plot_run.py through its command line.

usage: plot_run_test.py PLOT_RUN.py

Writes two small metrics files as ps_worker does (one with test accuracy,
one without), draws them, and checks that the PNG is a PNG of the expected
size; then that a missing, an empty and a malformed file each exit 2 with
a message naming the file (and the line), and that a mismatched --label
count exits 2.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

SCRIPT = sys.argv[1]
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
ENV = dict(os.environ, MPLCONFIGDIR=os.path.join(TMP, "mpl"))
failures = []


def run(*args):
    return subprocess.run(["/usr/bin/python3", SCRIPT, *args], env=ENV, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def metrics(worker_id, steps, eval_every, pace):
    lines = []
    for i, step in enumerate(range(10, steps + 1, 10)):
        row = {"worker_id": worker_id, "step": step, "epoch": 0,
               "train_loss": round(2.0 / (1 + i), 6), "samples_per_sec": 3000.0 + 10 * i,
               "wall_s": round(step * pace, 3)}
        if eval_every and step % eval_every == 0:
            row["test_accuracy"] = 0.5 + 0.4 * step / steps
            row["test_loss"] = 1.0 - 0.5 * step / steps
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


sync = write("sync.jsonl", metrics(0, 200, 50, 0.02))
no_acc = write("async-w1.jsonl", metrics(1, 150, 0, 0.01))
out = os.path.join(TMP, "run.png")

r = run("-o", out, sync, no_acc, "--label=sync", "--label=async (worker 1)", "--title=test")
check("two runs, one without test accuracy, draw", r.returncode == 0, r.stderr)
size = png_size(out) if os.path.exists(out) else None
check("the output is a PNG", size is not None, f"{out}: no PNG header")
if size:
    w, h = size
    check("of the grid's size", 800 <= w <= 1200 and 700 <= h <= 1100, f"{w}x{h}")
    n = os.path.getsize(out)
    check("and of plausible bytes", 20_000 <= n <= 2_000_000, f"{n} bytes")

r = run("-o", os.path.join(TMP, "one.png"), sync)
check("one run, labelled by its file name", r.returncode == 0 and os.path.exists(
    os.path.join(TMP, "one.png")), r.stderr)

missing = os.path.join(TMP, "nope.jsonl")
r = run("-o", os.path.join(TMP, "x.png"), sync, missing)
check("a missing file exits 2 naming it", r.returncode == 2 and missing in r.stderr,
      f"rc {r.returncode}: {r.stderr}")

empty = write("empty.jsonl", "\n")
r = run("-o", os.path.join(TMP, "x.png"), empty)
check("an empty file exits 2 naming it", r.returncode == 2 and f"{empty}: empty" in r.stderr,
      f"rc {r.returncode}: {r.stderr}")

good = metrics(0, 30, 0, 0.01).splitlines()
bad_json = write("bad.jsonl", "\n".join([good[0], good[1], '{"step": 30, "wall_s":']) + "\n")
r = run("-o", os.path.join(TMP, "x.png"), sync, bad_json)
check("a malformed line exits 2 naming the file and line",
      r.returncode == 2 and f"{bad_json}:3: not a JSON object" in r.stderr,
      f"rc {r.returncode}: {r.stderr}")

no_step = write("nostep.jsonl", good[0] + "\n" + json.dumps({"wall_s": 1.0}) + "\n")
r = run("-o", os.path.join(TMP, "x.png"), no_step)
check("a line without a field exits 2 naming it",
      r.returncode == 2 and f'{no_step}:2: no "step" field' in r.stderr,
      f"rc {r.returncode}: {r.stderr}")

text_loss = write("textloss.jsonl", good[0].replace('"train_loss": 2.0', '"train_loss": "2"')
                  + "\n")
r = run("-o", os.path.join(TMP, "x.png"), text_loss)
check("a field that is not a number exits 2 naming it",
      r.returncode == 2 and f'{text_loss}:1: "train_loss" is "2"' in r.stderr,
      f"rc {r.returncode}: {r.stderr}")

r = run("-o", os.path.join(TMP, "x.png"), sync, no_acc, "--label=only-one")
check("a --label count unlike the files' exits 2",
      r.returncode == 2 and "1 --label for 2 files" in r.stderr, f"rc {r.returncode}: {r.stderr}")

r = run("--help")
check("--help says what it draws", r.returncode == 0 and "samples/s" in r.stdout, r.stderr)

if failures:
    sys.exit(f"{len(failures)} failed: {', '.join(failures)}")
print("all passed")

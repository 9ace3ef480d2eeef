#!/usr/bin/python3
"""Draws workers' metrics files (ps_worker --metrics_file) into one PNG.

    plot_run.py -o run.png sync.jsonl async.jsonl [--label=sync --label=async]

Each file is one run (one worker's JSON lines; see docs/operating.md,
"Metrics"), drawn in its own colour, labelled with its file name or with
the --label given in the same order. A 3x2 grid: training loss, test
accuracy and samples/s, each against the step (left) and against the wall
time since that worker started training (right). A file without
test_accuracy (a worker other than 0) leaves the accuracy panels without
its line. Exits 2, naming the file and line, for a file that is missing,
empty or not metrics lines. Needs Debian's python3-matplotlib.
"""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

REQUIRED = ("step", "wall_s", "train_loss", "samples_per_sec")
OPTIONAL = ("test_accuracy",)


class BadInput(Exception):
    """A file that cannot be drawn; the message names it (and the line)."""


def read_metrics(path):
    """Returns {field: [(step, wall_s, value)]} from one metrics file."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not a text file of JSON lines") from None
    series = {name: [] for name in REQUIRED[2:] + OPTIONAL}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{where}: not a JSON object: {e.msg}") from None
        if not isinstance(row, dict):
            raise BadInput(f"{where}: not a JSON object")
        values = {}
        for name in REQUIRED + OPTIONAL:
            if name not in row:
                if name in REQUIRED:
                    raise BadInput(f"{where}: no \"{name}\" field")
                continue
            v = row[name]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise BadInput(f"{where}: \"{name}\" is {json.dumps(v)}, not a finite number")
            values[name] = float(v)
        for name in series:
            if name in values:
                series[name].append((values["step"], values["wall_s"], values[name]))
    if not series["train_loss"]:
        raise BadInput(f"{path}: empty: no metrics lines")
    return series


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example:\n" + __doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="METRICS.jsonl",
                    help="ps_worker --metrics_file output, one run per file")
    ap.add_argument("-o", "--output", required=True, metavar="OUT.png",
                    help="the PNG to write")
    ap.add_argument("--label", action="append", default=[],
                    help="a run's name in the legend, once per file in order "
                         "(default: the file names)")
    ap.add_argument("--title", default="", help="a title above the grid")
    args = ap.parse_args()
    if args.label and len(args.label) != len(args.files):
        ap.error(f"{len(args.label)} --label for {len(args.files)} files: give one per file")
    labels = args.label or [os.path.basename(p) for p in args.files]

    try:
        runs = [read_metrics(p) for p in args.files]
    except BadInput as e:
        print(f"plot_run.py: {e}", file=sys.stderr)
        return 2

    rows = [("train_loss", "training loss (mean since the previous line)"),
            ("test_accuracy", "test accuracy"),
            ("samples_per_sec", "samples/s (this worker)")]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(3, 2, figsize=(11, 10), sharex="col")
    for r, (field, ylabel) in enumerate(rows):
        for c, (x, xlabel) in enumerate([(0, "step"), (1, "wall time (s)")]):
            ax = axes[r][c]
            drawn = False
            for i, (run, label) in enumerate(zip(runs, labels)):
                pts = run[field]
                if not pts:
                    continue
                ax.plot([p[x] for p in pts], [p[2] for p in pts],
                        color=colours[i % len(colours)], marker="." if len(pts) < 40 else None,
                        markersize=4, linewidth=1.2, label=label)
                drawn = True
            if not drawn:
                ax.text(0.5, 0.5, f"no {field} in these files", ha="center", va="center",
                        transform=ax.transAxes, color="grey")
            ax.grid(alpha=0.3)
            if c == 0:
                ax.set_ylabel(ylabel)
            if r == len(rows) - 1:
                ax.set_xlabel(xlabel)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=min(len(names), 4), fontsize=9,
               bbox_to_anchor=(0.5, 0.995))
    if args.title:
        fig.suptitle(args.title, y=0.955, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.94 if args.title else 0.96))
    try:
        fig.savefig(args.output, dpi=90)
    except OSError as e:
        print(f"plot_run.py: {args.output}: cannot write: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

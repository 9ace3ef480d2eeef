#!/usr/bin/python3
"""Draws `ps_bench consistency`'s CSV: test accuracy against wall time.

    plot_consistency.py RESULTS.csv OUT.png [--target=0.85] [--title=TEXT]

One line per (mode, optimizer) row: a colour per mode, solid for the first
optimizer in the file and dashed, dotted, ... for the next; a row's further
runs (ps_bench --repeats) faint in the same style; a grey line at the
target accuracy. Needs Debian's python3-matplotlib (deploy/setup_debian.sh).
"""
import argparse
import csv
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--title", default="ps_bench consistency")
    args = ap.parse_args()

    rows = {}  # (mode, optimizer, lr, run) -> [(t, acc)], in file order
    with open(args.csv, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["mode"], r["optimizer"], r["lr"], int(r.get("run") or 1))
            rows.setdefault(key, []).append((float(r["t_s"]), float(r["test_accuracy"])))
    if not rows:
        sys.exit(f"{args.csv}: no evaluations to plot")

    modes = list(dict.fromkeys(k[0] for k in rows))
    optimizers = list(dict.fromkeys(k[1] for k in rows))
    styles = ["-", "--", ":", "-."]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    labelled = set()
    for (mode, opt, lr, run), pts in rows.items():
        # A row's first run in the file is labelled; its other runs (--repeats) are faint.
        first = (mode, opt, lr) not in labelled
        labelled.add((mode, opt, lr))
        ax.plot([p[0] for p in pts], [p[1] for p in pts],
                color=colours[modes.index(mode) % len(colours)],
                linestyle=styles[optimizers.index(opt) % len(styles)],
                alpha=1.0 if first else 0.35, marker="." if first else None, markersize=3,
                label=f"{mode} / {opt} (lr {lr})" if first else None)
    ax.axhline(args.target, color="grey", linewidth=0.8)
    ax.set_xlabel("wall time since worker 0 started training (s)")
    ax.set_ylabel("test accuracy (worker 0)")
    ax.set_ylim(max(0.0, min(p[1] for pts in rows.values() for p in pts) - 0.02), 1.0)
    ax.set_title("\n".join(textwrap.wrap(args.title, 90)), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()

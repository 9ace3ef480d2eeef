#!/usr/bin/python3
"""make_wheel: writes the `ps` package's wheel (//python:wheel's genrule).

    make_wheel.py --out=DIST-VER-TAG.whl --root=DIR --name=NAME --version=V
                  --tag=PY-ABI-PLATFORM --summary=TEXT [--requires=REQ ...] FILE...

Every FILE lies under DIR (the genrule's $(RULEDIR)); its path relative to
DIR is its path in the wheel and in site-packages (ps/__init__.py,
ps/_ps.so, ...). Then comes `{name}-{version}.dist-info/` (the name with `-`
as `_`, PEP 427):
  - METADATA: core metadata 2.1 (Name, Version, Summary, Requires-Python,
    one Requires-Dist per --requires);
  - WHEEL: Root-Is-Purelib false (the package holds a compiled extension),
    and --tag;
  - RECORD, last: every other file with its sha256 (urlsafe base64, no
    padding) and size, and RECORD itself with neither.

Contract:
  - Deterministic: the same inputs give the same bytes. Entries are sorted,
    every timestamp is 1980-01-01 00:00 (zip's earliest) and the modes are
    fixed (0755 for shared objects, 0644 for the rest).
  - --tag must be the tag of the interpreter running this script
    (cpXY-cpXY-PLATFORM from sysconfig, as pip computes it), and --out's
    file name must match the name, version and tag: a mismatch fails the
    build instead of producing a wheel that pip refuses or, worse, installs
    for the wrong Python. (Bazel needs the output's name before the build,
    so the tag comes from @system_python//:wheel.bzl, computed from the same
    /usr/bin/python3 when the repository is fetched.)
  - Requires-Python pins the interpreter's minor version: the extension is
    built against that version's headers and ABI.
"""

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import sys
import sysconfig
import zipfile

# The earliest time a zip entry can carry: any fixed value makes the wheel
# reproducible; this one is what other reproducible-build tools use too.
EPOCH = (1980, 1, 1, 0, 0, 0)


def interpreter_tag():
    """This interpreter's wheel tag, e.g. cp311-cp311-linux_x86_64 (PEP 425:
    the platform with `-` and `.` written as `_`)."""
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{py}-{py}-{platform}"


def dist_name(name):
    """The name as it appears in file names (PEP 427: runs of -_. become _)."""
    return re.sub(r"[-_.]+", "_", name)


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def add(zf, path, data, mode):
    info = zipfile.ZipInfo(path, date_time=EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16  # a regular file with `mode`
    info.create_system = 3  # Unix, so that the mode above is honoured
    zf.writestr(info, data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--requires", action="append", default=[])
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    if args.tag != interpreter_tag():
        sys.exit(f"make_wheel: --tag={args.tag}, but {sys.executable} is "
                 f"{interpreter_tag()}: refetch it with `bazel sync --only=system_python`")
    expected = f"{dist_name(args.name)}-{args.version}-{args.tag}.whl"
    if os.path.basename(args.out) != expected:
        sys.exit(f"make_wheel: --out is {os.path.basename(args.out)}, expected {expected}")

    # The package's files, by their path inside the wheel.
    files = {}
    for f in args.files:
        rel = os.path.relpath(f, args.root)
        if rel.startswith("..") or os.path.isabs(rel):
            sys.exit(f"make_wheel: {f} is not under --root={args.root}")
        with open(f, "rb") as fh:
            files[rel] = fh.read()

    info_dir = f"{dist_name(args.name)}-{args.version}.dist-info"
    major, minor = sys.version_info[:2]
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {args.name}",
        f"Version: {args.version}",
        f"Summary: {args.summary}",
        f"Requires-Python: >={major}.{minor},<{major}.{minor + 1}",
    ] + [f"Requires-Dist: {r}" for r in args.requires]
    wheel = [
        "Wheel-Version: 1.0",
        "Generator: python/make_wheel.py",
        "Root-Is-Purelib: false",
        f"Tag: {args.tag}",
    ]
    files[f"{info_dir}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{info_dir}/WHEEL"] = ("\n".join(wheel) + "\n").encode()

    # The package first, then dist-info, RECORD last (what PEP 427
    # recommends, so that an installer streaming the archive sees it last).
    order = sorted(files, key=lambda p: (p.startswith(info_dir), p))
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path in order:
        writer.writerow([path, record_hash(files[path]), len(files[path])])
    writer.writerow([f"{info_dir}/RECORD", "", ""])

    tmp = args.out + ".tmp"
    with zipfile.ZipFile(tmp, "w") as zf:
        for path in order:
            add(zf, path, files[path], 0o755 if path.endswith(".so") else 0o644)
        add(zf, f"{info_dir}/RECORD", record.getvalue().encode(), 0o644)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()

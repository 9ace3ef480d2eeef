#!/usr/bin/python3
"""make_wheel: writes the `ps` package's wheel (//python:wheel's genrule).

    make_wheel.py --pyproject=python/pyproject.toml --version=V
                  --tag=PY-ABI-PLATFORM --out=DIST-V-TAG.whl --root=DIR FILE...

Every FILE lies under DIR (the genrule's $(RULEDIR)); its path relative to
DIR is its path in the wheel and in site-packages (ps/__init__.py,
ps/_ps.so, ps/_ps.pyi, ps/py.typed, ...). Then comes
`{name}-{version}.dist-info/` (the name with `-` as `_`, PEP 427):
  - METADATA: core metadata 2.1, from pyproject.toml's [project] table
    (PEP 621): Name (name), Version (--version), Summary (description),
    Requires-Python (requires-python), a Classifier per classifiers, a
    Requires-Dist per dependencies, and a Provides-Extra per
    optional-dependencies with its Requires-Dist marked `extra == "..."`;
  - WHEEL: Root-Is-Purelib false (the package holds a compiled extension),
    and --tag;
  - RECORD, last: every other file with its sha256 (urlsafe base64, no
    padding) and size, and RECORD itself with neither.

Contract:
  - Deterministic: the same inputs give the same bytes. Entries are sorted,
    every timestamp is 1980-01-01 00:00 (zip's earliest) and the modes are
    fixed (0755 for shared objects, 0644 for the rest).
  - One source for each fact, a mismatch fails the build: the version is
    --version (//:version.bzl's PS_VERSION), so pyproject.toml must declare
    it dynamic and give none; [project] keys this script does not write are
    refused rather than left out of METADATA; --out's file name must be the
    name, version and tag.
  - --tag must be the tag of the interpreter running this script
    (cpXY-cpXY-PLATFORM from sysconfig, as pip computes it), and
    requires-python must pin that interpreter's minor version (the
    extension is built against its headers and ABI): otherwise pip would
    refuse the wheel or, worse, install it for the wrong Python. (Bazel
    needs the output's name before the build, so the tag comes from
    @system_python//:wheel.bzl, computed from the same /usr/bin/python3
    when the repository is fetched.)
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
import tomllib
import zipfile
from typing import Any, Dict, List, NoReturn

# The earliest time a zip entry can carry: any fixed value makes the wheel
# reproducible; this one is what other reproducible-build tools use too.
EPOCH = (1980, 1, 1, 0, 0, 0)


# The [project] keys whose values go into METADATA; `version` must be dynamic.
PROJECT_KEYS = {"name", "dynamic", "description", "requires-python", "dependencies",
                "optional-dependencies", "classifiers"}


def interpreter_tag() -> str:
    """This interpreter's wheel tag, e.g. cp311-cp311-linux_x86_64 (PEP 425:
    the platform with `-` and `.` written as `_`)."""
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{py}-{py}-{platform}"


def dist_name(name: str) -> str:
    """The name as it appears in file names (PEP 427: runs of -_. become _)."""
    return re.sub(r"[-_.]+", "_", name)


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def add(zf: zipfile.ZipFile, path: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(path, date_time=EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16  # a regular file with `mode`
    info.create_system = 3  # Unix, so that the mode above is honoured
    zf.writestr(info, data)


def read_project(pyproject: str) -> Dict[str, Any]:
    """`pyproject`'s [project] table, checked; exits naming what is wrong."""
    with open(pyproject, "rb") as f:
        project: Dict[str, Any] = tomllib.load(f).get("project", {})

    def fail(why: str) -> NoReturn:
        sys.exit(f"make_wheel: {pyproject}: [project] {why}")

    unknown = sorted(set(project) - PROJECT_KEYS)
    if unknown:
        fail(f"has {unknown}, which make_wheel.py does not write to METADATA")
    for key in ("name", "description", "requires-python"):
        if not isinstance(project.get(key), str):
            fail(f"needs {key} (a string)")
    if "version" in project or "version" not in project.get("dynamic", []):
        fail("must list version in dynamic and give none: it is //:version.bzl's PS_VERSION")
    major, minor = sys.version_info[:2]
    pinned = f">={major}.{minor},<{major}.{minor + 1}"
    if project["requires-python"] != pinned:
        fail(f"requires-python is {project['requires-python']!r}, but the extension is built "
             f"for {sys.executable} {major}.{minor}: it must be {pinned!r}")
    return project


def metadata(project: Dict[str, Any], version: str) -> List[str]:
    """The METADATA lines of the checked [project] table and `version`."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {r}" for r in project.get("dependencies", [])]
    for extra, requires in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requires]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--pyproject", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    project = read_project(args.pyproject)
    name = project["name"]
    if args.tag != interpreter_tag():
        sys.exit(f"make_wheel: --tag={args.tag}, but {sys.executable} is "
                 f"{interpreter_tag()}: refetch it with `bazel sync --only=system_python`")
    expected = f"{dist_name(name)}-{args.version}-{args.tag}.whl"
    if os.path.basename(args.out) != expected:
        sys.exit(f"make_wheel: --out is {os.path.basename(args.out)}, expected {expected} "
                 f"(the name in {args.pyproject}, the version and the tag)")

    # The package's files, by their path inside the wheel.
    files: Dict[str, bytes] = {}
    for f in args.files:
        rel = os.path.relpath(f, args.root)
        if rel.startswith("..") or os.path.isabs(rel):
            sys.exit(f"make_wheel: {f} is not under --root={args.root}")
        with open(f, "rb") as fh:
            files[rel] = fh.read()

    info_dir = f"{dist_name(name)}-{args.version}.dist-info"
    wheel = [
        "Wheel-Version: 1.0",
        "Generator: python/make_wheel.py",
        "Root-Is-Purelib: false",
        f"Tag: {args.tag}",
    ]
    files[f"{info_dir}/METADATA"] = ("\n".join(metadata(project, args.version)) + "\n").encode()
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

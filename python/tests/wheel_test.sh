#!/usr/bin/env bash
# //python:wheel_test: the wheel installs and works as a Python user expects.
#
#   wheel_test.sh WHEEL PS_SERVER PACKAGE_FILE...   (PACKAGE_FILE: //python:ps's)
#
#   1. The archive: exactly the files of //python:ps (byte for byte, under
#      ps/) and the dist-info; every RECORD hash and size right; every
#      timestamp fixed (reproducible); METADATA and WHEEL as make_wheel.py
#      documents.
#   2. /usr/bin/python3 -m venv --system-site-packages, then the venv's
#      `pip install --no-index --no-deps WHEEL` (no index, no network).
#   3. From a folder outside the source tree, with no PYTHONPATH: the venv's
#      python imports ps (from the venv's site-packages) and ps.torch, and
#      push-pulls against a real ps_server (wheel_check.py).
#   4. `pip uninstall -y ps-client` removes it: ps no longer imports.
# Prints PASS at the end; any failure exits non-zero with FAIL: <why>.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

wheel=$(abspath "$1")
export PS_SERVER_BIN=$(abspath "$2")
shift 2
package=("$@")
tests=$(abspath "${TEST_SRCDIR}/${TEST_WORKSPACE}/python/tests/wheel_check.py")
tests=$(dirname "$tests")
tmp="${TEST_TMPDIR:?}"

# pip: never an index or the network, no cache or config outside the test's
# folder, no version check.
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 HOME="$tmp/home"
unset PYTHONPATH PYTHONHOME
mkdir -p "$HOME"

# 1. The archive itself, read by the system python (zipfile is stdlib).
/usr/bin/python3 - "$wheel" "${package[@]}" <<'EOF' || fail "the archive is not as make_wheel.py documents"
import base64, csv, hashlib, io, os, sys, zipfile
path = sys.argv[1]
name = os.path.basename(path)
dist, version, py, abi, plat = name[:-len(".whl")].split("-")
info = f"{dist}-{version}.dist-info"
zf = zipfile.ZipFile(path)
names = zf.namelist()
package = {"ps/" + os.path.basename(f): f for f in sys.argv[2:]}
assert {"ps/__init__.py", "ps/torch.py", "ps/_ps.so"} <= set(package), sorted(package)
want = set(package) | {f"{info}/METADATA", f"{info}/WHEEL", f"{info}/RECORD"}
assert set(names) == want, f"entries {sorted(names)}, want {sorted(want)}"
for entry, f in package.items():
    assert zf.read(entry) == open(f, "rb").read(), f"{entry} differs from {f}"
assert names[-1] == f"{info}/RECORD", f"RECORD is not last: {names}"
dates = {zi.date_time for zi in zf.infolist()}
assert dates == {(1980, 1, 1, 0, 0, 0)}, f"timestamps {dates}"
rows = list(csv.reader(io.StringIO(zf.read(f"{info}/RECORD").decode())))
assert sorted(r[0] for r in rows) == sorted(names), f"RECORD lists {[r[0] for r in rows]}"
for path_, digest, size in rows:
    if path_ == f"{info}/RECORD":
        assert digest == size == "", f"RECORD's own row: {digest!r} {size!r}"
        continue
    data = zf.read(path_)
    got = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert (digest, int(size)) == (got, len(data)), f"{path_}: RECORD {digest} {size}, is {got} {len(data)}"
meta = zf.read(f"{info}/METADATA").decode().splitlines()
wheel = zf.read(f"{info}/WHEEL").decode().splitlines()
major, minor = sys.version_info[:2]
for line in ("Metadata-Version: 2.1", "Name: ps-client", f"Version: {version}",
             "Requires-Dist: numpy", f"Requires-Python: >={major}.{minor},<{major}.{minor + 1}"):
    assert line in meta, f"METADATA lacks {line!r}: {meta}"
assert any(l.startswith("Summary: ") for l in meta), meta
tag = f"{py}-{abi}-{plat}"
for line in ("Wheel-Version: 1.0", "Root-Is-Purelib: false", f"Tag: {tag}"):
    assert line in wheel, f"WHEEL lacks {line!r}: {wheel}"
mode = zf.getinfo("ps/_ps.so").external_attr >> 16
assert mode & 0o777 == 0o755, f"ps/_ps.so mode {oct(mode)}"
print(f"wheel_test: archive ok: {name}, {len(names)} entries, RECORD verified, "
      f"{os.path.getsize(path)} bytes")
EOF

# 2. A venv that sees Debian's numpy and torch, and the wheel installed in it.
t0=$(date +%s%3N)
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv" || fail "python3 -m venv failed"
py="$tmp/venv/bin/python"
timeout 120 "$py" -m pip install --no-index --no-deps "$wheel" || fail "pip install failed"
t1=$(date +%s%3N)
echo "wheel_test: venv and pip install: $(( t1 - t0 )) ms"
shown=$(timeout 30 "$py" -m pip show -f ps-client) || fail "pip show -f ps-client failed"
grep -qE '^ +ps/_ps\.so$' <<<"$shown" || fail "pip show -f ps-client does not list ps/_ps.so: $shown"

# 3. Outside the source tree, no PYTHONPATH: the venv's copy, and an exchange.
mkdir -p "$tmp/elsewhere"
(cd "$tmp/elsewhere" && timeout 120 "$py" -u "$tests/wheel_check.py" "$tmp/venv") ||
  fail "the installed package did not work (wheel_check.py)"

# 4. Uninstalled, it is gone.
timeout 60 "$py" -m pip uninstall -y ps-client || fail "pip uninstall failed"
if (cd "$tmp/elsewhere" && "$py" -c 'import ps' 2>/dev/null); then
  fail "ps still imports after pip uninstall"
fi
left=$(find "$tmp/venv" -path '*site-packages/ps*' | head -3)
[ -z "$left" ] || fail "pip uninstall left $left"
echo "PASS"

#!/usr/bin/env bash
# //python:wheel_test: the wheel installs and works as a Python user expects.
#
#   wheel_test.sh WHEEL PS_SERVER PYPROJECT PACKAGE_FILE...   (PACKAGE_FILE: //python:ps's)
#
#   1. The archive: exactly the files of //python:ps (byte for byte, under
#      ps/; the typing marker py.typed and the extension's stub _ps.pyi
#      among them) and the dist-info; every RECORD hash and size right;
#      every timestamp fixed (reproducible); WHEEL as make_wheel.py
#      documents; METADATA line for line what PYPROJECT's [project] table
#      says (name, description, requires-python, classifiers, dependencies,
#      extras), with the version of the file name.
#   2. /usr/bin/python3 -m venv --system-site-packages, then the venv's
#      `pip install --no-index --no-deps WHEEL` (no index, no network).
#   3. From a folder outside the source tree, with no PYTHONPATH: the venv's
#      python imports ps (from the venv's site-packages) and ps.torch, and
#      push-pulls against a real ps_server (wheel_check.py); and Debian's
#      mypy, pointed at the venv's python, finds the installed package's
#      types (py.typed, _ps.pyi): a right use passes --strict, a wrong one
#      fails.
#   4. `pip uninstall -y ps-client` removes it: ps no longer imports.
# Prints PASS at the end; any failure exits non-zero with FAIL: <why>.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

wheel=$(abspath "$1")
export PS_SERVER_BIN=$(abspath "$2")
pyproject=$(abspath "$3")
shift 3
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
/usr/bin/python3 - "$wheel" "$pyproject" "${package[@]}" <<'EOF' || fail "the archive is not as make_wheel.py documents"
import base64, csv, hashlib, io, os, sys, tomllib, zipfile
path, pyproject = sys.argv[1], sys.argv[2]
name = os.path.basename(path)
dist, version, py, abi, plat = name[:-len(".whl")].split("-")
info = f"{dist}-{version}.dist-info"
zf = zipfile.ZipFile(path)
names = zf.namelist()
package = {"ps/" + os.path.basename(f): f for f in sys.argv[3:]}
assert {"ps/__init__.py", "ps/torch.py", "ps/_ps.so", "ps/_ps.pyi", "ps/py.typed"} <= \
    set(package), sorted(package)
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
with open(pyproject, "rb") as f:
    project = tomllib.load(f)["project"]
major, minor = sys.version_info[:2]
assert project["requires-python"] == f">={major}.{minor},<{major}.{minor + 1}", project
want = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}",
        f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}"]
want += [f"Classifier: {c}" for c in project["classifiers"]]
want += [f"Requires-Dist: {r}" for r in project["dependencies"]]
for extra, requires in sorted(project["optional-dependencies"].items()):
    want += [f"Provides-Extra: {extra}"] + [f'Requires-Dist: {r}; extra == "{extra}"'
                                            for r in requires]
assert meta == want, f"METADATA is not pyproject.toml's:\n{meta}\nwant\n{want}"
assert dist == project["name"].replace("-", "_"), (dist, project["name"])
assert "Requires-Dist: numpy" in meta and "Classifier: Typing :: Typed" in meta, meta
assert zf.read("ps/py.typed") == b"" and b"class Client" in zf.read("ps/_ps.pyi")
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
for f in ps/_ps.so ps/_ps.pyi ps/py.typed; do
  grep -qE "^ +${f//./\\.}\$" <<<"$shown" || fail "pip show -f ps-client does not list $f: $shown"
done

# 3. Outside the source tree, no PYTHONPATH: the venv's copy, and an exchange.
mkdir -p "$tmp/elsewhere"
(cd "$tmp/elsewhere" && timeout 120 "$py" -u "$tests/wheel_check.py" "$tmp/venv") ||
  fail "the installed package did not work (wheel_check.py)"

# The installed types, as a user's type checker sees them (no source tree:
# from elsewhere, mypy asking the venv's python where packages are).
mypy_check() {  # CODE: mypy --strict's exit status on it
  (cd "$tmp/elsewhere" && timeout 300 /usr/bin/python3 -m mypy --strict --cache-dir "$tmp/mypy_cache" \
     --python-executable "$py" -c "$1")
}
right='import ps
def pull(c: ps.Client) -> ps.Float32Array:
    w: int = c.version
    return c.pull(min_version=w)["w"]'
mypy_check "$right" || fail "mypy --strict refused a right use of the installed ps"
if mypy_check "${right/w: int/w: str}" >/dev/null; then
  fail "mypy --strict took a wrong use of the installed ps: the types were not found"
fi
echo "wheel_test: mypy --strict sees the installed package's types"

# 4. Uninstalled, it is gone.
timeout 60 "$py" -m pip uninstall -y ps-client || fail "pip uninstall failed"
if (cd "$tmp/elsewhere" && "$py" -c 'import ps' 2>/dev/null); then
  fail "ps still imports after pip uninstall"
fi
left=$(find "$tmp/venv" -path '*site-packages/ps*' | head -3)
[ -z "$left" ] || fail "pip uninstall left $left"
echo "PASS"

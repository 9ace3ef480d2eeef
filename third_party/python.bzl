"""Repository rule exposing Debian's Python 3 headers (python3-dev) as
@system_python//:headers, for pybind11 extension modules.

`pkg-config --cflags python3` names the include folders; each is linked into
the repository so that Bazel can pass it as an include path. pybind11's own
headers (pybind11-dev) are in /usr/include, a default include path.

@system_python//:wheel.bzl defines WHEEL_TAG, the wheel tag of /usr/bin/python3
(e.g. "cp311-cp311-linux_x86_64", from sysconfig as pip computes it), for
//python:wheel, whose output file must be named before the build. The rule
fails when that interpreter's version is not the one whose headers
pkg-config names: the extension would not fit the interpreter.
"""

# Prints "<major>.<minor> <tag>" of the interpreter that runs it.
_TAG_SCRIPT = """
import re, sys, sysconfig
py = "cp%d%d" % sys.version_info[:2]
print("%d.%d" % sys.version_info[:2], "%s-%s-%s" % (py, py, re.sub(r"[-.]", "_", sysconfig.get_platform())))
"""

def _system_python_impl(ctx):
    res = ctx.execute(["pkg-config", "--cflags", "python3"])
    if res.return_code != 0:
        fail("pkg-config --cflags python3 failed: %s\nRun deploy/setup_debian.sh (python3-dev)." %
             res.stderr)
    dirs = [f[2:] for f in res.stdout.strip().split(" ") if f.startswith("-I")]
    includes = []
    for i, d in enumerate(dirs):
        ctx.symlink(d, "include%d" % i)
        includes.append("include%d" % i)
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "headers",
    hdrs = glob(["include*/**/*.h"]),
    includes = {includes},
)
""".format(includes = repr(includes)))

    version = ctx.execute(["pkg-config", "--modversion", "python3"]).stdout.strip()
    res = ctx.execute(["/usr/bin/python3", "-c", _TAG_SCRIPT])
    if res.return_code != 0:
        fail("/usr/bin/python3 cannot report its wheel tag: %s" % res.stderr)
    interpreter, tag = res.stdout.strip().split(" ")
    if interpreter != version:
        fail("pkg-config's python3 is %s but /usr/bin/python3 is %s" % (version, interpreter))
    ctx.file("wheel.bzl", "# /usr/bin/python3's wheel tag (third_party/python.bzl).\nWHEEL_TAG = %r\n" % tag)
    ctx.file("WORKSPACE", 'workspace(name = "system_python")\n')

system_python = repository_rule(
    implementation = _system_python_impl,
    local = True,
)

"""Repository rule exposing Debian's Python 3 headers (python3-dev) as
@system_python//:headers, for pybind11 extension modules.

`pkg-config --cflags python3` names the include folders; each is linked into
the repository so that Bazel can pass it as an include path. pybind11's own
headers (pybind11-dev) are in /usr/include, a default include path.
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
    ctx.file("WORKSPACE", 'workspace(name = "system_python")\n')

system_python = repository_rule(
    implementation = _system_python_impl,
    local = True,
)

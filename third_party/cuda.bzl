"""Repository rule wrapping the local CUDA toolkit, for --config=cuda builds.

The toolkit is taken from $CUDA_PATH, default /usr/local/cuda; the rule
re-runs when CUDA_PATH changes. It never fails: without a toolkit it writes
targets that stop the build with an explanation when something uses them, so
the default (CPU) build, which uses none of them, works on any machine.

Targets:
  @cuda//:cuda  headers and link flags of the CUDA runtime and cuBLAS (shared
                libraries, found at run time through an rpath to the toolkit)
  @cuda//:nvcc  the toolkit's nvcc, for genrules
"""

_FOUND = """
package(default_visibility = ["//visibility:public"])

# CUDA runtime and cuBLAS of {path}.
cc_library(
    name = "cuda",
    hdrs = glob(["include/**"]),
    includes = ["include"],
    linkopts = [
        "-L{lib}",
        "-Wl,-rpath,{lib}",
        "-lcublas",
        "-lcudart",
    ],
)

exports_files(["nvcc"])
"""

_MISSING = """
load(":missing.bzl", "cuda_missing")

package(default_visibility = ["//visibility:public"])

cuda_missing(name = "cuda")

cuda_missing(name = "nvcc")
"""

_MISSING_BZL = """
def _impl(ctx):
    fail("{why}")

cuda_missing = rule(implementation = _impl)
"""

def _cuda_toolkit_impl(ctx):
    path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(path + "/bin/nvcc")
    lib = ctx.path(path + "/lib64")
    ctx.file("WORKSPACE", 'workspace(name = "cuda")\n')
    if not nvcc.exists or not lib.exists:
        why = ("--config=cuda needs the CUDA toolkit, and %s has no bin/nvcc or lib64: " +
               "install CUDA there or point CUDA_PATH at it (CUDA_PATH=/opt/cuda bazel build " +
               "--config=cuda ...)") % path
        ctx.file("missing.bzl", _MISSING_BZL.format(why = why))
        ctx.file("BUILD", _MISSING)
        return
    ctx.symlink(path + "/include", "include")
    ctx.file("nvcc", '#!/bin/sh\nexec "%s" "$@"\n' % nvcc, executable = True)
    ctx.file("BUILD", _FOUND.format(path = path, lib = lib))

cuda_toolkit = repository_rule(
    implementation = _cuda_toolkit_impl,
    environ = ["CUDA_PATH"],
    local = True,
)

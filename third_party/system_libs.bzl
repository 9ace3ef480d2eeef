"""Repository rule wrapping Debian's system libraries as cc_library targets.

Headers live in /usr/include (a default include path), so each target only
carries link flags. gRPC, protobuf and Abseil flags come from pkg-config at
fetch time; the rule re-runs when this file changes (`bazel sync` forces it).
"""

_ABSL_MODULES = [
    "absl_flags_parse",
    "absl_flags_usage",
    "absl_flags",
    "absl_status",
    "absl_statusor",
    "absl_synchronization",
    "absl_strings",
    "absl_str_format",
    "absl_time",
    "absl_random_random",
]

def _pkg_config_libs(ctx, modules):
    res = ctx.execute(["pkg-config", "--libs"] + modules)
    if res.return_code != 0:
        fail("pkg-config --libs %s failed: %s\nRun deploy/setup_debian.sh to install the build dependencies." %
             (" ".join(modules), res.stderr))
    return [f for f in res.stdout.strip().split(" ") if f]

def _system_libs_impl(ctx):
    grpc = _pkg_config_libs(ctx, ["grpc++", "protobuf"])
    absl = _pkg_config_libs(ctx, _ABSL_MODULES)
    prometheus = _pkg_config_libs(ctx, ["prometheus-cpp-core"])
    httplib = _pkg_config_libs(ctx, ["cpp-httplib", "openssl"])
    rocksdb = _pkg_config_libs(ctx, ["rocksdb"])
    build = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "absl", linkopts = {absl})
cc_library(name = "protobuf", linkopts = ["-lprotobuf"])
cc_library(name = "grpc", linkopts = {grpc}, deps = [":absl"])
cc_library(name = "gtest", linkopts = ["-lgtest", "-lpthread"])
cc_library(name = "gtest_main", linkopts = ["-lgtest_main", "-lgtest", "-lpthread"])
cc_library(name = "gmock", linkopts = ["-lgmock", "-lgtest", "-lpthread"])
cc_library(name = "openblas", linkopts = ["-lopenblas"])
cc_library(name = "zlib", linkopts = ["-lz"])
# The embedding tables' on-disk tier (server/tier/).
cc_library(name = "rocksdb", linkopts = {rocksdb})
# /metrics: prometheus-cpp's data model and text format (core only; the
# serving is cpp-httplib's, built by Debian with OpenSSL, zlib and brotli).
cc_library(name = "prometheus_cpp", linkopts = {prometheus})
cc_library(
    name = "httplib",
    defines = ["CPPHTTPLIB_OPENSSL_SUPPORT", "CPPHTTPLIB_ZLIB_SUPPORT", "CPPHTTPLIB_BROTLI_SUPPORT"],
    linkopts = {httplib},
)
""".format(absl = repr(absl), grpc = repr(grpc), prometheus = repr(prometheus), httplib = repr(httplib), rocksdb = repr(rocksdb))
    ctx.file("BUILD", build)
    ctx.file("WORKSPACE", 'workspace(name = "system_libs")\n')

system_libs = repository_rule(
    implementation = _system_libs_impl,
    local = True,
)

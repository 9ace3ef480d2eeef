"""etcd_api: C++ code for etcd's v3 gRPC API, from Debian's .proto files.

etcd (Debian's etcd-server 3.4) is the coordinator of elastic clusters
(coord/, docs/elastic.md). Its API is etcdserverpb/rpc.proto, shipped with
the Go sources in golang-etcd-server-dev, which imports gogo.proto
(golang-github-gogo-protobuf-dev) and google/api/annotations.proto
(golang-github-grpc-ecosystem-grpc-gateway-dev, a dependency of the first).
This rule links them into the repository at the import paths rpc.proto
uses; its BUILD generates their C++ code with the system protoc and
grpc_cpp_plugin, as proto/cc_grpc.bzl does for ours. Nothing is downloaded
or copied into the tree.
"""

_GOCODE = "/usr/share/gocode/src/"

# Import path -> the file of the Debian package that provides it.
_FILES = {
    "etcd/etcdserver/etcdserverpb/rpc.proto": "go.etcd.io/etcd/etcdserver/etcdserverpb/rpc.proto",
    "etcd/mvcc/mvccpb/kv.proto": "go.etcd.io/etcd/mvcc/mvccpb/kv.proto",
    "etcd/auth/authpb/auth.proto": "go.etcd.io/etcd/auth/authpb/auth.proto",
    "gogoproto/gogo.proto": "github.com/gogo/protobuf/gogoproto/gogo.proto",
    "google/api/annotations.proto": "github.com/grpc-ecosystem/grpc-gateway/third_party/googleapis/google/api/annotations.proto",
    "google/api/http.proto": "github.com/grpc-ecosystem/grpc-gateway/third_party/googleapis/google/api/http.proto",
}

_BUILD = """
package(default_visibility = ["//visibility:public"])

_PROTOS = {protos}

genrule(
    name = "gen",
    srcs = _PROTOS,
    outs = [p[:-len(".proto")] + ".pb.cc" for p in _PROTOS] +
           [p[:-len(".proto")] + ".pb.h" for p in _PROTOS] + [
        "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.cc",
        "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h",
    ],
    cmd = "protoc --proto_path=$$(dirname $(location etcd/mvcc/mvccpb/kv.proto))/../../.. " +
          "--cpp_out=$(GENDIR)/external/etcd_api " +
          "--grpc_out=$(GENDIR)/external/etcd_api " +
          "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) " +
          " ".join(_PROTOS),
)

# The generated headers are included as "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h".
cc_library(
    name = "etcd_api",
    srcs = [p[:-len(".proto")] + ".pb.cc" for p in _PROTOS] + [
        "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.cc",
    ],
    hdrs = [p[:-len(".proto")] + ".pb.h" for p in _PROTOS] + [
        "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h",
    ],
    includes = ["."],
    copts = ["-w"],
    deps = ["@system_libs//:grpc"],
)
"""

def _etcd_api_impl(ctx):
    for path, src in _FILES.items():
        f = ctx.path(_GOCODE + src)
        if not f.exists:
            fail("%s is missing: etcd's API needs Debian's golang-etcd-server-dev (deploy/setup_debian.sh installs it)" % f)
        ctx.symlink(f, path)
    ctx.file("BUILD", _BUILD.format(protos = repr(sorted(_FILES.keys()))))
    ctx.file("WORKSPACE", 'workspace(name = "etcd_api")\n')

etcd_api = repository_rule(
    implementation = _etcd_api_impl,
    local = True,
)

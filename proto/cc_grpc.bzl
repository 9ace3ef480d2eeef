"""cc_grpc_library: C++ protobuf (+ gRPC) code from one .proto, offline.

Runs the system protoc and grpc_cpp_plugin (Debian's protobuf-compiler and
protobuf-compiler-grpc) in a genrule instead of rules_proto, which would need
downloads. For proto/NAME.proto it generates NAME.pb.{h,cc} and, with
`grpc` (for files that define services), NAME.grpc.pb.{h,cc}, included as
"proto/NAME.pb.h" etc. `imports` are the .proto files NAME.proto imports
(protoc reads them), and `deps` their cc_grpc_library targets.
"""

def cc_grpc_library(name, src, imports = [], deps = [], grpc = True, **kwargs):
    base = src[:-len(".proto")]
    srcs = [base + ".pb.cc"]
    hdrs = [base + ".pb.h"]
    cmd = "protoc --proto_path=. --cpp_out=$(GENDIR) "
    if grpc:
        srcs.append(base + ".grpc.pb.cc")
        hdrs.append(base + ".grpc.pb.h")
        cmd += "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) "
    native.genrule(
        name = name + "_gen",
        srcs = [src] + imports,
        outs = srcs + hdrs,
        cmd = cmd + "$(location %s)" % src,
    )
    native.cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["@system_libs//:grpc"],
        **kwargs
    )

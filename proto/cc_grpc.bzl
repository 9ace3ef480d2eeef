"""cc_grpc_library: C++ protobuf + gRPC code from one .proto, offline.

Runs the system protoc and grpc_cpp_plugin (Debian's protobuf-compiler and
protobuf-compiler-grpc) in a genrule instead of rules_proto, which would need
downloads. For proto/NAME.proto it generates NAME.pb.{h,cc} and
NAME.grpc.pb.{h,cc}, included as "proto/NAME.pb.h" etc.
"""

def cc_grpc_library(name, src, deps = [], **kwargs):
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc", base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = outs,
        cmd = ("protoc --proto_path=. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) $(location %s)") % src,
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc", base + ".grpc.pb.cc"],
        hdrs = [base + ".pb.h", base + ".grpc.pb.h"],
        deps = deps + ["@system_libs//:grpc"],
        **kwargs
    )

// ps_server --reflection serves gRPC server reflection, so grpcurl-style
// tools can list its services without the .proto files. It is off by
// default; gRPC's reflection plugin, once on, is on for every server the
// process builds later, so the test of the default runs first.
//
// Debian ships the reflection server in libgrpc++_reflection (which also
// registers the reflection messages) but not the .proto or headers, so the
// test speaks the protocol through gRPC's generic stub with hand-encoded
// bytes: ServerReflectionRequest{list_services: ""} is field 7, length 0.
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "rpc/credentials.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

// Runs the completion queue until the operation tagged `tag` completes.
bool Await(grpc::CompletionQueue* cq, void* tag) {
  void* got = nullptr;
  bool ok = false;
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
  if (cq->AsyncNext(&got, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) return false;
  EXPECT_EQ(got, tag);
  return ok;
}

TEST(Reflection, OffByDefault) {
  TestCluster cluster(1, 1, Mode::kSync, 0.1f);
  grpc::GenericStub stub(
      grpc::CreateChannel(cluster.addresses()[0], ps::MakeChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  int tag = 0;
  call->StartCall(&tag);
  Await(&cq, &tag);
  call->WritesDone(&tag);  // the server answers an unknown method once the request is in
  Await(&cq, &tag);
  grpc::Status status;
  call->Finish(&status, &tag);
  ASSERT_TRUE(Await(&cq, &tag));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
}

TEST(Reflection, ListsParameterServerAndHealthServices) {
  ServerOptions options;
  options.reflection = true;
  absl::StatusOr<LocalServers> servers = LocalServers::Start(options, 1);
  ASSERT_TRUE(servers.ok()) << servers.status();
  grpc::GenericStub stub(
      grpc::CreateChannel(servers->addresses[0], ps::MakeChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  int tag = 0;
  call->StartCall(&tag);
  ASSERT_TRUE(Await(&cq, &tag));

  const std::string request("\x3a\x00", 2);
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, &tag);
  ASSERT_TRUE(Await(&cq, &tag));
  grpc::ByteBuffer in;
  call->Read(&in, &tag);
  ASSERT_TRUE(Await(&cq, &tag));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(in.Dump(&slices).ok());
  std::string response;
  for (const grpc::Slice& s : slices) response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_NE(response.find("ps.v1.ParameterServer"), std::string::npos) << response;
  EXPECT_NE(response.find("grpc.health.v1.Health"), std::string::npos) << response;

  call->WritesDone(&tag);
  ASSERT_TRUE(Await(&cq, &tag));
  grpc::Status status;
  call->Finish(&status, &tag);
  ASSERT_TRUE(Await(&cq, &tag));
  EXPECT_TRUE(status.ok()) << status.error_message();
  cq.Shutdown();
  void* ignored;
  bool ok;
  while (cq.Next(&ignored, &ok)) {
  }
}

}  // namespace
}  // namespace ps

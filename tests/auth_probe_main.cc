// auth_probe: makes one RPC to a parameter server with the given identity
// (TLS flags or token) and prints "CODE: message" (e.g. "OK: ",
// "PERMISSION_DENIED: worker-1 may not call Push as worker 0"), so that the
// security tests can check what a real ps_server refuses and how.
//
//   auth_probe --server=HOST:PORT --call=Push --worker_id=0
//              --tls_ca=ca.pem --tls_cert=worker-1.pem --tls_key=worker-1.key
//
// Calls: Register, InitParams (spec only; waits 1 ms for worker 0), CreateParams
// (InitParams with values, a one-element model "w"), Push, Pull, PushPull,
// Heartbeat, GetStatus, Checkpoint, Stream (one pull call), Health.
// Exits 0 iff the call succeeded. The TLS flags are the real clients'
// (common/client_security_flags.h).
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "common/client_security_flags.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"

ABSL_FLAG(std::string, server, "", "HOST:PORT of the server.");
ABSL_FLAG(std::string, call, "GetStatus", "The RPC to make (see the file comment).");
ABSL_FLAG(int, worker_id, 0, "The worker id the request names.");
ABSL_FLAG(int, num_workers, 2, "The worker count Register names.");
ABSL_FLAG(double, timeout, 10, "Seconds the call may take.");

namespace {

using namespace ps::v1;  // NOLINT: a test tool of one function

void Model(ModelSpec* spec) {
  TensorSpec* t = spec->add_tensors();
  t->set_name("w");
  t->add_shape(1);
}

grpc::Status Call(const std::string& call, int worker, grpc::Channel* channel,
                  grpc::ClientContext* ctx) {
  auto stub = ParameterServer::NewStub(std::shared_ptr<grpc::Channel>(channel, [](auto*) {}));
  if (call == "Register") {
    RegisterRequest req;
    req.set_worker_id(worker);
    req.set_num_workers(absl::GetFlag(FLAGS_num_workers));
    RegisterResponse resp;
    return stub->Register(ctx, req, &resp);
  }
  if (call == "InitParams" || call == "CreateParams") {
    InitRequest req;
    req.set_worker_id(worker);
    Model(req.mutable_spec());
    req.set_wait_timeout_ms(1);
    if (call == "CreateParams") {
      TensorSlice* v = req.add_values();
      v->set_name("w");
      v->add_shape(1);
      v->set_length(1);
      const float value = 0.5f;
      v->set_data(std::string(reinterpret_cast<const char*>(&value), sizeof value));
    }
    InitResponse resp;
    return stub->InitParams(ctx, req, &resp);
  }
  if (call == "Push") {
    PushRequest req;
    req.set_worker_id(worker);
    PushResponse resp;
    return stub->Push(ctx, req, &resp);
  }
  if (call == "Pull") {
    PullRequest req;
    req.set_worker_id(worker);
    PullResponse resp;
    return stub->Pull(ctx, req, &resp);
  }
  if (call == "PushPull") {
    PushPullRequest req;
    req.mutable_push()->set_worker_id(worker);
    PullResponse resp;
    return stub->PushPull(ctx, req, &resp);
  }
  if (call == "Heartbeat") {
    HeartbeatRequest req;
    req.set_worker_id(worker);
    HeartbeatResponse resp;
    return stub->Heartbeat(ctx, req, &resp);
  }
  if (call == "GetStatus") {
    StatusResponse resp;
    return stub->GetStatus(ctx, StatusRequest(), &resp);
  }
  if (call == "Checkpoint") {
    CheckpointResponse resp;
    return stub->Checkpoint(ctx, CheckpointRequest(), &resp);
  }
  if (call == "Stream") {
    auto stream = stub->Stream(ctx);
    StreamRequest req;
    req.set_call_id(1);
    req.set_kind(CALL_PULL);
    req.set_worker_id(worker);
    req.set_last(true);
    stream->Write(req);
    stream->WritesDone();
    StreamResponse resp;
    while (stream->Read(&resp)) {
      if (resp.error_code() != 0) {
        return grpc::Status(static_cast<grpc::StatusCode>(resp.error_code()),
                            resp.error_message());
      }
    }
    return stream->Finish();
  }
  if (call == "Health") {
    auto health = grpc::health::v1::Health::NewStub(
        std::shared_ptr<grpc::Channel>(channel, [](auto*) {}));
    grpc::health::v1::HealthCheckResponse resp;
    return health->Check(ctx, grpc::health::v1::HealthCheckRequest(), &resp);
  }
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("unknown --call=", call));
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  ps::SecurityOptions security = ps::ClientSecurityFromFlags();
  // Whatever --insecure says: the tests try plaintext against TLS servers on purpose.
  security.insecure = true;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      ps::MakeChannel(absl::GetFlag(FLAGS_server), absl::ZeroDuration(), security);
  if (!channel.ok()) {
    std::cout << absl::StatusCodeToString(channel.status().code()) << ": "
              << channel.status().message() << std::endl;
    return 2;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout))));
  grpc::Status s = Call(absl::GetFlag(FLAGS_call), absl::GetFlag(FLAGS_worker_id),
                        channel->get(), &ctx);
  std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())) << ": "
            << s.error_message() << std::endl;
  return s.ok() ? 0 : 1;
}

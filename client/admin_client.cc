#include "client/admin_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/channel.h"
#include "proto/ps.grpc.pb.h"

namespace ps {
namespace {

// Calls `method` on each server in turn, with `timeout` each.
template <typename Resp, typename Req, typename Method>
absl::StatusOr<std::vector<Resp>> AskEach(const std::vector<std::string>& servers,
                                          absl::Duration timeout,
                                          const SecurityOptions& security, Method method) {
  std::vector<Resp> out(servers.size());
  for (size_t s = 0; s < servers.size(); ++s) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(servers[s], absl::ZeroDuration(), security);
    if (!channel.ok()) return channel.status();
    auto stub = v1::ParameterServer::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::Status st = ((*stub).*method)(&ctx, Req(), &out[s]);
    if (!st.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                          absl::StrCat(servers[s], ": ", st.error_message()));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<v1::StatusResponse>> QueryStatus(
    const std::vector<std::string>& servers, absl::Duration timeout,
    const SecurityOptions& security) {
  return AskEach<v1::StatusResponse, v1::StatusRequest>(
      servers, timeout, security, &v1::ParameterServer::Stub::GetStatus);
}

absl::StatusOr<std::vector<v1::CheckpointResponse>> RequestCheckpoints(
    const std::vector<std::string>& servers, absl::Duration timeout,
    const SecurityOptions& security) {
  return AskEach<v1::CheckpointResponse, v1::CheckpointRequest>(
      servers, timeout, security, &v1::ParameterServer::Stub::Checkpoint);
}

struct StatusPoller::Shard {
  std::string server;
  std::unique_ptr<v1::ParameterServer::Stub> stub;
};

namespace {

// One GetStatus in flight, owned by Poll, which outlives its callback: the
// context is never destroyed on gRPC's callback thread.
struct PollCall {
  grpc::ClientContext ctx;
  v1::StatusRequest req;
  v1::StatusResponse resp;
  grpc::Status status;
  absl::Notification done;
};

}  // namespace

StatusPoller::StatusPoller(std::vector<std::unique_ptr<Shard>> shards)
    : shards_(std::move(shards)) {}

StatusPoller::~StatusPoller() = default;

absl::StatusOr<std::unique_ptr<StatusPoller>> StatusPoller::Create(
    const std::vector<std::string>& servers, const SecurityOptions& security) {
  std::vector<std::unique_ptr<Shard>> shards;
  for (const std::string& s : servers) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(s, absl::ZeroDuration(), security);
    if (!channel.ok()) return channel.status();
    auto shard = std::make_unique<Shard>();
    shard->server = s;
    shard->stub = v1::ParameterServer::NewStub(*channel);
    shards.push_back(std::move(shard));
  }
  return std::unique_ptr<StatusPoller>(new StatusPoller(std::move(shards)));
}

std::vector<absl::StatusOr<v1::StatusResponse>> StatusPoller::Poll(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::unique_ptr<PollCall>> calls;
  for (const std::unique_ptr<Shard>& shard : shards_) {
    auto call = std::make_unique<PollCall>();
    call->ctx.set_deadline(absl::ToChronoTime(deadline));
    PollCall* c = call.get();
    shard->stub->async()->GetStatus(&c->ctx, &c->req, &c->resp, [c](grpc::Status st) {
      c->status = std::move(st);
      c->done.Notify();
    });
    calls.push_back(std::move(call));
  }
  std::vector<absl::StatusOr<v1::StatusResponse>> out;
  for (size_t s = 0; s < calls.size(); ++s) {
    PollCall& call = *calls[s];
    // gRPC ends the call at its deadline; the second is slack for that.
    if (!call.done.WaitForNotificationWithDeadline(deadline + absl::Seconds(1))) {
      call.ctx.TryCancel();
      // A cancelled call's callback runs promptly; should it not, leak the
      // call rather than free what gRPC may still write.
      if (!call.done.WaitForNotificationWithTimeout(absl::Seconds(5))) calls[s].release();
      out.push_back(absl::DeadlineExceededError(
          absl::StrCat(shards_[s]->server, ": no answer within ", absl::FormatDuration(timeout))));
      continue;
    }
    if (call.status.ok()) {
      out.push_back(std::move(call.resp));
    } else {
      out.push_back(absl::Status(static_cast<absl::StatusCode>(call.status.error_code()),
                                 absl::StrCat(shards_[s]->server, ": ", call.status.error_message())));
    }
  }
  return out;
}

}  // namespace ps

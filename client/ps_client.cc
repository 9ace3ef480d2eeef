#include "client/ps_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "client/internal/pending_calls.h"
#include "client/internal/ps_client_rep.h"
#include "client/internal/registration.h"
#include "client/internal/shard_transport.h"
#include "client/internal/stream_transport.h"
#include "client/internal/tensor_checks.h"
#include "client/internal/unary_transport.h"
#include "common/partition.h"
#include "common/status_macros.h"
#include "rpc/route.h"

namespace ps {
namespace {

// The transport factory: the one place that knows the implementations.
std::unique_ptr<ShardTransport> NewTransport(
    ClientOptions::Transport kind, const std::vector<std::shared_ptr<grpc::Channel>>& channels,
    ClientState* state) {
  switch (kind) {
    case ClientOptions::Transport::kUnary:
      return std::make_unique<UnaryTransport>(channels, state);
    case ClientOptions::Transport::kStream:
      break;
  }
  return std::make_unique<StreamTransport>(channels, state);
}

}  // namespace

PsClient::PsClient(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

PsClient::~PsClient() = default;

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const ClientOptions& options) {
  RETURN_IF_ERROR(ValidateClientOptions(options));
  auto rep = std::make_unique<Rep>();
  rep->state.options = options;
  rep->state.canceller.SetInterrupt(options.interrupt, options.interrupt_every);
  const int S = static_cast<int>(options.servers.size());
  rep->state.shard_version.assign(S, 0);
  rep->map_version->store(options.shard_map_version);
  RETURN_IF_ERROR(rep->Open());

  rep->state.reply.assign(S, ReplyInfo());
  rep->state.held.assign(S, {});
  rep->state.held_version.assign(S, 0);
  std::vector<v1::RegisterResponse> replies;
  absl::Status st =
      rep->control->RegisterAll(options.connect_timeout, /*wait_for_ready=*/true, &replies);
  if (st.code() == absl::StatusCode::kDeadlineExceeded) {
    // Say why: one more try that fails with the connection's last error.
    absl::Status why = rep->control->RegisterAll(absl::Seconds(2), /*wait_for_ready=*/false,
                                                 &replies);
    st = why.ok() ? why : ConnectTimeoutError(options.connect_timeout, why);
  }
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("cannot register with the servers: ",
                                                st.message()));
  }
  ASSIGN_OR_RETURN(Registration registration, ReadRegistration(options.servers, replies));
  rep->state.mode = registration.mode;
  rep->learning_rate = registration.learning_rate;
  rep->incarnation = std::move(registration.incarnations);
  // A restarted async worker numbers its pushes after those accepted.
  rep->state.seq = registration.last_seq;
  rep->state.row_seq = registration.last_row_seq;
  if (registration.lease > absl::ZeroDuration()) {
    rep->heartbeat_period = HeartbeatPeriod(registration.lease);
    rep->StartHeartbeats();
  }
  return std::unique_ptr<PsClient>(new PsClient(std::move(rep)));
}

absl::Status PsClient::Rep::Open() {
  const ClientOptions& o = state.options;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  const int num_shards = static_cast<int>(o.servers.size());
  for (int s = 0; s < num_shards; ++s) {
    ClientInterceptors stamps;
    stamps.push_back(RouteStamps(s, num_shards, map_version));
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                     MakeChannel(o.servers[s], o.keepalive, o.security, std::move(stamps)));
    channels.push_back(std::move(channel));
  }
  heartbeater.reset();  // it uses `control`
  if (rows_beside != nullptr) retired_rows.push_back(std::move(rows_beside));
  rows_beside = std::make_unique<ShardRows>(channels, &state);
  transport = NewTransport(o.transport, channels, &state);
  control = std::make_unique<ShardControl>(channels, &state);
  StartHeartbeats();
  return absl::OkStatus();
}

void PsClient::Rep::StartHeartbeats() {
  heartbeater.reset();
  if (heartbeat_period <= absl::ZeroDuration()) return;
  ShardControl* c = control.get();
  const absl::Duration period = heartbeat_period;
  heartbeater = std::make_unique<Heartbeater>(period, [c, period] { c->HeartbeatAll(period); });
}

Mode PsClient::mode() const { return rep_->state.mode; }
int PsClient::num_shards() const { return rep_->state.num_shards(); }
float PsClient::server_learning_rate() const { return rep_->learning_rate; }
const ModelSpec& PsClient::spec() const { return rep_->state.spec; }

int64_t PsClient::version() const {
  const std::vector<int64_t>& v = rep_->state.shard_version;
  return *std::min_element(v.begin(), v.end());
}

std::vector<PushOutcome> PsClient::LastPushOutcomes() const {
  std::vector<PushOutcome> out;
  for (const ReplyInfo& r : rep_->state.reply) out.push_back(r.outcome);
  return out;
}

void PsClient::Cancel() { rep_->state.canceller.Cancel(); }

int64_t PsClient::retries() const { return rep_->retries; }
int64_t PsClient::recoveries() const { return rep_->recoveries; }

void PsClient::Log(const std::string& line) const {
  if (rep_->state.options.log) rep_->state.options.log(line);
}

absl::Status PsClient::Init(const ModelSpec& spec, const TensorList* initial) {
  if (initial == nullptr) return InitFrom(spec, nullptr);
  const ConstTensorViews views = ConstViewsOf(*initial);
  return InitFrom(spec, &views);
}

absl::Status PsClient::Init(const ModelSpec& spec, const ConstTensorViews& initial) {
  return InitFrom(spec, &initial);
}

absl::Status PsClient::InitFrom(const ModelSpec& spec, const ConstTensorViews* initial) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  rep_->StartOp();
  ClientState& state = rep_->state;
  state.spec = spec;
  state.layouts.clear();
  for (int s = 0; s < num_shards(); ++s) {
    state.layouts.push_back(MakeSliceLayout(state.spec, num_shards(), s));
  }
  absl::Status status = initial != nullptr ? CheckTensors(state.spec, *initial) : absl::OkStatus();
  std::vector<int64_t> versions(num_shards(), 0);
  if (status.ok()) status = rep_->control->InitAll(initial, &versions);
  if (status.ok() && state.mode == Mode::kSync) RollBackToCommonVersion(versions);
  status = rep_->Outcome("init", std::move(status));
  if (!status.ok()) {
    // Not initialized: later calls must fail with "Init must be called first".
    state.spec.clear();
    state.layouts.clear();
  }
  return status;
}

std::unique_ptr<PendingOp> PsClient::PullAsync(int64_t min_version, TensorList* weights) {
  return Retried("pull", [this, min_version, weights]() -> std::unique_ptr<PendingOp> {
    if (rep_->state.spec.empty()) {
      return PendingCalls::Failed(absl::FailedPreconditionError("Init must be called first"));
    }
    ResizeToSpec(rep_->state.spec, weights);
    return rep_->transport->Pull(min_version, ViewsOf(weights));
  });
}

std::unique_ptr<PendingOp> PsClient::PullAsync(int64_t min_version, const TensorViews& weights) {
  return Retried("pull", [this, min_version, weights]() -> std::unique_ptr<PendingOp> {
    if (absl::Status s = CheckTensors(rep_->state.spec, weights); !s.ok()) {
      return PendingCalls::Failed(s);
    }
    return rep_->transport->Pull(min_version, weights);
  });
}

absl::Status PsClient::Pull(int64_t min_version, TensorList* weights) {
  return PullAsync(min_version, weights)->Wait();
}

absl::Status PsClient::Pull(int64_t min_version, const TensorViews& weights) {
  return PullAsync(min_version, weights)->Wait();
}

absl::Status PsClient::Push(const TensorList& grads) { return Push(ConstViewsOf(grads)); }

absl::Status PsClient::Push(const ConstTensorViews& grads) {
  RETURN_IF_ERROR(CheckTensors(rep_->state.spec, grads));
  return Retried("push", [this, &grads] { return rep_->transport->Push(grads); })->Wait();
}

std::unique_ptr<PendingOp> PsClient::PushPullAsync(const TensorList& grads,
                                                   TensorList* weights) {
  return Retried("push-pull", [this, &grads, weights]() -> std::unique_ptr<PendingOp> {
    if (absl::Status s = CheckTensors(rep_->state.spec, grads); !s.ok()) {
      return PendingCalls::Failed(s);
    }
    ResizeToSpec(rep_->state.spec, weights);
    return rep_->transport->PushPull(ConstViewsOf(grads), ViewsOf(weights));
  });
}

std::unique_ptr<PendingOp> PsClient::PushPullAsync(const ConstTensorViews& grads,
                                                   const TensorViews& weights) {
  return Retried("push-pull", [this, grads, weights]() -> std::unique_ptr<PendingOp> {
    absl::Status s = CheckTensors(rep_->state.spec, grads);
    if (s.ok()) s = CheckTensors(rep_->state.spec, weights);
    if (!s.ok()) return PendingCalls::Failed(s);
    return rep_->transport->PushPull(grads, weights);
  });
}

absl::Status PsClient::PushPull(const TensorList& grads, TensorList* weights) {
  return PushPullAsync(grads, weights)->Wait();
}

absl::Status PsClient::PushPull(const ConstTensorViews& grads, const TensorViews& weights) {
  return PushPullAsync(grads, weights)->Wait();
}

std::unique_ptr<PushPullInProgress> PsClient::StartPushPull(const TensorList* grads,
                                                           TensorList* weights) {
  if (!rep_->state.spec.empty()) ResizeToSpec(rep_->state.spec, weights);
  return BeginPushPull(grads, ViewsOf(weights));
}

std::unique_ptr<PushPullInProgress> PsClient::StartPushPull(const TensorViews& weights) {
  return BeginPushPull(nullptr, weights);
}

std::unique_ptr<PushPullInProgress> PsClient::BeginPushPull(const TensorList* grads,
                                                           const TensorViews& weights) {
  std::unique_ptr<PushPullInProgress> p(new PushPullInProgress(&rep_->state.spec, grads));
  p->error_ = CheckTensors(rep_->state.spec, weights);
  if (!p->error_.ok()) return p;
  rep_->StartOp();
  p->calls_ = rep_->transport->StartPushPull(&p->grads_, weights);
  p->retry_ = [this, weights](absl::Status status, const ConstTensorViews& all) {
    return Retry("push-pull", std::move(status),
                 [&] { return rep_->transport->PushPull(all, weights)->Wait(); });
  };
  return p;
}

}  // namespace ps

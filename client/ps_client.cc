#include "client/ps_client.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/channel.h"
#include "client/internal/pending_calls.h"
#include "client/internal/recovery.h"
#include "client/internal/registration.h"
#include "client/internal/ps_client_rep.h"
#include "client/internal/shard_transport.h"
#include "client/internal/stream_transport.h"
#include "client/internal/tensor_checks.h"
#include "client/internal/unary_transport.h"
#include "common/partition.h"
#include "common/status_macros.h"

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

// The PendingOp of an operation that is retried (PsClient::Retry) when its
// first try fails: Wait() waits for the first try, then runs `retry` on its
// status. Destroying it before Wait() cancels the first try.
class RetryingOp final : public PendingOp {
 public:
  using Retry = std::function<absl::Status(absl::Status)>;
  RetryingOp(std::unique_ptr<PendingOp> first, Retry retry)
      : first_(std::move(first)), retry_(std::move(retry)) {}

  absl::Status Wait() override {
    absl::Status status = first_->Wait();
    first_.reset();
    return retry_(std::move(status));
  }

 private:
  std::unique_ptr<PendingOp> first_;
  const Retry retry_;
};

}  // namespace

PsClient::PsClient(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

PsClient::~PsClient() = default;

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const ClientOptions& options) {
  RETURN_IF_ERROR(ValidateClientOptions(options));
  auto rep = std::make_unique<Rep>();
  rep->state.options = options;
  const int S = static_cast<int>(options.servers.size());
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& addr : options.servers) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(addr, options.keepalive, options.security);
    if (!channel.ok()) return channel.status();
    channels.push_back(*std::move(channel));
  }
  rep->state.shard_version.assign(S, 0);
  rep->control = std::make_unique<ShardControl>(channels, &rep->state);
  rep->transport = NewTransport(options.transport, channels, &rep->state);

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
    const absl::Duration period = HeartbeatPeriod(registration.lease);
    ShardControl* control = rep->control.get();
    rep->heartbeater =
        std::make_unique<Heartbeater>(period, [control, period] { control->HeartbeatAll(period); });
  }
  return std::unique_ptr<PsClient>(new PsClient(std::move(rep)));
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

int64_t PsClient::retries() const { return rep_->retries; }
int64_t PsClient::recoveries() const { return rep_->recoveries; }

void PsClient::Log(const std::string& line) const {
  if (rep_->state.options.log) rep_->state.options.log(line);
}

absl::Status PsClient::Retry(const char* what, absl::Status status,
                             const std::function<absl::Status()>& attempt) {
  const ClientOptions& o = rep_->state.options;
  if (status.ok() || o.retry_timeout <= absl::ZeroDuration() || !MayRetry(status.code())) {
    return status;
  }
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o.retry_timeout;
  for (int tries = 1;; ++tries) {
    if (tries == 1 || tries % 10 == 0) {
      Log(absl::StrFormat("worker %d: %s failed (a shard unavailable or restarted?), try %d, "
                          "retrying for up to %.1fs more: %s",
                          o.worker_id, what, tries,
                          absl::ToDoubleSeconds(deadline - absl::Now()), status.ToString()));
    }
    bool restarted = false;
    absl::Status recovered = Recover(deadline, &restarted);
    if (!recovered.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(status.message(), "; gave up after retrying for ",
                                       absl::StrFormat("%.1fs", absl::ToDoubleSeconds(
                                                                    absl::Now() - start)),
                                       " (--retry_timeout): ", recovered.message()));
    }
    if (!RetryAfterRecovery(status.code(), restarted)) return status;
    rep_->state.shard_version = rep_->op_versions;
    rep_->state.seq = rep_->op_seq;
    ++rep_->retries;
    status = attempt();
    if (status.ok()) {
      ++rep_->recoveries;
      Log(absl::StrFormat("worker %d: %s went through after %.1fs (%d retries)", o.worker_id,
                          what, absl::ToDoubleSeconds(absl::Now() - start), tries));
      return status;
    }
    if (!MayRetry(status.code()) || absl::Now() >= deadline) return status;
  }
}

absl::Status PsClient::Recover(absl::Time deadline, bool* restarted) {
  const ClientState& state = rep_->state;
  const ClientOptions& o = state.options;
  absl::Duration backoff = kFirstBackoff;
  while (true) {
    std::vector<v1::RegisterResponse> replies;
    absl::Status st = rep_->control->RegisterAll(RegisterTimeout(deadline, absl::Now()),
                                                 /*wait_for_ready=*/true, &replies);
    std::vector<ShardRegistration> registered;
    std::vector<ShardRecovery> plan;
    if (st.ok()) {
      registered = ToShardRegistrations(replies);
      std::vector<KnownShard> known;
      for (int s = 0; s < num_shards(); ++s) {
        known.push_back({rep_->incarnation[s], !state.spec.empty() && !state.held[s].empty(),
                         state.held_version[s]});
      }
      plan = PlanRecovery(registered, known);
    }
    for (int s = 0; st.ok() && s < num_shards(); ++s) {
      const ShardRegistration& r = registered[s];
      if (plan[s].restarted) {
        *restarted = true;
        Log(absl::StrFormat("worker %d: shard %d (%s) restarted: now %s (was %s), %s; this "
                            "worker holds version %d",
                            o.worker_id, s, o.servers[s], IncarnationName(r.incarnation),
                            IncarnationName(rep_->incarnation[s]),
                            r.initialized ? absl::StrCat("at version ", r.version)
                                          : std::string("without parameters"),
                            state.held_version[s]));
        rep_->incarnation[s] = r.incarnation;
      }
      if (!plan[s].restore) continue;
      absl::StatusOr<v1::InitResponse> resp = rep_->control->Restore(s);
      st = resp.status();
      if (!st.ok()) continue;
      Log(absl::StrFormat("worker %d: shard %d was at version %d; %s", o.worker_id, s, r.version,
                          resp->created()
                              ? absl::StrCat("restored it to version ", state.held_version[s],
                                             " from this worker's copy")
                              : absl::StrCat("another worker brought it to version ",
                                             resp->version(), " first")));
    }
    if (st.ok()) return st;
    if (absl::Now() + backoff >= deadline) return st;
    absl::SleepFor(backoff);
    backoff = NextBackoff(backoff);
  }
}

void PsClient::RollBackToCommonVersion(std::vector<int64_t> versions) {
  const ClientOptions& o = rep_->state.options;
  CommonVersionRollback rollback(std::move(versions));
  while (std::optional<CommonVersionRollback::Round> round = rollback.Next()) {
    for (int s : round->shards) {
      absl::StatusOr<v1::InitResponse> resp = rep_->control->RollBack(s, round->target);
      if (!resp.ok()) continue;  // refused: nothing to do
      if (resp->created()) {
        Log(absl::StrFormat("worker %d: the shards restarted at versions [%s]; rolled shard %d "
                            "back to its checkpoint of version %d, the newest they share",
                            o.worker_id, absl::StrJoin(rollback.versions(), ", "), s,
                            resp->version()));
      }
      rollback.Answered(s, resp->created(), resp->version());
    }
  }
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
  if (!status.ok()) {
    // Not initialized: later calls must fail with "Init must be called first".
    state.spec.clear();
    state.layouts.clear();
  }
  return status;
}

std::unique_ptr<PendingOp> PsClient::Retried(
    const char* what, std::function<std::unique_ptr<PendingOp>()> start) {
  rep_->StartOp();
  std::unique_ptr<PendingOp> first = start();
  return std::make_unique<RetryingOp>(
      std::move(first), [this, what, start = std::move(start)](absl::Status status) {
        return Retry(what, std::move(status), [&start] { return start()->Wait(); });
      });
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

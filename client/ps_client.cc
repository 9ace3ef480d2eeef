#include "client/ps_client.h"

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/channel.h"
#include "client/internal/pending_calls.h"
#include "client/internal/shard_transport.h"
#include "client/internal/stream_transport.h"
#include "client/internal/unary_transport.h"
#include "common/partition.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/wire.h"

namespace ps {

namespace {

// A failure that a retry may cure: the shard went away or restarted.
bool MayRetry(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kAborted || code == absl::StatusCode::kFailedPrecondition;
}

// Sends Heartbeats to every shard every `period` until stopped.
class Heartbeats {
 public:
  Heartbeats(const ClientOptions* options,
             const std::vector<std::unique_ptr<v1::ParameterServer::Stub>>* stubs,
             absl::Duration period)
      : options_(options), stubs_(stubs), period_(period), thread_([this] { Loop(); }) {}
  ~Heartbeats() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

 private:
  void Loop() {
    absl::MutexLock l(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period_)) {
      mu_.Unlock();
      // Errors are not ours to handle: the training calls see them too.
      StartUnaryCalls<v1::HeartbeatRequest, v1::HeartbeatResponse>(
          options_->servers, period_, /*wait_for_ready=*/false,
          [this](int, v1::HeartbeatRequest* req) { req->set_worker_id(options_->worker_id); },
          [this](int s, auto... args) { (*stubs_)[s]->async()->Heartbeat(args...); }, nullptr)
          ->Wait()
          .IgnoreError();
      mu_.Lock();
    }
  }

  const ClientOptions* const options_;
  const std::vector<std::unique_ptr<v1::ParameterServer::Stub>>* const stubs_;
  const absl::Duration period_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is set
};

}  // namespace

struct PsClient::Rep {
  ClientState state;
  float learning_rate = 0;
  // By shard, on the same channels as the transport's: Register, InitParams
  // and Heartbeat, which do not carry tensors on the hot path.
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs;
  // By shard: the incarnation seen at the last Register.
  std::vector<Incarnation> incarnation;
  // What the operation in progress started from: a retry pushes the same
  // gradient for the same versions, with the same async seq, even where a
  // shard already answered the failed try (it then answers "duplicate").
  std::vector<int64_t> op_versions;
  int64_t op_seq = 0;
  void StartOp() {
    op_versions = state.shard_version;
    op_seq = state.seq;
  }
  // Borrows `state`; declared after it so that it goes first.
  std::unique_ptr<ShardTransport> transport;
  // Null without leases; declared last so that it stops first.
  std::unique_ptr<Heartbeats> heartbeats;

  // Register with every shard, waiting for each up to `timeout`.
  // `wait_for_ready`: wait for servers that are not up yet (their
  // connection errors, e.g. a failed TLS handshake, then show only as
  // DEADLINE_EXCEEDED).
  absl::Status RegisterAll(absl::Duration timeout, bool wait_for_ready,
                           std::vector<v1::RegisterResponse>* replies) {
    const ClientOptions& options = state.options;
    replies->assign(options.servers.size(), {});
    return StartUnaryCalls<v1::RegisterRequest, v1::RegisterResponse>(
               options.servers, timeout, wait_for_ready,
               [&options](int, v1::RegisterRequest* req) {
                 req->set_worker_id(options.worker_id);
                 req->set_num_workers(options.num_workers);
               },
               [this](int s, auto... args) { stubs[s]->async()->Register(args...); },
               [replies](int s, const v1::RegisterResponse& r) {
                 (*replies)[s] = r;
                 return absl::OkStatus();
               })
        ->Wait();
  }
};

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
  if (options.servers.empty()) return absl::InvalidArgumentError("no servers given");
  if (options.num_workers < 1 || options.worker_id < 0 ||
      options.worker_id >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id must be in [0, num_workers=",
                                                   options.num_workers, "), got ",
                                                   options.worker_id));
  }
  auto rep = std::make_unique<Rep>();
  rep->state.options = options;
  const int S = static_cast<int>(options.servers.size());
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& addr : options.servers) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(addr, options.keepalive, options.security);
    if (!channel.ok()) return channel.status();
    channels.push_back(*std::move(channel));
    rep->stubs.push_back(v1::ParameterServer::NewStub(channels.back()));
  }
  rep->state.shard_version.assign(S, 0);
  rep->transport = NewTransport(options.transport, channels, &rep->state);

  rep->state.reply.assign(S, ReplyInfo());
  rep->state.held.assign(S, {});
  rep->state.held_version.assign(S, 0);
  std::vector<v1::RegisterResponse> replies;
  absl::Status st = rep->RegisterAll(options.connect_timeout, /*wait_for_ready=*/true, &replies);
  if (st.code() == absl::StatusCode::kDeadlineExceeded) {
    // Say why: one more try that fails with the connection's last error.
    absl::Status why = rep->RegisterAll(absl::Seconds(2), /*wait_for_ready=*/false, &replies);
    st = why.ok() ? why
                  : absl::DeadlineExceededError(absl::StrCat(
                        "no answer within --connect_timeout=",
                        absl::FormatDuration(options.connect_timeout), "; then ", why.message(),
                        absl::StrContains(why.message(), "Socket closed")
                            ? " (the server closed the connection while it was set up: do "
                              "this worker's TLS flags match the server's, and does its "
                              "--tls_ca trust this worker's --tls_cert?)"
                            : ""));
  }
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("cannot register with the servers: ",
                                                st.message()));
  }
  for (int s = 0; s < S; ++s) {
    const v1::RegisterResponse& r = replies[s];
    if (r.num_shards() != S || r.shard_id() != s) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--servers lists ", S, " servers, but ", options.servers[s], " (position ", s,
          ") is shard ", r.shard_id(), " of ", r.num_shards(),
          "; list every shard once, in shard order"));
    }
    if (r.mode() != replies[0].mode()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "servers disagree on the mode: ", options.servers[0], " runs ",
          v1::Mode_Name(replies[0].mode()), ", ", options.servers[s], " runs ",
          v1::Mode_Name(r.mode())));
    }
  }
  absl::StatusOr<Mode> mode = ModeFromProto(replies[0].mode());
  if (!mode.ok()) {
    return absl::Status(mode.status().code(),
                        absl::StrCat(options.servers[0], " reports ", mode.status().message()));
  }
  rep->state.mode = *mode;
  rep->learning_rate = replies[0].learning_rate();
  int64_t lease_ms = 0;
  for (const v1::RegisterResponse& r : replies) {
    rep->incarnation.push_back(IncarnationFromProto(r.incarnation()));
    // A restarted async worker numbers its pushes after those accepted.
    rep->state.seq = std::max(rep->state.seq, r.last_seq());
    if (r.worker_timeout_ms() > 0) {
      lease_ms = lease_ms == 0 ? r.worker_timeout_ms() : std::min(lease_ms, r.worker_timeout_ms());
    }
  }
  if (lease_ms > 0) {
    // Three heartbeats per lease: one lost or late one costs nothing.
    rep->heartbeats = std::make_unique<Heartbeats>(
        &rep->state.options, &rep->stubs,
        std::max(absl::Milliseconds(lease_ms) / 3, absl::Milliseconds(100)));
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
    // A refusal from a shard that did not restart is the caller's error.
    if (status.code() == absl::StatusCode::kFailedPrecondition && !restarted) return status;
    rep_->state.shard_version = rep_->op_versions;
    rep_->state.seq = rep_->op_seq;
    status = attempt();
    if (status.ok()) {
      Log(absl::StrFormat("worker %d: %s went through after %.1fs (%d retries)", o.worker_id,
                          what, absl::ToDoubleSeconds(absl::Now() - start), tries));
      return status;
    }
    if (!MayRetry(status.code()) || absl::Now() >= deadline) return status;
  }
}

absl::Status PsClient::Recover(absl::Time deadline, bool* restarted) {
  ClientState& state = rep_->state;
  const ClientOptions& o = state.options;
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    std::vector<v1::RegisterResponse> replies;
    absl::Status st = rep_->RegisterAll(
        std::min(absl::Seconds(5), std::max(deadline - absl::Now(), absl::Milliseconds(1))),
        /*wait_for_ready=*/true, &replies);
    for (int s = 0; st.ok() && s < num_shards(); ++s) {
      const v1::RegisterResponse& r = replies[s];
      const Incarnation inc = IncarnationFromProto(r.incarnation());
      if (inc != rep_->incarnation[s]) {
        *restarted = true;
        Log(absl::StrFormat("worker %d: shard %d (%s) restarted: now %s (was %s), %s; this "
                            "worker holds version %d",
                            o.worker_id, s, o.servers[s], IncarnationName(inc),
                            IncarnationName(rep_->incarnation[s]),
                            r.initialized() ? absl::StrCat("at version ", r.version())
                                            : std::string("without parameters"),
                            state.held_version[s]));
        rep_->incarnation[s] = inc;
      }
      // Behind what this worker holds: put this worker's copy back.
      const bool behind = !r.initialized() || r.version() < state.held_version[s];
      if (!behind || state.spec.empty() || state.held[s].empty()) continue;
      v1::InitRequest req;
      req.set_worker_id(o.worker_id);
      ModelSpecToProto(state.spec, req.mutable_spec());
      for (const SliceRange& range : state.layouts[s]->slices) {
        SliceToProto(state.spec[range.tensor_index], range,
                     absl::MakeConstSpan(state.held[s]).subspan(range.flat_offset, range.length),
                     req.add_values());
      }
      req.set_restore(true);
      req.set_version(state.held_version[s]);
      v1::InitResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + o.rpc_timeout));
      st = FromGrpcStatus(rep_->stubs[s]->InitParams(&ctx, req, &resp));
      if (st.ok()) {
        Log(absl::StrFormat("worker %d: shard %d was at version %d; %s", o.worker_id, s,
                            r.version(),
                            resp.created()
                                ? absl::StrCat("restored it to version ", state.held_version[s],
                                               " from this worker's copy")
                                : absl::StrCat("another worker brought it to version ",
                                               resp.version(), " first")));
      } else {
        st = absl::Status(st.code(), absl::StrCat("restoring shard ", s, " (", o.servers[s],
                                                  "): ", st.message()));
      }
    }
    if (st.ok()) return st;
    if (absl::Now() + backoff >= deadline) return st;
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, absl::Seconds(2));
  }
}

void PsClient::RollBackToCommonVersion(std::vector<int64_t> versions) {
  const ClientOptions& o = rep_->state.options;
  // A shard that rolls back may land below the others' version (it lacks
  // that checkpoint); then they follow. Each round lowers the target.
  for (int round = 0; round < num_shards(); ++round) {
    const int64_t target = *std::min_element(versions.begin(), versions.end());
    if (target == *std::max_element(versions.begin(), versions.end())) return;
    bool moved = false;
    for (int s = 0; s < num_shards(); ++s) {
      if (versions[s] == target) continue;
      v1::InitRequest req;
      req.set_worker_id(o.worker_id);
      req.set_rollback(true);
      req.set_version(target);
      v1::InitResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + o.rpc_timeout));
      const absl::Status st = FromGrpcStatus(rep_->stubs[s]->InitParams(&ctx, req, &resp));
      // Refused: the shard trains already (a live cluster whose shards are
      // a step apart), or has no older checkpoint. Nothing to do then.
      if (!st.ok()) continue;
      if (resp.created()) {
        Log(absl::StrFormat("worker %d: the shards restarted at versions [%s]; rolled shard %d "
                            "back to its checkpoint of version %d, the newest they share",
                            o.worker_id, absl::StrJoin(versions, ", "), s, resp.version()));
        moved = true;
      }
      versions[s] = resp.version();
    }
    if (!moved) return;
  }
}

void PsClient::Resize(TensorList* weights) const {
  const ModelSpec& spec = rep_->state.spec;
  weights->resize(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) (*weights)[i].resize(spec[i].num_elements());
}

absl::Status PsClient::CheckGrads(const TensorList& grads) const {
  const ModelSpec& spec = rep_->state.spec;
  if (spec.empty()) return absl::FailedPreconditionError("Init must be called first");
  if (grads.size() != spec.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", grads.size(), " tensors, the model has ", spec.size()));
  }
  for (size_t i = 0; i < spec.size(); ++i) {
    if (static_cast<int64_t>(grads[i].size()) != spec[i].num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", TensorSpecToString(spec[i]),
                                                     " got ", grads[i].size(), " values"));
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::Init(const ModelSpec& spec, const TensorList* initial) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  ClientState& state = rep_->state;
  state.spec = spec;
  state.layouts.clear();
  for (int s = 0; s < num_shards(); ++s) {
    state.layouts.push_back(MakeSliceLayout(state.spec, num_shards(), s));
  }
  absl::Status status = initial != nullptr ? CheckGrads(*initial) : absl::OkStatus();
  std::vector<int64_t> versions(num_shards(), 0);
  if (status.ok()) {
    const ClientOptions& o = state.options;
    status = StartUnaryCalls<v1::InitRequest, v1::InitResponse>(
                 o.servers, o.wait_timeout + o.rpc_timeout, /*wait_for_ready=*/false,
                 [&state, initial](int s, v1::InitRequest* req) {
                   req->set_worker_id(state.options.worker_id);
                   ModelSpecToProto(state.spec, req->mutable_spec());
                   if (initial != nullptr) {
                     for (const SliceRange& r : state.layouts[s]->slices) {
                       SliceToProto(state.spec[r.tensor_index], r,
                                    absl::MakeConstSpan((*initial)[r.tensor_index])
                                        .subspan(r.offset, r.length),
                                    req->add_values());
                     }
                   }
                   req->set_wait_timeout_ms(
                       absl::ToInt64Milliseconds(state.options.wait_timeout));
                 },
                 [this](int s, auto... args) { rep_->stubs[s]->async()->InitParams(args...); },
                 [&versions](int s, const v1::InitResponse& r) {
                   versions[s] = r.version();
                   return absl::OkStatus();
                 })
                 ->Wait();
  }
  if (status.ok() && state.mode == Mode::kSync) RollBackToCommonVersion(versions);
  if (!status.ok()) {
    // Not initialized: later calls must fail with "Init must be called first".
    state.spec.clear();
    state.layouts.clear();
  }
  return status;
}

std::unique_ptr<PendingOp> PsClient::PullAsync(int64_t min_version, TensorList* weights) {
  if (rep_->state.spec.empty()) {
    return PendingCalls::Failed(absl::FailedPreconditionError("Init must be called first"));
  }
  Resize(weights);
  return rep_->transport->Pull(min_version, weights);
}

absl::Status PsClient::Pull(int64_t min_version, TensorList* weights) {
  rep_->StartOp();
  const auto attempt = [&] { return PullAsync(min_version, weights)->Wait(); };
  return Retry("pull", attempt(), attempt);
}

absl::Status PsClient::Push(const TensorList& grads) {
  RETURN_IF_ERROR(CheckGrads(grads));
  rep_->StartOp();
  const auto attempt = [&] { return rep_->transport->Push(grads)->Wait(); };
  return Retry("push", attempt(), attempt);
}

std::unique_ptr<PendingOp> PsClient::PushPullAsync(const TensorList& grads,
                                                   TensorList* weights) {
  if (absl::Status s = CheckGrads(grads); !s.ok()) return PendingCalls::Failed(s);
  Resize(weights);
  return rep_->transport->PushPull(grads, weights);
}

absl::Status PsClient::PushPull(const TensorList& grads, TensorList* weights) {
  rep_->StartOp();
  const auto attempt = [&] { return PushPullAsync(grads, weights)->Wait(); };
  return Retry("push-pull", attempt(), attempt);
}

std::unique_ptr<PushPullInProgress> PsClient::StartPushPull(const TensorList* grads,
                                                           TensorList* weights) {
  const ModelSpec* spec = &rep_->state.spec;
  if (spec->empty()) {
    return std::unique_ptr<PushPullInProgress>(new PushPullInProgress(
        this, spec, grads, weights, nullptr,
        absl::FailedPreconditionError("Init must be called first")));
  }
  Resize(weights);
  rep_->StartOp();
  return std::unique_ptr<PushPullInProgress>(new PushPullInProgress(
      this, spec, grads, weights, rep_->transport->StartPushPull(grads, weights),
      absl::OkStatus()));
}

PushPullInProgress::PushPullInProgress(PsClient* client, const ModelSpec* spec,
                                       const TensorList* grads, TensorList* weights,
                                       std::unique_ptr<LayerwisePushPull> calls,
                                       absl::Status error)
    : client_(client),
      spec_(spec),
      grads_(grads),
      weights_(weights),
      sent_(spec->size(), false),
      remaining_(static_cast<int>(spec->size())),
      error_(std::move(error)),
      calls_(std::move(calls)) {}

PushPullInProgress::~PushPullInProgress() = default;  // calls_'s destructor waits

void PushPullInProgress::Send(const std::vector<int>& indices) {
  if (!error_.ok()) return;
  const ModelSpec& spec = *spec_;
  std::vector<bool> now(spec.size(), false);
  for (int i : indices) {
    if (i < 0 || i >= static_cast<int>(spec.size()) || sent_[i] || now[i]) {
      error_ = absl::InvalidArgumentError(absl::StrCat("tensor ", i, " sent twice or unknown"));
    } else if (static_cast<int64_t>((*grads_)[i].size()) != spec[i].num_elements()) {
      error_ = absl::InvalidArgumentError(absl::StrCat("tensor ", TensorSpecToString(spec[i]),
                                                       " got ", (*grads_)[i].size(), " values"));
    }
    if (!error_.ok()) {
      calls_.reset();  // cancels the calls
      return;
    }
    now[i] = true;
    sent_[i] = true;
    --remaining_;
  }
  calls_->Send(now, /*last=*/remaining_ == 0);
}

absl::Status PushPullInProgress::Wait() {
  if (!error_.ok()) return error_;
  if (remaining_ > 0) {
    calls_.reset();  // cancels the calls
    error_ = absl::FailedPreconditionError(
        absl::StrCat(remaining_, " tensors were never sent; the push-pull was cancelled"));
    return error_;
  }
  absl::Status s = calls_->Wait();
  if (s.ok()) return s;
  calls_.reset();
  // Every tensor was sent, so a retry can push them all at once.
  return client_->Retry("push-pull", s, [this] {
    return client_->rep_->transport->PushPull(*grads_, weights_)->Wait();
  });
}

}  // namespace ps

#include "client/ps_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "client/pending_calls.h"
#include "client/shard_transport.h"
#include "client/stream_transport.h"
#include "client/unary_transport.h"
#include "common/partition.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/wire.h"

namespace ps {

struct PsClient::Rep {
  ClientState state;
  float learning_rate = 0;
  // By shard, on the same channels as the transport's: Register and
  // InitParams, which do not carry tensors on the hot path.
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs;
  // Borrows `state`; declared last so that it goes first.
  std::unique_ptr<ShardTransport> transport;
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
    channels.push_back(MakeChannel(addr, options.keepalive));
    rep->stubs.push_back(v1::ParameterServer::NewStub(channels.back()));
  }
  rep->state.shard_version.assign(S, 0);
  rep->transport = NewTransport(options.transport, channels, &rep->state);

  std::vector<v1::RegisterResponse> replies(S);
  absl::Status st =
      StartUnaryCalls<v1::RegisterRequest, v1::RegisterResponse>(
          options.servers, options.connect_timeout, /*wait_for_ready=*/true,
          [&options](int, v1::RegisterRequest* req) {
            req->set_worker_id(options.worker_id);
            req->set_num_workers(options.num_workers);
          },
          [rep = rep.get()](int s, auto... args) { rep->stubs[s]->async()->Register(args...); },
          [&replies](int s, const v1::RegisterResponse& r) {
            replies[s] = r;
            return absl::OkStatus();
          })
          ->Wait();
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
                 nullptr)
                 ->Wait();
  }
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
  return PullAsync(min_version, weights)->Wait();
}

absl::Status PsClient::Push(const TensorList& grads) {
  RETURN_IF_ERROR(CheckGrads(grads));
  return rep_->transport->Push(grads)->Wait();
}

std::unique_ptr<PendingOp> PsClient::PushPullAsync(const TensorList& grads,
                                                   TensorList* weights) {
  if (absl::Status s = CheckGrads(grads); !s.ok()) return PendingCalls::Failed(s);
  Resize(weights);
  return rep_->transport->PushPull(grads, weights);
}

absl::Status PsClient::PushPull(const TensorList& grads, TensorList* weights) {
  return PushPullAsync(grads, weights)->Wait();
}

std::unique_ptr<PushPullInProgress> PsClient::StartPushPull(const TensorList* grads,
                                                           TensorList* weights) {
  const ModelSpec* spec = &rep_->state.spec;
  if (spec->empty()) {
    return std::unique_ptr<PushPullInProgress>(new PushPullInProgress(
        spec, grads, nullptr, absl::FailedPreconditionError("Init must be called first")));
  }
  Resize(weights);
  return std::unique_ptr<PushPullInProgress>(new PushPullInProgress(
      spec, grads, rep_->transport->StartPushPull(grads, weights), absl::OkStatus()));
}

PushPullInProgress::PushPullInProgress(const ModelSpec* spec, const TensorList* grads,
                                       std::unique_ptr<LayerwisePushPull> calls,
                                       absl::Status error)
    : spec_(spec),
      grads_(grads),
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
  return calls_->Wait();
}

}  // namespace ps

#include "worker/ps_client.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "grpcpp/create_channel.h"
#include "rpc/credentials.h"
#include "rpc/wire.h"

namespace ps {

struct PendingOp::Call {
  grpc::ClientContext ctx;
  std::shared_ptr<void> req;   // the request message or ByteBuffer
  std::shared_ptr<void> resp;  // the response message or ByteBuffer
};

namespace {

constexpr char kPushMethod[] = "/ps.v1.ParameterServer/Push";
constexpr char kPullMethod[] = "/ps.v1.ParameterServer/Pull";
constexpr char kPushPullMethod[] = "/ps.v1.ParameterServer/PushPull";

// FanOut's `start` for a raw call of `method` on shard s's generic stub.
auto RawCall(std::vector<std::unique_ptr<grpc::GenericStub>>* stubs, const char* method) {
  return [stubs, method](int s, grpc::ClientContext* ctx, const grpc::ByteBuffer* req,
                         grpc::ByteBuffer* resp, std::function<void(grpc::Status)> done) {
    (*stubs)[s]->UnaryCall(ctx, method, grpc::StubOptions(), req, resp, std::move(done));
  };
}

std::chrono::system_clock::time_point ToChrono(absl::Time t) { return absl::ToChronoTime(t); }

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           absl::Duration keepalive) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(INT_MAX);
  args.SetMaxSendMessageSize(INT_MAX);
  // Each client gets its own connection rather than sharing one per process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (keepalive > absl::ZeroDuration()) {
    const int ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(keepalive), 1000, INT_MAX));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // also while a call waits
  }
  return grpc::CreateCustomChannel(address, ps::MakeChannelCredentials(), args);
}

}  // namespace

PendingOp::PendingOp() = default;

PendingOp::~PendingOp() {
  absl::MutexLock l(&mu_);
  if (!unanswered_.empty()) {
    for (auto& cancel : cancels_) cancel();
    // Cancelled calls complete promptly; their callbacks reference this object.
    mu_.Await(absl::Condition(
        +[](std::map<int, std::string>* m) { return m->empty(); }, &unanswered_));
  }
}

void PendingOp::Expect(const std::vector<std::string>& servers, absl::Time deadline,
                       const char* why) {
  deadline_ = deadline;
  deadline_why_ = why;
  absl::MutexLock l(&mu_);
  for (size_t s = 0; s < servers.size(); ++s) unanswered_[static_cast<int>(s)] = servers[s];
}

void PendingOp::Done(int shard, absl::Status s) {
  absl::MutexLock l(&mu_);
  auto it = unanswered_.find(shard);
  if (it == unanswered_.end()) return;  // our bug; never twice per shard
  if (!s.ok() && status_.ok()) {
    status_ = absl::Status(s.code(), absl::StrCat("shard ", shard, " (", it->second, "): ",
                                                  s.message()));
  }
  unanswered_.erase(it);
}

absl::Status PendingOp::Wait() {
  absl::MutexLock l(&mu_);
  auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unanswered_.empty(); };
  if (!mu_.AwaitWithDeadline(absl::Condition(&all_done), deadline_)) {
    // Unary calls carry their own deadline, so this matters for stream calls.
    if (status_.ok()) {
      std::vector<std::string> silent;
      for (const auto& [s, address] : unanswered_) {
        silent.push_back(absl::StrCat("shard ", s, " (", address, ")"));
      }
      status_ = absl::DeadlineExceededError(absl::StrCat(
          "no answer from ", absl::StrJoin(silent, ", "), " within ",
          absl::StrFormat("%.0f s", absl::ToDoubleSeconds(deadline_ - started_)),
          " (", deadline_why_, "): the server or the network to it may be down"));
    }
    for (auto& cancel : cancels_) cancel();
    mu_.Await(absl::Condition(&all_done));
  }
  return status_;
}

template <typename Req, typename Resp, typename Start>
std::unique_ptr<PendingOp> PsClient::FanOut(absl::Duration timeout, bool wait_for_ready,
                                            const std::function<void(int, Req*)>& build,
                                            Start start,
                                            std::function<absl::Status(int, const Resp&)> on_reply) {
  const int S = num_shards();
  std::unique_ptr<PendingOp> op(new PendingOp());
  const absl::Time deadline = absl::Now() + timeout;
  op->Expect(options_.servers, deadline + absl::Seconds(5), "the call timeout plus 5 s");
  for (int s = 0; s < S; ++s) {
    op->calls_.push_back(std::make_unique<PendingOp::Call>());
    PendingOp::Call* call = op->calls_.back().get();
    op->cancels_.push_back([call] { call->ctx.TryCancel(); });
    auto req = std::make_shared<Req>();
    build(s, req.get());
    auto resp = std::make_shared<Resp>();
    call->ctx.set_deadline(ToChrono(deadline));
    call->ctx.set_wait_for_ready(wait_for_ready);
    const Req* req_ptr = req.get();
    Resp* resp_ptr = resp.get();
    call->req = std::move(req);
    call->resp = std::move(resp);
    start(s, &call->ctx, req_ptr, resp_ptr,
          [op = op.get(), s, resp_ptr, on_reply](grpc::Status g) {
            absl::Status st = FromGrpcStatus(g);
            if (st.ok() && on_reply) st = on_reply(s, *resp_ptr);
            op->Done(s, st);
          });
  }
  return op;
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const ClientOptions& options) {
  if (options.servers.empty()) return absl::InvalidArgumentError("no servers given");
  if (options.num_workers < 1 || options.worker_id < 0 ||
      options.worker_id >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id must be in [0, num_workers=",
                                                   options.num_workers, "), got ",
                                                   options.worker_id));
  }
  std::unique_ptr<PsClient> c(new PsClient());
  c->options_ = options;
  const int S = static_cast<int>(options.servers.size());
  for (const std::string& addr : options.servers) {
    std::shared_ptr<grpc::Channel> channel = MakeChannel(addr, options.keepalive);
    c->stubs_.push_back(v1::ParameterServer::NewStub(channel));
    c->raw_stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
  c->shard_version_.assign(S, 0);
  c->streams_.resize(S);
  c->last_call_id_.assign(S, 0);

  std::vector<v1::RegisterResponse> replies(S);
  absl::Status st =
      c->FanOut<v1::RegisterRequest, v1::RegisterResponse>(
           options.connect_timeout, /*wait_for_ready=*/true,
           [&options](int, v1::RegisterRequest* req) {
             req->set_worker_id(options.worker_id);
             req->set_num_workers(options.num_workers);
           },
           [c = c.get()](int s, auto... args) { c->stubs_[s]->async()->Register(args...); },
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
  c->mode_ = *mode;
  c->learning_rate_ = replies[0].learning_rate();
  return c;
}

void PsClient::Resize(TensorList* weights) const {
  weights->resize(spec_.size());
  for (size_t i = 0; i < spec_.size(); ++i) (*weights)[i].resize(spec_[i].num_elements());
}

void PsClient::FillSlices(int shard, const TensorList& values,
                          google::protobuf::RepeatedPtrField<v1::TensorSlice>* out) const {
  for (const SliceRange& r : layouts_[shard]->slices) {
    SliceToProto(spec_[r.tensor_index], r,
                 absl::MakeConstSpan(values[r.tensor_index]).subspan(r.offset, r.length),
                 out->Add());
  }
}

absl::Status PsClient::CheckGrads(const TensorList& grads) const {
  if (spec_.empty()) return absl::FailedPreconditionError("Init must be called first");
  if (grads.size() != spec_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", grads.size(), " tensors, the model has ", spec_.size()));
  }
  for (size_t i = 0; i < spec_.size(); ++i) {
    if (static_cast<int64_t>(grads[i].size()) != spec_[i].num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", TensorSpecToString(spec_[i]),
                                                     " got ", grads[i].size(), " values"));
    }
  }
  return absl::OkStatus();
}

SliceValues PsClient::TensorValues(const TensorList& values) {
  return [&values](const SliceRange& r) { return values[r.tensor_index].data() + r.offset; };
}

absl::Status PsClient::ReadPull(int shard, const grpc::ByteBuffer& resp, TensorList* weights) {
  ReceivedBytes bytes;
  RETURN_IF_ERROR(Receive(resp, &bytes));
  int64_t version = 0;
  std::vector<RawTensorSlice> slices;
  RETURN_IF_ERROR(DecodePullResponse(bytes.pieces, &version, &slices));
  SliceAssembler assembler = PullAssembler(shard);
  RETURN_IF_ERROR(ReadWeightChunks(shard, &assembler, slices, weights));
  if (absl::Status s = assembler.Finish(); !s.ok()) return BadReply(shard, s);
  shard_version_[shard] = version;
  return absl::OkStatus();
}

absl::Status PsClient::Init(const ModelSpec& spec, const TensorList* initial) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  spec_ = spec;
  layouts_.clear();
  for (int s = 0; s < num_shards(); ++s) layouts_.push_back(MakeSliceLayout(spec_, num_shards(), s));
  absl::Status status = initial != nullptr ? CheckGrads(*initial) : absl::OkStatus();
  if (status.ok()) {
    status = FanOut<v1::InitRequest, v1::InitResponse>(
                 options_.wait_timeout + options_.rpc_timeout, false,
                 [this, initial](int s, v1::InitRequest* req) {
                   req->set_worker_id(options_.worker_id);
                   ModelSpecToProto(spec_, req->mutable_spec());
                   if (initial != nullptr) FillSlices(s, *initial, req->mutable_values());
                   req->set_wait_timeout_ms(absl::ToInt64Milliseconds(options_.wait_timeout));
                 },
                 [this](int s, auto... args) { stubs_[s]->async()->InitParams(args...); }, nullptr)
                 ->Wait();
  }
  if (!status.ok()) {
    // Not initialized: later calls must fail with "Init must be called first".
    spec_.clear();
    layouts_.clear();
  }
  return status;
}

std::unique_ptr<PendingOp> PendingOp::Failed(absl::Status s) {
  std::unique_ptr<PendingOp> op(new PendingOp());
  absl::MutexLock l(&op->mu_);
  op->status_ = std::move(s);
  return op;
}

std::unique_ptr<PendingOp> PsClient::PullAsync(int64_t min_version, TensorList* weights) {
  if (spec_.empty()) {
    return PendingOp::Failed(absl::FailedPreconditionError("Init must be called first"));
  }
  Resize(weights);
  if (options_.transport == ClientOptions::Transport::kStream) {
    return StreamFanOut(StreamCall::kPull, nullptr, weights, min_version);
  }
  return FanOut<grpc::ByteBuffer, grpc::ByteBuffer>(
      options_.wait_timeout + options_.rpc_timeout, false,
      [this, min_version](int, grpc::ByteBuffer* req) {
        ProtoWriter w;  // PullRequest
        w.VarintField(1, static_cast<uint64_t>(int64_t{options_.worker_id}));
        w.VarintField(2, static_cast<uint64_t>(min_version));
        w.VarintField(3, static_cast<uint64_t>(absl::ToInt64Milliseconds(options_.wait_timeout)));
        *req = w.Finish();
      },
      RawCall(&raw_stubs_, kPullMethod),
      [this, weights](int s, const grpc::ByteBuffer& r) { return ReadPull(s, r, weights); });
}

absl::Status PsClient::Pull(int64_t min_version, TensorList* weights) {
  return PullAsync(min_version, weights)->Wait();
}

absl::Status PsClient::Push(const TensorList& grads) {
  RETURN_IF_ERROR(CheckGrads(grads));
  if (options_.transport == ClientOptions::Transport::kStream) {
    return StreamFanOut(StreamCall::kPush, &grads, nullptr, 0)->Wait();
  }
  return FanOut<grpc::ByteBuffer, grpc::ByteBuffer>(
             options_.rpc_timeout, false,
             [this, &grads](int s, grpc::ByteBuffer* req) {
               *req = EncodePushRequest(options_.worker_id, shard_version_[s], spec_,
                                        layouts_[s]->slices, TensorValues(grads));
             },
             RawCall(&raw_stubs_, kPushMethod),
             nullptr)
      ->Wait();
}

std::unique_ptr<PendingOp> PsClient::PushPullAsync(const TensorList& grads,
                                                   TensorList* weights) {
  if (absl::Status s = CheckGrads(grads); !s.ok()) return PendingOp::Failed(s);
  Resize(weights);
  if (options_.transport == ClientOptions::Transport::kStream) {
    // Sync: all shards are at the same step; -1 asks for each shard's next.
    return StreamFanOut(StreamCall::kPushPull, &grads, weights, mode_ == Mode::kSync ? -1 : 0);
  }
  return FanOut<grpc::ByteBuffer, grpc::ByteBuffer>(
      options_.wait_timeout + options_.rpc_timeout, false,
      [this, &grads](int s, grpc::ByteBuffer* req) {
        *req = EncodePushPullRequest(
            options_.worker_id, shard_version_[s], spec_, layouts_[s]->slices, TensorValues(grads),
            mode_ == Mode::kSync ? shard_version_[s] + 1 : 0,
            absl::ToInt64Milliseconds(options_.wait_timeout));
      },
      RawCall(&raw_stubs_, kPushPullMethod),
      [this, weights](int s, const grpc::ByteBuffer& r) { return ReadPull(s, r, weights); });
}

absl::Status PsClient::PushPull(const TensorList& grads, TensorList* weights) {
  return PushPullAsync(grads, weights)->Wait();
}

PsClient::~PsClient() = default;

absl::StatusOr<ClientOptions::Transport> ParseTransport(absl::string_view text) {
  if (text == "stream") return ClientOptions::Transport::kStream;
  if (text == "unary") return ClientOptions::Transport::kUnary;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", text, "': expected 'stream' or 'unary'"));
}

ShardStream* PsClient::StreamTo(int shard) {
  std::unique_ptr<ShardStream>& st = streams_[shard];
  if (st == nullptr || st->broken()) {
    st.reset();  // waits for the broken one to wind down
    st = std::make_unique<ShardStream>(raw_stubs_[shard].get());
  }
  return st.get();
}

SliceAssembler PsClient::PullAssembler(int shard) const {
  SliceAssembler::Options o;
  o.what = "pull";
  return SliceAssembler(layouts_[shard], o);
}

SliceAssembler::Destination PsClient::Into(TensorList* weights) {
  return [weights](const SliceRange& r) -> absl::StatusOr<float*> {
    return (*weights)[r.tensor_index].data() + r.offset;
  };
}

absl::Status PsClient::BadReply(int shard, const absl::Status& s) const {
  return absl::InternalError(
      absl::StrCat("shard ", shard, " sent a malformed pull reply: ", s.message()));
}

absl::Status PsClient::ReadWeightChunks(int shard, SliceAssembler* assembler,
                                        const std::vector<RawTensorSlice>& chunks,
                                        TensorList* weights) {
  const SliceAssembler::Destination into = Into(weights);
  for (const RawTensorSlice& c : chunks) {
    if (absl::Status s = assembler->Add(c, into); !s.ok()) return BadReply(shard, s);
  }
  return absl::OkStatus();
}

StreamCallHeader PsClient::NextCall(int shard, StreamCall kind, int64_t min_version) {
  StreamCallHeader h;
  h.call_id = ++last_call_id_[shard];
  h.kind = kind;
  h.worker_id = options_.worker_id;
  h.version = shard_version_[shard];
  h.min_version = min_version < 0 ? shard_version_[shard] + 1 : min_version;
  h.wait_timeout_ms = absl::ToInt64Milliseconds(options_.wait_timeout);
  return h;
}

std::unique_ptr<PendingOp> PsClient::StartStreamCalls(
    StreamCall kind, const std::vector<StreamCallHeader>& headers,
    std::vector<std::vector<grpc::ByteBuffer>> first_requests, TensorList* weights) {
  const int S = num_shards();
  std::unique_ptr<PendingOp> op(new PendingOp());
  op->Expect(options_.servers, absl::Now() + options_.wait_timeout + options_.rpc_timeout,
             "the wait timeout plus the RPC timeout");
  for (int s = 0; s < S; ++s) {
    ShardStream* stream = StreamTo(s);
    op->cancels_.push_back([stream] { stream->Cancel(); });
    auto assembler = std::make_shared<SliceAssembler>(PullAssembler(s));
    stream->Call(
        headers[s].call_id, std::move(first_requests[s]),
        [this, s, weights, assembler](const RawStreamResponse& r) {
          if (weights == nullptr) return absl::OkStatus();
          RETURN_IF_ERROR(ReadWeightChunks(s, assembler.get(), r.weights, weights));
          if (r.last) shard_version_[s] = r.version;
          return absl::OkStatus();
        },
        [this, op = op.get(), s, kind, assembler](absl::Status st) {
          if (st.ok() && kind != StreamCall::kPush) {
            if (absl::Status f = assembler->Finish(); !f.ok()) st = BadReply(s, f);
          }
          op->Done(s, st);
        });
  }
  return op;
}

std::unique_ptr<PendingOp> PsClient::StreamFanOut(StreamCall kind, const TensorList* grads,
                                                  TensorList* weights, int64_t min_version) {
  std::vector<StreamCallHeader> headers;
  std::vector<std::vector<grpc::ByteBuffer>> requests;
  for (int s = 0; s < num_shards(); ++s) {
    headers.push_back(NextCall(s, kind, min_version));
    requests.push_back(EncodeStreamRequests(
        headers.back(), /*first=*/true, /*last=*/true, spec_,
        grads != nullptr ? layouts_[s]->slices : std::vector<SliceRange>(),
        grads != nullptr ? TensorValues(*grads) : SliceValues()));
  }
  return StartStreamCalls(kind, headers, std::move(requests), weights);
}

std::unique_ptr<PushPullInProgress> PsClient::StartPushPull(const TensorList* grads,
                                                           TensorList* weights) {
  std::unique_ptr<PushPullInProgress> p(new PushPullInProgress(this, grads, weights));
  if (spec_.empty()) {
    p->error_ = absl::FailedPreconditionError("Init must be called first");
    return p;
  }
  Resize(weights);
  if (options_.transport == ClientOptions::Transport::kStream) {
    // Open the calls with their headers; the chunks follow as tensors are sent.
    std::vector<StreamCallHeader> headers;
    std::vector<std::vector<grpc::ByteBuffer>> requests;
    for (int s = 0; s < num_shards(); ++s) {
      headers.push_back(NextCall(s, StreamCall::kPushPull, mode_ == Mode::kSync ? -1 : 0));
      p->call_ids_.push_back(headers.back().call_id);
      requests.push_back(EncodeStreamRequests(headers.back(), /*first=*/true, /*last=*/false,
                                              spec_, {}, SliceValues()));
    }
    p->op_ = StartStreamCalls(StreamCall::kPushPull, headers, std::move(requests), weights);
  }
  return p;
}

PushPullInProgress::PushPullInProgress(PsClient* client, const TensorList* grads,
                                       TensorList* weights)
    : client_(client),
      grads_(grads),
      weights_(weights),
      sent_(client->spec_.size(), false),
      remaining_(static_cast<int>(client->spec_.size())) {}

PushPullInProgress::~PushPullInProgress() = default;  // op_'s destructor waits

void PushPullInProgress::Send(const std::vector<int>& indices) {
  if (!error_.ok()) return;
  const ModelSpec& spec = client_->spec_;
  std::vector<bool> now(spec.size(), false);
  for (int i : indices) {
    if (i < 0 || i >= static_cast<int>(spec.size()) || sent_[i] || now[i]) {
      error_ = absl::InvalidArgumentError(absl::StrCat("tensor ", i, " sent twice or unknown"));
    } else if (static_cast<int64_t>((*grads_)[i].size()) != spec[i].num_elements()) {
      error_ = absl::InvalidArgumentError(absl::StrCat("tensor ", TensorSpecToString(spec[i]),
                                                       " got ", (*grads_)[i].size(), " values"));
    }
    if (!error_.ok()) {
      if (op_ != nullptr) op_.reset();  // cancels the calls
      return;
    }
    now[i] = true;
    sent_[i] = true;
    --remaining_;
  }
  const bool last = remaining_ == 0;
  if (op_ == nullptr) {
    // Unary transport: everything goes with the last tensor.
    if (last) op_ = client_->PushPullAsync(*grads_, weights_);
    return;
  }
  for (int s = 0; s < client_->num_shards(); ++s) {
    std::vector<SliceRange> slices;
    for (const SliceRange& r : client_->layouts_[s]->slices) {
      if (now[r.tensor_index]) slices.push_back(r);
    }
    if (slices.empty() && !last) continue;
    StreamCallHeader h;
    h.call_id = call_ids_[s];
    client_->streams_[s]->Append(
        h.call_id, EncodeStreamRequests(h, /*first=*/false, last, spec, slices,
                                        PsClient::TensorValues(*grads_)));
  }
}

absl::Status PushPullInProgress::Wait() {
  if (!error_.ok()) return error_;
  if (remaining_ > 0) {
    op_.reset();  // cancels the calls
    return absl::FailedPreconditionError(
        absl::StrCat(remaining_, " tensors were never sent; the push-pull was cancelled"));
  }
  return op_->Wait();
}

int64_t PsClient::version() const {
  return *std::min_element(shard_version_.begin(), shard_version_.end());
}

absl::StatusOr<std::vector<v1::StatusResponse>> QueryStatus(
    const std::vector<std::string>& servers, absl::Duration timeout) {
  std::vector<v1::StatusResponse> out(servers.size());
  for (size_t s = 0; s < servers.size(); ++s) {
    auto stub = v1::ParameterServer::NewStub(MakeChannel(servers[s], absl::ZeroDuration()));
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + timeout));
    grpc::Status st = stub->GetStatus(&ctx, v1::StatusRequest(), &out[s]);
    if (!st.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                          absl::StrCat(servers[s], ": ", st.error_message()));
    }
  }
  return out;
}

}  // namespace ps

// PsClient: a worker's connection to all parameter-server shards.
//
// Hides the sharding: callers work with whole named tensors (a TensorList
// parallel to the ModelSpec) and the client splits them by the partition of
// common/partition.h, talks to every shard in parallel, and reassembles the
// replies. It tracks the version of each shard's weights it last pulled and
// sends it with each push (the step in sync mode; for staleness in async
// mode).
//
// Every call has a deadline; a shard that does not answer yields an error
// naming it, never a hang.
//
// Thread safety: one training thread per client. The *Async calls return a
// PendingOp to wait on; start at most one at a time and wait for it before the
// next call. The client must outlive its PendingOps.
//
// Example:
//   ASSIGN_OR_RETURN(auto client, PsClient::Connect(options));
//   RETURN_IF_ERROR(client->Init(spec, worker_id == 0 ? &init : nullptr));
//   RETURN_IF_ERROR(client->Pull(0, &weights));
//   for (...) { compute grads; RETURN_IF_ERROR(client->PushPull(grads, &weights)); }
#ifndef PS_WORKER_PS_CLIENT_H_
#define PS_WORKER_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/mode.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/raw_wire.h"
#include "worker/shard_stream.h"

namespace ps {

struct ClientOptions {
  std::vector<std::string> servers;  // HOST:PORT of shard 0, 1, ... in order
  int worker_id = 0;                 // 0 <= worker_id < num_workers
  int num_workers = 1;
  // How long Connect waits for every server to come up and answer.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Deadline of calls that do not wait for other workers.
  absl::Duration rpc_timeout = absl::Seconds(60);
  // How long a pull may wait for other workers (sync) or for worker 0's init.
  // The server answers DEADLINE_EXCEEDED naming the missing workers past it.
  absl::Duration wait_timeout = absl::Seconds(120);
  // Liveness of each connection: an HTTP/2 ping goes out after this much
  // time without traffic and must be answered within as long again, or the
  // connection is closed and its calls fail with UNAVAILABLE. So a server or
  // link that dies mid-call is noticed within about twice this, not at the
  // call's deadline. Zero: no pings; else at least 1 s (servers refuse
  // pings more frequent than that).
  absl::Duration keepalive = absl::Seconds(10);
  // How Push, Pull and PushPull travel:
  //   kStream: one long-lived stream per shard, tensors in ~1 MB chunks that
  //            are copied (and applied) while the next is on the wire;
  //   kUnary:  one unary call per shard per operation.
  enum class Transport { kStream, kUnary };
  Transport transport = Transport::kStream;
};

// "stream" / "unary"; INVALID_ARGUMENT otherwise.
absl::StatusOr<ClientOptions::Transport> ParseTransport(absl::string_view text);

// A call in flight on every shard. Wait() returns once all shards answered or
// their deadlines passed: OK, or the first error, naming the shard.
class PendingOp {
 public:
  ~PendingOp();  // waits for calls still in flight
  PendingOp(const PendingOp&) = delete;
  PendingOp& operator=(const PendingOp&) = delete;

  absl::Status Wait();

 private:
  friend class PsClient;
  struct Call;
  PendingOp();
  // An operation that failed before starting: Wait() returns `s`.
  static std::unique_ptr<PendingOp> Failed(absl::Status s);
  // Before the calls start: one call per server (shard i at servers[i]),
  // all done by `deadline`, which `why` explains in the message of a call
  // that is not.
  void Expect(const std::vector<std::string>& servers, absl::Time deadline, const char* why);
  // Shard `shard`'s call ended with `s`.
  void Done(int shard, absl::Status s);

  absl::Mutex mu_;
  // Shards whose call has not ended, with their addresses.
  std::map<int, std::string> unanswered_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Time started_ = absl::Now();
  absl::Time deadline_;  // latest call deadline, plus a margin
  const char* deadline_why_ = "";  // what deadline_ is made of, for the message
  std::vector<std::unique_ptr<Call>> calls_;     // unary calls
  std::vector<std::function<void()>> cancels_;   // one per call in flight
};

class PsClient;

// A push-pull whose gradient is sent tensor by tensor as it becomes final
// (layer by layer during backward), so that communication overlaps the rest
// of the backward pass. Send() every tensor exactly once, in any order; the
// new weights arrive once the last was sent. `grads` (and the weights) must
// stay alive until Wait() returns, and a tensor must not change once sent.
// With the unary transport everything is sent with the last tensor.
class PushPullInProgress {
 public:
  ~PushPullInProgress();  // waits (cancelling if need be)
  PushPullInProgress(const PushPullInProgress&) = delete;
  PushPullInProgress& operator=(const PushPullInProgress&) = delete;

  // Sends tensors `indices` (into the model spec) of the gradient.
  void Send(const std::vector<int>& indices);
  // After the last Send: the result of the push-pull.
  absl::Status Wait();

 private:
  friend class PsClient;
  PushPullInProgress(PsClient* client, const TensorList* grads, TensorList* weights);

  PsClient* const client_;  // not owned
  const TensorList* const grads_;
  TensorList* const weights_;
  std::vector<bool> sent_;  // by tensor
  int remaining_;           // tensors not sent yet
  absl::Status error_;      // a bad Send
  std::vector<uint64_t> call_ids_;  // stream transport: by shard
  std::unique_ptr<PendingOp> op_;
};

class PsClient {
 public:
  // Opens a channel per server and registers with each, waiting up to
  // connect_timeout for servers that are not up yet. Fails if the servers
  // disagree with each other or with the options (mode, worker count, shard
  // count or order).
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const ClientOptions& options);

  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;
  ~PsClient();  // closes the streams

  Mode mode() const { return mode_; }
  int num_shards() const { return static_cast<int>(stubs_.size()); }
  float server_learning_rate() const { return learning_rate_; }
  const ModelSpec& spec() const { return spec_; }

  // Worker 0 passes `initial` values and creates the parameters on every
  // shard; other workers pass nullptr and wait for worker 0, getting
  // FAILED_PRECONDITION if their spec differs from the one worker 0 created.
  absl::Status Init(const ModelSpec& spec, const TensorList* initial);

  // Fills `weights` (resized to the spec) from every shard once each is at
  // version >= min_version.
  absl::Status Pull(int64_t min_version, TensorList* weights);
  std::unique_ptr<PendingOp> PullAsync(int64_t min_version, TensorList* weights);

  // Pushes one gradient per tensor, computed on the weights last pulled.
  absl::Status Push(const TensorList& grads);

  // Pushes, then pulls the next weights: sync mode waits for the step every
  // worker contributes to (version + 1); async mode returns the shard's
  // weights right after this push. `weights` may alias nothing in `grads`;
  // both must stay alive until the PendingOp is waited on.
  absl::Status PushPull(const TensorList& grads, TensorList* weights);
  std::unique_ptr<PendingOp> PushPullAsync(const TensorList& grads, TensorList* weights);

  // PushPull with the gradient sent tensor by tensor; see PushPullInProgress.
  std::unique_ptr<PushPullInProgress> StartPushPull(const TensorList* grads, TensorList* weights);

  // The smallest version pulled from any shard (in sync mode: the step).
  int64_t version() const;

 private:
  PsClient() = default;
  friend class PushPullInProgress;

  // The header of this client's next stream call to `shard` of `kind`.
  StreamCallHeader NextCall(int shard, StreamCall kind, int64_t min_version);
  // Opens the same call on every shard's stream with `first_requests`
  // (shard -> messages); replies are decoded into `weights` (may be null).
  std::unique_ptr<PendingOp> StartStreamCalls(
      StreamCall kind, const std::vector<StreamCallHeader>& headers,
      std::vector<std::vector<grpc::ByteBuffer>> first_requests, TensorList* weights);

  // Starts one call per shard: build(s, &request) fills shard s's request,
  // start(s, ctx, req, resp, callback) issues it, and on_reply(s, response)
  // consumes a successful reply (may be null).
  template <typename Req, typename Resp, typename Start>
  std::unique_ptr<PendingOp> FanOut(absl::Duration timeout, bool wait_for_ready,
                                    const std::function<void(int, Req*)>& build, Start start,
                                    std::function<absl::Status(int, const Resp&)> on_reply);

  // One call of `kind` per shard on the streams; `grads` is null for pulls.
  std::unique_ptr<PendingOp> StreamFanOut(StreamCall kind, const TensorList* grads,
                                          TensorList* weights, int64_t min_version);
  // The shard's stream, reopened if it broke.
  ShardStream* StreamTo(int shard);
  // Reading pulled weights (both transports): an assembler for shard
  // `shard`'s reply and where its values go in `weights`. A reply that
  // breaks the assembler's rules is INTERNAL naming the shard.
  SliceAssembler PullAssembler(int shard) const;
  static SliceAssembler::Destination Into(TensorList* weights);
  absl::Status ReadWeightChunks(int shard, SliceAssembler* assembler,
                                const std::vector<RawTensorSlice>& chunks, TensorList* weights);
  absl::Status BadReply(int shard, const absl::Status& s) const;

  absl::Status CheckGrads(const TensorList& grads) const;
  void FillSlices(int shard, const TensorList& values,
                  google::protobuf::RepeatedPtrField<v1::TensorSlice>* out) const;
  // Decodes a shard's raw PullResponse into `weights`, checking it against
  // the partition, and records the shard's version.
  absl::Status ReadPull(int shard, const grpc::ByteBuffer& resp, TensorList* weights);
  // Where slice `r` of `values` (one vector per tensor) starts.
  static SliceValues TensorValues(const TensorList& values);
  void Resize(TensorList* weights) const;

  ClientOptions options_;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;
  // Same channels; for Push, Pull and PushPull on the raw path of
  // rpc/raw_wire.h (gradients sent without a copy, weights copied once).
  std::vector<std::unique_ptr<grpc::GenericStub>> raw_stubs_;
  Mode mode_ = Mode::kSync;
  float learning_rate_ = 0;
  ModelSpec spec_;
  // By shard: the slices it owns (common/partition.h); empty before Init.
  std::vector<std::shared_ptr<const SliceLayout>> layouts_;
  std::vector<std::unique_ptr<ShardStream>> streams_;  // by shard; opened lazily
  std::vector<uint64_t> last_call_id_;                 // by shard
  // Per shard, the version of the weights last pulled. Written by reply
  // callbacks of distinct shards, read by the training thread after Wait().
  std::vector<int64_t> shard_version_;
};

// Asks each server for its status (no registration needed); used by ps_ctl.
absl::StatusOr<std::vector<v1::StatusResponse>> QueryStatus(
    const std::vector<std::string>& servers, absl::Duration timeout);

}  // namespace ps

#endif  // PS_WORKER_PS_CLIENT_H_

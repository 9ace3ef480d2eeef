#include "server/stream_reactor.h"

#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/raw_wire.h"
#include "common/wire.h"

namespace ps {
namespace {

class StreamReactor;

// What the reactor shares with the shard's callbacks, which may outlive it:
// the write queue and the stream's lifecycle. `reactor` is null once gRPC is
// done with the stream; later writes are dropped.
struct Core {
  absl::Mutex mu;
  StreamReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  std::deque<grpc::ByteBuffer> queue ABSL_GUARDED_BY(mu);
  bool writing ABSL_GUARDED_BY(mu) = false;     // a StartWrite is in flight
  bool reads_done ABSL_GUARDED_BY(mu) = false;  // no more requests will come
  bool finished ABSL_GUARDED_BY(mu) = false;    // Finish was called
  bool broken ABSL_GUARDED_BY(mu) = false;      // cancelled or a write failed
  absl::Status final_status ABSL_GUARDED_BY(mu);
  int open_calls ABSL_GUARDED_BY(mu) = 0;  // calls not yet fully answered
  uint64_t ticket ABSL_GUARDED_BY(mu) = 0; // the shard wait of the open call

  // Queues a call's responses; `closes_call` when they are its last.
  void Send(std::vector<grpc::ByteBuffer> messages, bool closes_call);
  void WriteDone(bool ok);
  void ReadsDone(absl::Status status);
  bool finished_or_broken() {
    absl::MutexLock l(&mu);
    return finished || broken;
  }

  // What to do once the lock is released: gRPC reactor operations are not
  // started under `mu`. Neither can race with OnDone: the stream is not
  // finished while a write is in flight, and nothing touches it after Finish.
  struct Actions {
    StreamReactor* reactor = nullptr;
    const grpc::ByteBuffer* write = nullptr;
    bool finish = false;
    grpc::Status status;
  };
  Actions NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  static void Run(const Actions& a);
};

class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit StreamReactor(Shard* shard) : shard_(shard), core_(std::make_shared<Core>()) {
    {
      absl::MutexLock l(&core_->mu);
      core_->reactor = this;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      core_->ReadsDone(absl::OkStatus());
      return;
    }
    absl::Status s = Handle();
    in_.Clear();
    if (!s.ok()) {
      // The stream itself is unusable (malformed framing, call protocol).
      core_->ReadsDone(s);
      return;
    }
    if (!core_->finished_or_broken()) StartRead(&in_);
  }

  void OnWriteDone(bool ok) override { core_->WriteDone(ok); }

  void OnCancel() override {
    uint64_t ticket;
    Core::Actions a;
    {
      absl::MutexLock l(&core_->mu);
      core_->broken = true;
      ticket = core_->ticket;
      a = core_->NextLocked();
    }
    Core::Run(a);
    if (ticket != 0) shard_->CancelWait(ticket);
  }

  void OnDone() override {
    {
      absl::MutexLock l(&core_->mu);
      core_->reactor = nullptr;
    }
    delete this;
  }

  // For Core::Run.
  void Write(const grpc::ByteBuffer* b) { StartWrite(b); }
  void Done(const grpc::Status& s) { Finish(s); }

 private:
  // The call being received.
  struct Call {
    bool open = false;
    StreamCallHeader header;
    absl::Status error;  // first problem; the call is answered with it
    std::shared_ptr<const ShardLayout> layout;
    std::vector<float> grad;    // flat, in layout order
    std::vector<int64_t> next;  // per layout slice: next expected element
  };

  absl::Status Handle();
  absl::Status Receive(const RawTensorSlice& chunk);
  void Complete();
  void StartPull();

  Shard* const shard_;
  const std::shared_ptr<Core> core_;
  grpc::ByteBuffer in_;  // the message being read
  Call call_;            // only touched by the read path, which gRPC serializes
};

Core::Actions Core::NextLocked() {
  Actions a;
  if (reactor == nullptr || finished) return a;
  a.reactor = reactor;
  if (!writing && !queue.empty() && !broken) {
    writing = true;
    a.write = &queue.front();
    return a;
  }
  if (!writing && (broken || (reads_done && open_calls == 0 && queue.empty()))) {
    finished = true;
    a.finish = true;
    a.status = broken && final_status.ok() ? grpc::Status::CANCELLED : ToGrpcStatus(final_status);
  }
  return a;
}

void Core::Run(const Actions& a) {
  if (a.write != nullptr) a.reactor->Write(a.write);
  if (a.finish) a.reactor->Done(a.status);
}

void Core::Send(std::vector<grpc::ByteBuffer> messages, bool closes_call) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    if (closes_call) {
      --open_calls;
      ticket = 0;
    }
    if (finished) return;
    for (grpc::ByteBuffer& m : messages) queue.push_back(std::move(m));
    a = NextLocked();
  }
  Run(a);
}

void Core::WriteDone(bool ok) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    writing = false;
    queue.pop_front();
    if (!ok) broken = true;
    a = NextLocked();
  }
  Run(a);
}

void Core::ReadsDone(absl::Status status) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    reads_done = true;
    if (!status.ok()) {
      final_status = status;
      broken = true;
    }
    a = NextLocked();
  }
  Run(a);
}

absl::Status StreamReactor::Handle() {
  ReceivedBytes bytes;
  RawStreamRequest req;
  absl::Status s = ps::Receive(in_, &bytes);
  if (s.ok()) s = DecodeStreamRequest(bytes.pieces, &req);
  if (!s.ok()) return s;
  if (!call_.open) {
    // A new call.
    if (req.header.call_id == 0) {
      return absl::InvalidArgumentError("stream call_id must be > 0");
    }
    call_ = Call();
    call_.open = true;
    call_.header = req.header;
    if (req.header.kind != StreamCall::kPull) {
      call_.error = shard_->CheckInitialized();
      if (call_.error.ok()) {
        call_.layout = shard_->Layout();
        call_.grad = shard_->GradientBuffer(*call_.layout);
        for (const SliceRange& r : call_.layout->slices) call_.next.push_back(r.offset);
      }
    }
    absl::MutexLock l(&core_->mu);
    ++core_->open_calls;
  } else if (req.header.call_id != call_.header.call_id) {
    return absl::InvalidArgumentError(absl::StrCat("stream message for call ",
                                                   req.header.call_id, " while call ",
                                                   call_.header.call_id, " is incomplete"));
  }
  for (const RawTensorSlice& chunk : req.gradients) {
    if (!call_.error.ok()) break;
    if (call_.header.kind == StreamCall::kPull) {
      call_.error = absl::InvalidArgumentError("a pull call carries no gradients");
    } else {
      call_.error = Receive(chunk);
    }
  }
  if (req.last) Complete();
  return absl::OkStatus();
}

absl::Status StreamReactor::Receive(const RawTensorSlice& chunk) {
  const ShardLayout& layout = *call_.layout;
  const int shard_id = shard_->options().shard_id;
  auto it = layout.by_name.find(chunk.name);
  if (it == layout.by_name.end()) {
    return absl::NotFoundError(absl::StrCat("push: tensor '", chunk.name,
                                            "' is not in the model or has no elements on shard ",
                                            shard_id));
  }
  const SliceRange& r = layout.slices[it->second];
  const TensorSpec& t = layout.spec[r.tensor_index];
  if (chunk.shape != t.shape) {
    return absl::InvalidArgumentError(absl::StrCat("push: tensor '", chunk.name,
                                                   "' has the wrong shape; the model has ",
                                                   TensorSpecToString(t)));
  }
  int64_t& next = call_.next[it->second];
  if (chunk.offset != next || chunk.length < 0 || chunk.offset + chunk.length > r.offset + r.length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push: chunk [", chunk.offset, ", ", chunk.offset + chunk.length, ") of '", chunk.name,
        "' is out of order or outside [", r.offset, ", ", r.offset + r.length,
        "), which shard ", shard_id, " owns; expected it to start at ", next));
  }
  absl::Status s = DecodeFloatPieces(
      chunk.data,
      absl::MakeSpan(call_.grad).subspan(r.flat_offset + (chunk.offset - r.offset), chunk.length),
      absl::StrCat("push: tensor '", chunk.name, "'"));
  if (s.ok()) next += chunk.length;
  return s;
}

void StreamReactor::Complete() {
  Call call = std::move(call_);
  call_ = Call();
  const StreamCallHeader& h = call.header;
  if (call.error.ok() && h.kind != StreamCall::kPull) {
    for (size_t i = 0; i < call.next.size(); ++i) {
      const SliceRange& r = call.layout->slices[i];
      if (call.next[i] != r.offset + r.length) {
        call.error = absl::InvalidArgumentError(absl::StrCat(
            "push: missing elements [", call.next[i], ", ", r.offset + r.length, ") of tensor '",
            call.layout->spec[r.tensor_index].name, "'"));
        break;
      }
    }
  }
  int64_t version = 0;
  if (call.error.ok() && h.kind != StreamCall::kPull) {
    absl::StatusOr<int64_t> v =
        shard_->PushFlat(h.worker_id, h.version, call.layout, std::move(call.grad));
    if (v.ok()) version = *v;
    call.error = v.status();
  }
  if (!call.error.ok() || h.kind == StreamCall::kPush) {
    core_->Send({EncodeStreamDone(h.call_id, version, call.error)}, /*closes_call=*/true);
    return;
  }
  const uint64_t id = h.call_id;
  std::shared_ptr<Core> core = core_;
  const uint64_t ticket = shard_->Pull(
      h.worker_id, h.min_version, absl::Milliseconds(h.wait_timeout_ms),
      [core, id](absl::StatusOr<WeightsSnapshot> snap) {
        if (!snap.ok()) {
          core->Send({EncodeStreamDone(id, 0, snap.status())}, true);
          return;
        }
        const float* flat = snap->weights->data();
        core->Send(EncodeStreamWeights(
                       id, snap->version, snap->layout->spec, snap->layout->slices,
                       [flat](const SliceRange& r) { return flat + r.flat_offset; },
                       snap->weights),
                   true);
      });
  if (ticket != 0) {
    absl::MutexLock l(&core_->mu);
    if (core_->open_calls > 0) core_->ticket = ticket;
  }
}

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(Shard* shard) {
  return new StreamReactor(shard);
}

}  // namespace ps

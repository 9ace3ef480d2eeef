#include "server/stream_reactor.h"

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "grpcpp/alarm.h"
#include "rpc/raw_wire.h"
#include "rpc/wire.h"

namespace ps {
namespace {

class StreamReactor;

// What the reactor shares with the shard's callbacks and the call alarm,
// which may outlive it: the write queue and the stream's lifecycle.
// `reactor` is null once gRPC is done with the stream; later writes are
// dropped.
struct Core {
  absl::Mutex mu;
  StreamReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  std::deque<grpc::ByteBuffer> queue ABSL_GUARDED_BY(mu);
  bool writing ABSL_GUARDED_BY(mu) = false;     // a StartWrite is in flight
  bool reads_done ABSL_GUARDED_BY(mu) = false;  // no more requests will come
  bool finished ABSL_GUARDED_BY(mu) = false;    // Finish was called
  bool broken ABSL_GUARDED_BY(mu) = false;      // failed, cancelled or a write failed
  absl::Status final_status ABSL_GUARDED_BY(mu);
  bool call_open ABSL_GUARDED_BY(mu) = false;  // a call is started and not yet answered
  uint64_t ticket ABSL_GUARDED_BY(mu) = 0;     // the shard wait of the open call
  // Fires call_timeout after a call's first message unless its last came.
  std::unique_ptr<grpc::Alarm> alarm ABSL_GUARDED_BY(mu);
  uint64_t receiving ABSL_GUARDED_BY(mu) = 0;  // id of the call still being received

  // Queues a call's responses; `closes_call` when they are its last.
  void Send(std::vector<grpc::ByteBuffer> messages, bool closes_call);
  void WriteDone(bool ok);
  // No more reads; a non-OK status ends the stream with it.
  void ReadsDone(absl::Status status);
  // Ends the stream with `status` (once the write in flight, if any, is done).
  void Fail(absl::Status status);
  // The alarm of call `id` fired.
  void CallTimedOut(uint64_t id, absl::Duration timeout);
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
  StreamReactor(Shard* shard, absl::Duration call_timeout)
      : shard_(shard), call_timeout_(call_timeout), core_(std::make_shared<Core>()) {
    {
      absl::MutexLock l(&core_->mu);
      core_->reactor = this;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    absl::Status s;
    try {
      s = ok ? Handle() : ClientClosed();
    } catch (...) {
      s = StatusFromCurrentException(absl::StrCat("stream to shard ", shard_->options().shard_id));
    }
    in_.Clear();
    if (!ok || !s.ok()) {
      // The stream is over: the client closed it, or it is unusable
      // (malformed framing, call protocol, out of memory).
      call_ = Call();  // frees the gradient buffer
      StopAlarm();
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
    StopAlarm();
    uint64_t ticket;
    {
      absl::MutexLock l(&core_->mu);
      core_->reactor = nullptr;
      ticket = core_->ticket;
    }
    // A stream that ended with a pull still waiting (it failed, or the client
    // left): drop the wait; its answer would go nowhere.
    if (ticket != 0) shard_->CancelWait(ticket);
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
    std::optional<SliceAssembler> assembler;  // push kinds, once the header checked out
    PushBuffer grad;  // taken once the first chunk checked out
    bool have_grad = false;
  };

  absl::Status Handle();
  absl::Status ClientClosed();
  absl::Status Receive(const RawTensorSlice& chunk);
  void Complete();
  void StartAlarm(uint64_t id);
  void StopAlarm();

  Shard* const shard_;
  const absl::Duration call_timeout_;
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
  if (!writing && (broken || (reads_done && !call_open && queue.empty()))) {
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
      call_open = false;
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
      if (final_status.ok()) final_status = status;
      broken = true;
    }
    a = NextLocked();
  }
  Run(a);
}

void Core::Fail(absl::Status status) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    if (final_status.ok()) final_status = std::move(status);
    broken = true;
    a = NextLocked();
  }
  Run(a);
}

void Core::CallTimedOut(uint64_t id, absl::Duration timeout) {
  {
    absl::MutexLock l(&mu);
    if (receiving != id) return;  // it arrived in full meanwhile
  }
  // Finishing with a read outstanding is allowed: the read then fails, and
  // the read path frees the call.
  Fail(absl::DeadlineExceededError(absl::StrCat(
      "stream call ", id, " did not arrive in full within ", absl::FormatDuration(timeout),
      " (--call_timeout); the stream is closed")));
}

void StreamReactor::StartAlarm(uint64_t id) {
  if (call_timeout_ <= absl::ZeroDuration()) return;
  auto alarm = std::make_unique<grpc::Alarm>();
  std::shared_ptr<Core> core = core_;
  const absl::Duration timeout = call_timeout_;
  grpc::Alarm* a = alarm.get();
  {
    absl::MutexLock l(&core_->mu);
    core_->receiving = id;
    core_->alarm = std::move(alarm);
  }
  // The alarm is owned by the core, which the callback keeps alive.
  a->Set(absl::ToChronoTime(absl::Now() + timeout), [core, id, timeout](bool fired) {
    if (fired) core->CallTimedOut(id, timeout);
  });
}

void StreamReactor::StopAlarm() {
  std::unique_ptr<grpc::Alarm> alarm;
  {
    absl::MutexLock l(&core_->mu);
    core_->receiving = 0;
    alarm = std::move(core_->alarm);
  }
  if (alarm != nullptr) alarm->Cancel();  // outside the lock: may run the callback
}

absl::Status StreamReactor::ClientClosed() {
  if (!call_.open) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the client closed its stream in the middle of call ", call_.header.call_id,
      " (its last message never came)"));
}

absl::Status StreamReactor::Handle() {
  ReceivedBytes bytes;
  RawStreamRequest req;
  RETURN_IF_ERROR(ps::Receive(in_, &bytes));
  RETURN_IF_ERROR(DecodeStreamRequest(bytes.pieces, &req));
  if (!call_.open) {
    // A new call.
    if (req.header.call_id == 0) {
      return absl::InvalidArgumentError("stream call_id must be > 0");
    }
    {
      absl::MutexLock l(&core_->mu);
      if (core_->call_open) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stream call ", req.header.call_id,
            " started before the previous call was answered; a stream runs one call at a time"));
      }
      core_->call_open = true;
    }
    call_ = Call();
    call_.open = true;
    call_.header = req.header;
    if (req.header.kind != StreamCall::kPull) {
      absl::StatusOr<SliceAssembler> a = shard_->StartPush(req.header.worker_id, req.header.version);
      if (a.ok()) {
        call_.assembler.emplace(*std::move(a));
      } else {
        call_.error = a.status();
      }
    }
    if (!req.last) StartAlarm(req.header.call_id);
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
  if (!call_.error.ok()) {
    call_.grad = PushBuffer();  // the call is lost; free its buffer now
    call_.have_grad = false;
  }
  if (req.last) {
    StopAlarm();
    Complete();
  }
  return absl::OkStatus();
}

absl::Status StreamReactor::Receive(const RawTensorSlice& chunk) {
  return call_.assembler->Add(chunk, [this](const SliceRange& r) -> absl::StatusOr<float*> {
    if (!call_.have_grad) {
      ASSIGN_OR_RETURN(call_.grad, shard_->TakePushBuffer(*call_.assembler));
      call_.have_grad = true;
    }
    return call_.grad.data() + r.flat_offset;
  });
}

void StreamReactor::Complete() {
  Call call = std::move(call_);
  call_ = Call();
  const StreamCallHeader& h = call.header;
  int64_t version = 0;
  if (call.error.ok() && h.kind != StreamCall::kPull) {
    call.error = call.assembler->Finish();
    if (call.error.ok() && !call.have_grad) {
      // Nothing to receive: this shard owns no elements.
      absl::StatusOr<PushBuffer> b = shard_->TakePushBuffer(*call.assembler);
      if (b.ok()) call.grad = *std::move(b);
      call.error = b.status();
    }
    if (call.error.ok()) {
      absl::StatusOr<int64_t> v =
          shard_->PushFlat(h.worker_id, h.version, *call.assembler, std::move(call.grad));
      if (v.ok()) version = *v;
      call.error = v.status();
    }
  }
  if (!call.error.ok() || h.kind == StreamCall::kPush) {
    core_->Send({EncodeStreamDone(h.call_id, version, call.error)}, /*closes_call=*/true);
    return;
  }
  const uint64_t id = h.call_id;
  const int shard_id = shard_->options().shard_id;
  std::shared_ptr<Core> core = core_;
  const uint64_t ticket = shard_->Pull(
      h.worker_id, h.min_version, absl::Milliseconds(h.wait_timeout_ms),
      [core, id, shard_id](absl::StatusOr<WeightsSnapshot> snap) {
        try {
          if (!snap.ok()) {
            core->Send({EncodeStreamDone(id, 0, snap.status())}, true);
            return;
          }
          core->Send(EncodeStreamWeights(id, snap->version, snap->layout->spec,
                                         snap->layout->slices, FlatValues(snap->weights->data()),
                                         snap->weights),
                     true);
        } catch (...) {
          core->Fail(StatusFromCurrentException(absl::StrCat("pull from shard ", shard_id)));
        }
      });
  if (ticket != 0) {
    absl::MutexLock l(&core_->mu);
    if (core_->call_open) core_->ticket = ticket;
  }
}

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    Shard* shard, absl::Duration call_timeout) {
  return new StreamReactor(shard, call_timeout);
}

}  // namespace ps

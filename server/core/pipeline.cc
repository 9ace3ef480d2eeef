#include "server/core/pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_spec.h"

namespace ps {

void CallWait::Started(uint64_t ticket) {
  bool cancelled;
  {
    absl::MutexLock l(&mu_);
    ticket_ = ticket;
    cancelled = cancelled_;
  }
  // Unlocked: cancelling runs the call's callback.
  if (cancelled && ticket != 0) shard_->CancelWait(ticket);
}

void CallWait::Finished() {
  absl::MutexLock l(&mu_);
  ticket_ = 0;
}

void CallWait::Cancel() {
  uint64_t ticket;
  {
    absl::MutexLock l(&mu_);
    cancelled_ = true;
    ticket = ticket_;
  }
  if (ticket != 0) shard_->CancelWait(ticket);
}

ShardCall::ShardCall(Shard* shard, std::optional<PushArgs> push, std::optional<PullArgs> pull)
    : shard_(shard), pull_(pull) {
  if (!push.has_value()) return;
  seq_ = push->seq;
  absl::StatusOr<GradientAssembly> a = shard_->StartPush(push->worker_id, push->version);
  if (a.ok()) {
    push_.emplace(*std::move(a));
  } else {
    error_ = a.status();
  }
}

namespace {

int64_t PayloadBytes(const RawTensorSlice& chunk) {
  int64_t n = 0;
  for (absl::string_view piece : chunk.data) n += static_cast<int64_t>(piece.size());
  return n;
}

}  // namespace

void ShardCall::AddChunk(const RawTensorSlice& chunk) {
  shard_->mutable_metrics().bytes_received.Add(PayloadBytes(chunk));
  if (!error_.ok()) return;
  if (!push_.has_value()) {
    error_ = absl::InvalidArgumentError("a pull call carries no gradients");
    return;
  }
  error_ = push_->Add(chunk);
  if (!error_.ok()) push_.reset();  // the call is lost; free its buffer now
}

void ShardCall::AddMessage(const std::vector<RawTensorSlice>& chunks) {
  int64_t bytes = 0;
  for (const RawTensorSlice& chunk : chunks) bytes += PayloadBytes(chunk);
  shard_->mutable_metrics().bytes_received.Add(bytes);
  if (!error_.ok() || !push_.has_value()) return;
  error_ = push_->AddMessage(chunks);
  if (!error_.ok()) push_.reset();
}

void ShardCall::Complete(CallWait* wait, Done done) && {
  CallResult result;
  result.incarnation = shard_->incarnation();
  if (error_.ok() && push_.has_value()) {
    absl::StatusOr<AssembledGradient> grad = std::move(*push_).Finish();
    push_.reset();
    absl::StatusOr<PushResult> pushed =
        grad.ok() ? shard_->Push(*std::move(grad), seq_) : absl::StatusOr<PushResult>(grad.status());
    if (pushed.ok()) {
      result.version = pushed->version;
      result.outcome = pushed->outcome;
    }
    error_ = pushed.status();
  }
  if (!error_.ok()) return done(error_);
  if (!pull_.has_value()) return done(std::move(result));
  ShardMetrics* metrics = &shard_->mutable_metrics();
  const int64_t bytes_per_element = IsKnownWireDtype(pull_->weights_dtype)
                                         ? static_cast<int64_t>(WireDtypeBytes(pull_->weights_dtype))
                                         : 4;
  const uint64_t ticket = shard_->Pull(
      pull_->worker_id, pull_->min_version, pull_->wait,
      [done = std::move(done), result, metrics,
       bytes_per_element](absl::StatusOr<WeightsSnapshot> snap) mutable {
        if (!snap.ok()) return done(snap.status());
        if (snap->weights != nullptr) {
          metrics->bytes_sent.Add(static_cast<int64_t>(snap->weights->size()) * bytes_per_element);
        }
        result.version = snap->version;
        result.weights = *std::move(snap);
        done(std::move(result));
      },
      pull_->renews_lease);
  if (wait != nullptr) wait->Started(ticket);
}

absl::StatusOr<RowGradientFloats> RowGradients(absl::string_view table, const Pieces& bytes) {
  const size_t size = PiecesSize(bytes);
  if (size % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("embedding table \"", EscapeName(table),
                                                   "\": gradients of ", size,
                                                   " bytes, not whole float32s"));
  }
  RowGradientFloats grads;
  const size_t n = size / sizeof(float);
  if (bytes.size() == 1 && reinterpret_cast<uintptr_t>(bytes[0].data()) % alignof(float) == 0) {
    grads.view_ = absl::MakeConstSpan(reinterpret_cast<const float*>(bytes[0].data()), n);
    return grads;
  }
  grads.copy_.reset(new float[n]);
  CopyPieces(bytes, grads.copy_.get());
  grads.view_ = absl::MakeConstSpan(grads.copy_.get(), n);
  return grads;
}

}  // namespace ps

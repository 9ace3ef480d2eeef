#include "client/push_pull_in_progress.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/internal/shard_transport.h"
#include "client/internal/tensor_checks.h"

namespace ps {

PushPullInProgress::PushPullInProgress(const ModelSpec* spec, const TensorList* grads,
                                       std::unique_ptr<LayerwisePushPull> calls, absl::Status error,
                                       Retry retry)
    : spec_(spec),
      grads_(grads),
      retry_(std::move(retry)),
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
    } else {
      error_ = CheckTensor(spec[i], (*grads_)[i]);
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
  return retry_(std::move(s));
}

}  // namespace ps

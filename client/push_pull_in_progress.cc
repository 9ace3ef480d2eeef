#include "client/push_pull_in_progress.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/internal/shard_transport.h"
#include "client/internal/tensor_checks.h"

namespace ps {

PushPullInProgress::PushPullInProgress(const ModelSpec* spec, const TensorList* list)
    : spec_(spec),
      list_(list),
      grads_(spec->size()),
      sent_(spec->size(), false),
      remaining_(static_cast<int>(spec->size())) {}

PushPullInProgress::~PushPullInProgress() = default;  // calls_'s destructor waits

absl::Status PushPullInProgress::Mark(int index, absl::Span<const float> values,
                                      std::vector<bool>* now) {
  const ModelSpec& spec = *spec_;
  if (index < 0 || index >= static_cast<int>(spec.size()) || sent_[index]) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", index, " sent twice or unknown"));
  }
  if (absl::Status s = CheckTensor(spec[index], values.size()); !s.ok()) return s;
  grads_[index] = values;
  (*now)[index] = true;
  sent_[index] = true;
  --remaining_;
  return absl::OkStatus();
}

void PushPullInProgress::SendMarked(const std::vector<bool>& now) {
  if (!error_.ok()) {
    calls_.reset();  // cancels the calls
    return;
  }
  calls_->Send(now, /*last=*/remaining_ == 0);
}

void PushPullInProgress::Send(const std::vector<int>& indices) {
  if (!error_.ok()) return;
  std::vector<bool> now(spec_->size(), false);
  if (list_ == nullptr) {
    error_ = absl::FailedPreconditionError(
        "Send(indices) needs a push-pull started from a TensorList; give the values");
  }
  for (size_t k = 0; error_.ok() && k < indices.size(); ++k) {
    const int i = indices[k];
    const bool known = i >= 0 && i < static_cast<int>(list_->size());
    error_ = Mark(i, known ? absl::MakeConstSpan((*list_)[i]) : absl::Span<const float>(), &now);
  }
  SendMarked(now);
}

void PushPullInProgress::Send(int index, absl::Span<const float> values) {
  if (!error_.ok()) return;
  std::vector<bool> now(spec_->size(), false);
  error_ = Mark(index, values, &now);
  SendMarked(now);
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
  return retry_(std::move(s), grads_);
}

}  // namespace ps

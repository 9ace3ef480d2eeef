// PushPullInProgress: a push-pull whose gradient is sent tensor by tensor as
// it becomes final (layer by layer during backward), so that communication
// overlaps the rest of the backward pass. PsClient::StartPushPull
// (client/ps_client.h) makes one. Send every tensor exactly once, in any
// order; the new weights arrive once the last was sent. A tensor's values
// are read when it is sent, and again if the push-pull is retried, so they
// must stay alive and unchanged until Wait() returns (as must the weights).
// With the unary transport everything is sent with the last tensor. A
// push-pull that fails once every tensor was sent is retried as PsClient's
// calls are (ClientOptions::retry_timeout), all at once.
//
// Thread safety: one thread at a time, like the PsClient that made it,
// which must outlive it. The destructor waits for the calls (cancelling
// them if Wait() was not called).
#ifndef PS_CLIENT_PUSH_PULL_IN_PROGRESS_H_
#define PS_CLIENT_PUSH_PULL_IN_PROGRESS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model_spec.h"

namespace ps {

class LayerwisePushPull;
class PsClient;

class PushPullInProgress {
 public:
  ~PushPullInProgress();  // waits (cancelling if need be)
  PushPullInProgress(const PushPullInProgress&) = delete;
  PushPullInProgress& operator=(const PushPullInProgress&) = delete;

  // Sends tensors `indices` (into the model spec) of the TensorList the
  // push-pull started from.
  void Send(const std::vector<int>& indices);
  // Sends tensor `index` from `values` (views of the caller's memory).
  void Send(int index, absl::Span<const float> values);
  // After the last Send: the result of the push-pull. A bad Send (a tensor
  // unknown, sent twice or of the wrong size) makes it INVALID_ARGUMENT and
  // cancels the push-pull.
  absl::Status Wait();

 private:
  friend class PsClient;  // makes them
  // Retries, with the gradient `grads`, a push-pull that failed with the
  // given status; returns the last.
  using Retry = std::function<absl::Status(absl::Status, const ConstTensorViews& grads)>;
  // `spec` is borrowed; `list` (null for views) too. PsClient then sets
  // calls_ and retry_, or error_.
  PushPullInProgress(const ModelSpec* spec, const TensorList* list);

  // Marks tensor `index`, read from `values`, for the next batch `now`.
  absl::Status Mark(int index, absl::Span<const float> values, std::vector<bool>* now);
  // Hands the batch `now` to the calls.
  void SendMarked(const std::vector<bool>& now);

  const ModelSpec* const spec_;  // not owned
  const TensorList* const list_;  // not owned; null when sent from views
  ConstTensorViews grads_;        // by tensor: its values once sent
  std::vector<bool> sent_;        // by tensor
  int remaining_;                 // tensors not sent yet
  absl::Status error_;            // a bad Send, or a failed start
  Retry retry_;
  std::unique_ptr<LayerwisePushPull> calls_;  // reset (cancelled) on error
};

}  // namespace ps

#endif  // PS_CLIENT_PUSH_PULL_IN_PROGRESS_H_

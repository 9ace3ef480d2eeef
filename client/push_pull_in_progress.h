// PushPullInProgress: a push-pull whose gradient is sent tensor by tensor as
// it becomes final (layer by layer during backward), so that communication
// overlaps the rest of the backward pass. PsClient::StartPushPull
// (client/ps_client.h) makes one. Send() every tensor exactly once, in any
// order; the new weights arrive once the last was sent. `grads` (and the
// weights) must stay alive until Wait() returns, and a tensor must not
// change once sent. With the unary transport everything is sent with the
// last tensor. A push-pull that fails once every tensor was sent is retried
// as PsClient's calls are (ClientOptions::retry_timeout), all at once.
//
// Thread safety: one thread, like the PsClient that made it, which must
// outlive it. The destructor waits for the calls (cancelling them if Wait()
// was not called).
#ifndef PS_CLIENT_PUSH_PULL_IN_PROGRESS_H_
#define PS_CLIENT_PUSH_PULL_IN_PROGRESS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/model_spec.h"

namespace ps {

class LayerwisePushPull;
class PsClient;

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
  friend class PsClient;  // makes them
  // Retries a push-pull that failed with the given status; returns the last.
  using Retry = std::function<absl::Status(absl::Status)>;
  // `spec` is borrowed; `calls` is the transport's half, null when `error`
  // is not OK.
  PushPullInProgress(const ModelSpec* spec, const TensorList* grads,
                     std::unique_ptr<LayerwisePushPull> calls, absl::Status error, Retry retry);

  const ModelSpec* const spec_;  // not owned
  const TensorList* const grads_;
  const Retry retry_;
  std::vector<bool> sent_;                    // by tensor
  int remaining_;                             // tensors not sent yet
  absl::Status error_;                        // a bad Send, or a failed start
  std::unique_ptr<LayerwisePushPull> calls_;  // reset (cancelled) on error
};

}  // namespace ps

#endif  // PS_CLIENT_PUSH_PULL_IN_PROGRESS_H_

// ParamStore: where a trainer gets weights and sends gradients.
//
// RemoteParamStore talks to the parameter servers through a PsClient.
// LocalParamStore applies the update in-process with the optimizer code the
// servers use (common/optimizer.h), passing the version it produces as the
// step (standalone mode: debugging a model before distributing it, and the
// single-process reference that sync mode must equal). Not thread-safe.
#ifndef PS_WORKER_PARAM_STORE_H_
#define PS_WORKER_PARAM_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "client/ps_client.h"
#include "common/mode.h"
#include "common/model_spec.h"
#include "common/optimizer.h"

namespace ps {

class ParamStore {
 public:
  virtual ~ParamStore() = default;

  // Creates the parameters from `initial` (when `creator`) or joins the ones
  // the creator made; then `weights` holds the current weights.
  virtual absl::Status Init(const ModelSpec& spec, const TensorList& initial, bool creator,
                            TensorList* weights) = 0;
  // Sends this step's gradient and returns the weights for the next step.
  virtual absl::Status PushPull(const TensorList& grads, TensorList* weights) = 0;
  // PushPull with the gradient sent tensor by tensor as backward makes each
  // final: BeginPushPull, then SendGradients for every tensor exactly once
  // (`grads` must not change once a tensor was sent), then FinishPushPull,
  // which leaves the next weights in `weights`. `weights` is not written
  // before FinishPushPull, so the step may read it throughout; its vectors
  // may be exchanged for others of the same sizes (their data moves).
  virtual absl::Status BeginPushPull(const TensorList* grads, TensorList* weights) = 0;
  virtual void SendGradients(const std::vector<int>& tensors) = 0;
  virtual absl::Status FinishPushPull() = 0;

  // Refreshes `weights` once every shard is at version >= min_version
  // (waiting as long as the store allows).
  virtual absl::Status Pull(int64_t min_version, TensorList* weights) = 0;
  // Version of the weights last returned.
  virtual int64_t version() const = 0;
  // Sync: how many shards dropped the last push (its step had closed
  // without it), of num_shards().
  virtual int DroppedShards() const { return 0; }
  virtual int num_shards() const { return 1; }
  // The client's retries and recoveries so far (PsClient::retries()).
  virtual int64_t retries() const { return 0; }
  virtual int64_t recoveries() const { return 0; }
  // The servers' consistency mode; nullopt for a store without servers
  // (LocalParamStore).
  virtual std::optional<Mode> mode() const = 0;
  // ModeName(*mode()), or "standalone" without servers: for logs.
  std::string mode_name() const;
};

class RemoteParamStore final : public ParamStore {
 public:
  explicit RemoteParamStore(std::unique_ptr<PsClient> client) : client_(std::move(client)) {}
  absl::Status Init(const ModelSpec& spec, const TensorList& initial, bool creator,
                    TensorList* weights) override;
  absl::Status PushPull(const TensorList& grads, TensorList* weights) override;
  absl::Status Pull(int64_t min_version, TensorList* weights) override {
    return client_->Pull(min_version, weights);
  }
  absl::Status BeginPushPull(const TensorList* grads, TensorList* weights) override;
  void SendGradients(const std::vector<int>& tensors) override;
  absl::Status FinishPushPull() override;
  int64_t version() const override { return client_->version(); }
  int DroppedShards() const override;
  int num_shards() const override { return client_->num_shards(); }
  int64_t retries() const override { return client_->retries(); }
  int64_t recoveries() const override { return client_->recoveries(); }
  std::optional<Mode> mode() const override { return client_->mode(); }

 private:
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<PushPullInProgress> in_progress_;
  // Between Begin and Finish: the caller's weights, and where the pull lands
  // meanwhile (swapped into them by Finish: two buffers, no copy).
  TensorList* pending_weights_ = nullptr;
  TensorList incoming_;
};

class LocalParamStore final : public ParamStore {
 public:
  explicit LocalParamStore(OptimizerOptions options) : options_(std::move(options)) {}
  absl::Status Init(const ModelSpec& spec, const TensorList& initial, bool creator,
                    TensorList* weights) override;
  absl::Status PushPull(const TensorList& grads, TensorList* weights) override;
  // The caller's weights are the store's: nothing to refresh.
  absl::Status Pull(int64_t /*min_version*/, TensorList* /*weights*/) override {
    return absl::OkStatus();
  }
  // Applies everything at Finish: there is no communication to overlap.
  absl::Status BeginPushPull(const TensorList* grads, TensorList* weights) override;
  void SendGradients(const std::vector<int>& /*tensors*/) override {}
  absl::Status FinishPushPull() override;
  int64_t version() const override { return version_; }
  std::optional<Mode> mode() const override { return std::nullopt; }

 private:
  const OptimizerOptions options_;
  const TensorList* pending_grads_ = nullptr;  // between Begin and Finish
  TensorList* pending_weights_ = nullptr;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // one per tensor
  int64_t version_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_PARAM_STORE_H_

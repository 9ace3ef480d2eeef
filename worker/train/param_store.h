// ParamStore: where a workload (worker/train/workload.h) gets its weights and
// embedding rows and sends their gradients.
//
// RemoteParamStore talks to the parameter servers through a PsClient, which
// it owns. LocalParamStore applies the updates in-process with the code the
// servers use (common/optimizer.h for the dense tensors, one optimizer per
// tensor; common/sparse_optimizer.h for the rows, in LocalEmbeddingTables),
// passing the version it produces as the step: standalone mode, for
// debugging a model before distributing it, and the single-process
// reference that sync mode must equal.
//
// The rows follow PsClient's rules (client/ps_client.h, docs/embeddings.md):
// declare the tables before Init; in a step, pull the batch's rows, then
// push their gradients at most once per table, then the dense PushPull.
//
// Not thread-safe: one training thread. ConnectParamStore picks the kind.
#ifndef PS_WORKER_TRAIN_PARAM_STORE_H_
#define PS_WORKER_TRAIN_PARAM_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/ps_client.h"
#include "common/mode.h"
#include "common/model_spec.h"
#include "common/optimizer.h"
#include "common/sparse_optimizer.h"
#include "common/table_spec.h"
#include "worker/train/local_table.h"

namespace ps {

class ParamStore {
 public:
  virtual ~ParamStore() = default;

  // Declares the model's embedding tables; before Init, on every worker.
  virtual absl::Status DeclareTables(const std::vector<TableSpec>& tables) = 0;
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

  // rows[i * dim, (i + 1) * dim) = the row of ids[i] (any order, repeats
  // allowed). REQUIRES: rows.size() == ids.size() * the table's dim.
  virtual absl::Status PullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                                absl::Span<float> rows) = 0;
  // A hint: `ids` are those of a pull to come (the next batch's), so that
  // a store with rows on disk can bring them into memory meanwhile.
  // Changes nothing a pull answers. Default: nothing.
  virtual absl::Status PrefetchRows(absl::string_view /*table*/,
                                    absl::Span<const uint64_t> /*ids*/) {
    return absl::OkStatus();
  }
  // Applies one gradient row per id; the rows of a repeated id are summed.
  virtual absl::Status PushRows(absl::string_view table, absl::Span<const uint64_t> ids,
                                absl::Span<const float> grads) = 0;

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
  absl::Status DeclareTables(const std::vector<TableSpec>& tables) override {
    return client_->DeclareTables(tables);
  }
  absl::Status Init(const ModelSpec& spec, const TensorList& initial, bool creator,
                    TensorList* weights) override;
  absl::Status PushPull(const TensorList& grads, TensorList* weights) override;
  absl::Status BeginPushPull(const TensorList* grads, TensorList* weights) override;
  void SendGradients(const std::vector<int>& tensors) override;
  absl::Status FinishPushPull() override;
  absl::Status PullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        absl::Span<float> rows) override {
    return client_->PullRows(table, ids, rows);
  }
  absl::Status PrefetchRows(absl::string_view table, absl::Span<const uint64_t> ids) override {
    return client_->PrefetchRows(table, ids);
  }
  absl::Status PushRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        absl::Span<const float> grads) override {
    return client_->PushRows(table, ids, grads);
  }
  absl::Status Pull(int64_t min_version, TensorList* weights) override {
    return client_->Pull(min_version, weights);
  }
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

// How LocalParamStore updates: the dense tensors' optimizer (with its
// schedule) and the rows' sparse optimizer.
struct LocalStoreOptions {
  OptimizerOptions dense;
  SparseOptimizerOptions rows;
  // INVALID_ARGUMENT naming the flag (ps_worker's --optimizer and --lr for
  // dense; the rows' fields) otherwise.
  absl::Status Validate() const;
};

class LocalParamStore final : public ParamStore {
 public:
  explicit LocalParamStore(LocalStoreOptions options) : options_(std::move(options)) {}
  // One LocalEmbeddingTable per table, with options().rows as its rule.
  absl::Status DeclareTables(const std::vector<TableSpec>& tables) override;
  absl::Status Init(const ModelSpec& spec, const TensorList& initial, bool creator,
                    TensorList* weights) override;
  absl::Status PushPull(const TensorList& grads, TensorList* weights) override;
  // Applies everything at Finish: there is no communication to overlap.
  absl::Status BeginPushPull(const TensorList* grads, TensorList* weights) override;
  void SendGradients(const std::vector<int>& /*tensors*/) override {}
  absl::Status FinishPushPull() override;
  // A row is stored from its first push: a pull of an id never pushed gets
  // its initial values (InitRow), as the servers' first pull creates them.
  absl::Status PullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        absl::Span<float> rows) override;
  absl::Status PushRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        absl::Span<const float> grads) override;
  // The caller's weights are the store's: nothing to refresh.
  absl::Status Pull(int64_t /*min_version*/, TensorList* /*weights*/) override {
    return absl::OkStatus();
  }
  int64_t version() const override { return version_; }
  std::optional<Mode> mode() const override { return std::nullopt; }

  // Rows stored in `table` (0 for an unknown table).
  size_t rows(absl::string_view table) const;

 private:
  absl::StatusOr<LocalEmbeddingTable*> Table(absl::string_view name, size_t floats, size_t ids);

  const LocalStoreOptions options_;
  const TensorList* pending_grads_ = nullptr;  // between Begin and Finish
  TensorList* pending_weights_ = nullptr;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // one per tensor
  std::map<std::string, LocalEmbeddingTable, std::less<>> tables_;
  int64_t version_ = 0;
};

// `client`: connects to its servers (RemoteParamStore); nullptr: a
// LocalParamStore with `standalone` (validated here). Errors: the
// connection's, the options'.
absl::StatusOr<std::unique_ptr<ParamStore>> ConnectParamStore(const ClientOptions* client,
                                                              const LocalStoreOptions& standalone);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_PARAM_STORE_H_

// CtrRemoteTrainer: trains a CtrModel (worker/ctr_model.h) with its
// embedding rows and its MLP on the parameter servers: what
// CtrLocalTrainer (worker/ctr_local_trainer.h) does in one process.
//
// One table, kCtrTableName, holds the rows of all 26 features (the ids
// carry the feature in their top 12 bits, worker/ctr_data.h). The MLP's
// tensors are the servers' dense model. The servers apply both updates: the
// dense one with ps_server's --optimizer and --lr, the rows' with its
// --sparse_optimizer and --sparse_lr (server/core/sparse_tables.h).
//
// Step(batch), the sync protocol of client/ps_client.h: PullRows of the
// batch's unique ids (the weights of this step are those the last PushPull
// returned), Forward, mean sigmoid cross-entropy, Backward, PushRows of the
// rows' summed gradients, then PushPull of the MLP's gradients, which
// leaves the next step's weights in the model. Async: the same calls, each
// applied on arrival.
//
// Borrows the client, which must outlive the trainer. Thread-compatible:
// one call at a time (the client's training thread).
#ifndef PS_WORKER_CTR_REMOTE_TRAINER_H_
#define PS_WORKER_CTR_REMOTE_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/ps_client.h"
#include "common/table_spec.h"
#include "worker/ctr_model.h"

namespace ps {

inline constexpr char kCtrTableName[] = "ctr";

struct CtrRemoteTrainerOptions {
  CtrModelConfig model;  // model.dim is also the table's dim
  uint64_t table_seed = 1;   // the rows' initial values (InitRow)
  float init_scale = 0.01f;  // new rows uniform in +-init_scale
  bool creator = false;      // worker 0: creates the dense parameters
};

class CtrRemoteTrainer {
 public:
  // Declares the table, creates (creator) or joins the dense parameters and
  // pulls them. Errors: the options' validation, the client's.
  static absl::StatusOr<std::unique_ptr<CtrRemoteTrainer>> Create(
      const CtrRemoteTrainerOptions& options, PsClient* client);

  CtrRemoteTrainer(const CtrRemoteTrainer&) = delete;
  CtrRemoteTrainer& operator=(const CtrRemoteTrainer&) = delete;

  // One step on `batch` (non-empty); returns its mean loss before the update.
  absl::StatusOr<double> Step(absl::Span<const CtrExample> batch);
  // Click probabilities of `batch` with the weights held and the servers'
  // current rows, appended to *probs. (Pulling rows creates the unknown
  // ones on the servers, with their initial values.)
  absl::Status Predict(absl::Span<const CtrExample> batch, std::vector<float>* probs);
  // Refreshes the dense weights once every shard is at min_version (async:
  // worker 0 waits for every worker's pushes before evaluating).
  absl::Status PullWeights(int64_t min_version);

  const CtrModel& model() const { return model_; }
  int64_t steps() const { return step_; }
  PsClient* client() const { return client_; }

 private:
  CtrRemoteTrainer(CtrModel model, PsClient* client);
  RowLookup Lookup();

  CtrModel model_;
  PsClient* const client_;  // not owned
  int64_t step_ = 0;
  CtrActivations acts_;  // reused across calls
  CtrGradients grads_;
  std::vector<float> labels_, dlogits_;
};

}  // namespace ps

#endif  // PS_WORKER_CTR_REMOTE_TRAINER_H_

// CtrTrainer: trains a CtrModel (worker/ctr/model.h) through a ParamStore
// (worker/train/param_store.h): on the parameter servers (RemoteParamStore), or in
// one process (LocalParamStore with CtrStandaloneStore's rules).
//
// One table, kCtrTableName, holds the rows of all 26 features (the ids
// carry the feature in their top 12 bits, worker/ctr/data.h). The MLP's
// tensors are the store's dense model. The store applies both updates: on
// the servers, the dense one with ps_server's --optimizer and --lr and the
// rows' with its --sparse_optimizer and --sparse_lr
// (server/core/sparse_tables.h).
//
// A step, in the two halves the run loop times (worker/train/workload.h), follows
// the sync protocol of client/ps_client.h:
//   Compute   PullRows of the batch's unique ids (the weights of this step
//             are those the last PushPull returned), Forward, mean sigmoid
//             cross-entropy, Backward;
//   Exchange  PushRows of the rows' summed gradients, then PushPull of the
//             MLP's, which leaves the next step's weights in the model.
// Async: the same calls, each applied on arrival.
//
// Borrows the store, which must outlive the trainer. Thread-compatible: one
// call at a time (the training thread).
#ifndef PS_WORKER_CTR_TRAINER_H_
#define PS_WORKER_CTR_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/ctr/data.h"
#include "worker/ctr/model.h"
#include "worker/train/param_store.h"

namespace ps {

inline constexpr char kCtrTableName[] = "ctr";

// A standalone run's in-process rules: Adam at `dense_lr` for the MLP,
// AdaGrad at `sparse_lr` for the rows (what the servers run this model
// with: docs/embeddings.md).
LocalStoreOptions CtrStandaloneStore(double dense_lr = 1e-3, float sparse_lr = 0.05f);

struct CtrTrainerOptions {
  CtrModelConfig model;      // model.dim is also the table's dim
  uint64_t table_seed = 1;   // the rows' initial values (InitRow)
  float init_scale = 0.01f;  // new rows uniform in +-init_scale
  bool creator = false;      // worker 0: creates the dense parameters
};

class CtrTrainer {
 public:
  // Declares the table, creates (creator) or joins the dense parameters and
  // pulls them. Errors: the options' validation, the store's.
  static absl::StatusOr<std::unique_ptr<CtrTrainer>> Create(const CtrTrainerOptions& options,
                                                            ParamStore* store);

  CtrTrainer(const CtrTrainer&) = delete;
  CtrTrainer& operator=(const CtrTrainer&) = delete;

  // The first half of a step on `batch` (non-empty): returns its mean loss
  // before the update. With `next` (the next step's batch), its ids are
  // named to the store (ParamStore::PrefetchRows) right after this batch's
  // rows are pulled, so that they come back from disk while this one
  // computes.
  absl::StatusOr<double> Compute(absl::Span<const CtrExample> batch,
                                 absl::Span<const CtrExample> next = {});
  // The second half. REQUIRES: a successful Compute before it.
  absl::Status Exchange();
  // Both halves.
  absl::StatusOr<double> Step(absl::Span<const CtrExample> batch);

  // Click probabilities of `batch` with the weights held and the store's
  // current rows, appended to *probs. (On the servers, pulling rows creates
  // the unknown ones, with their initial values.)
  absl::Status Predict(absl::Span<const CtrExample> batch, std::vector<float>* probs);

  const CtrModel& model() const { return model_; }
  TensorList* weights() { return model_.mutable_params(); }

 private:
  CtrTrainer(CtrModel model, ParamStore* store);
  RowLookup Lookup(absl::Span<const CtrExample> next);

  CtrModel model_;
  ParamStore* const store_;  // not owned
  CtrActivations acts_;      // reused across calls
  CtrGradients grads_;
  std::vector<float> labels_, dlogits_;
  std::vector<uint64_t> next_ids_;  // Compute's prefetch
};

}  // namespace ps

#endif  // PS_WORKER_CTR_TRAINER_H_

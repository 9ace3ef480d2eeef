// CtrModel: the click-through-rate model over CtrExamples (worker/ctr/data.h):
// one embedding row of `dim` floats per categorical id, the 26 rows
// concatenated after the 13 dense features, then an MLP (ReLU hidden layers,
// one output logit).
//
// The model owns only its dense parameters (the MLP's weights and biases),
// listed as a ModelSpec of named tensors so that they can live on the
// parameter servers as dense tensors: "layer<k>/weight" [in, out] row-major
// and "layer<k>/bias" [out], k = 0 .. hidden.size(). The embedding rows are
// not the model's: Forward asks a caller-supplied RowLookup for the rows of
// the batch's unique ids (from a ParamStore: the servers, or in-process), and
// Backward returns the rows' gradients in the shape a push of rows has: the
// unique ids and one summed gradient row per id (an id that occurs several
// times in a batch gets the sum of its occurrences' gradients).
//
// Forward and Backward are plain float math on the calling thread (OpenBLAS
// sgemm for the layers; how many threads OpenBLAS itself uses is the
// caller's business). All per-batch data lives in a caller-owned
// CtrActivations, so one model may serve concurrent Forward/Backward calls
// with distinct activations; mutating params() must not overlap them.
#ifndef PS_WORKER_CTR_MODEL_H_
#define PS_WORKER_CTR_MODEL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "worker/ctr/data.h"

namespace ps {

struct CtrModelConfig {
  int dim = 16;                    // floats per embedding row, in [1, 1024]
  std::vector<int> hidden = {64, 32};  // hidden layer widths, each in [1, 65536]
  uint64_t seed = 1;               // the dense parameters' initialization
  // INVALID_ARGUMENT naming the field and its allowed range.
  absl::Status Validate() const;
};

// Fills rows[i * dim, (i + 1) * dim) with the row of ids[i], for every i;
// an error fails the Forward that asked.
using RowLookup = std::function<absl::Status(absl::Span<const uint64_t> ids, float* rows)>;

// One batch's data between Forward and Backward.
struct CtrActivations {
  int batch = 0;
  std::vector<uint64_t> unique_ids;  // in order of first occurrence
  std::vector<int32_t> slot;         // [batch * 26]: index into unique_ids
  std::vector<float> rows;           // [unique_ids.size() * dim]
  // layers[0]: the input [batch, 13 + 26 * dim]; layers[k], k >= 1: the
  // output of hidden layer k - 1 after ReLU.
  std::vector<std::vector<float>> layers;
  std::vector<float> logits;         // [batch]
};

struct CtrGradients {
  TensorList dense;              // in spec() order and shapes
  std::vector<uint64_t> ids;     // unique, as CtrActivations::unique_ids
  std::vector<float> rows;       // [ids.size() * dim], summed per id
};

class CtrModel {
 public:
  // Initializes the weights uniformly in +-sqrt(6 / (in + out)) (Glorot),
  // deterministically from config.seed (common/embedding_shard.h's InitRow),
  // and the biases to 0. Errors of config.Validate().
  static absl::StatusOr<CtrModel> Create(const CtrModelConfig& config);

  const CtrModelConfig& config() const { return config_; }
  int input_width() const { return kCtrDense + kCtrCategorical * config_.dim; }
  const ModelSpec& spec() const { return spec_; }
  const TensorList& params() const { return params_; }
  TensorList* mutable_params() { return &params_; }

  // Logits of `batch` (non-empty) into acts->logits; keeps what Backward
  // needs in *acts. Errors: the lookup's.
  absl::Status Forward(absl::Span<const CtrExample> batch, const RowLookup& lookup,
                       CtrActivations* acts) const;

  // Gradients of sum_i dlogits[i] * logit_i with respect to the dense
  // parameters and the batch's embedding rows, for the batch of `acts`.
  // REQUIRES: acts from this model's last Forward; dlogits.size() == batch.
  void Backward(const CtrActivations& acts, absl::Span<const float> dlogits,
                CtrGradients* grads) const;

 private:
  CtrModel() = default;
  int num_layers() const { return static_cast<int>(config_.hidden.size()) + 1; }
  int width(int k) const;  // width of layers[k]; k == num_layers(): 1

  CtrModelConfig config_;
  ModelSpec spec_;
  TensorList params_;  // weight, bias of layer 0, then of layer 1, ...
};

// Mean sigmoid cross-entropy of logits against 0/1 labels, computed stably
// in double; writes d(mean loss)/d(logit_i) = (sigmoid(z_i) - y_i) / n to
// *dlogits when it is not null. REQUIRES: equal non-zero sizes.
double SigmoidCrossEntropy(absl::Span<const float> logits, absl::Span<const float> labels,
                           std::vector<float>* dlogits);

float Sigmoid(float logit);

}  // namespace ps

#endif  // PS_WORKER_CTR_MODEL_H_

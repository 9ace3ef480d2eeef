#include "worker/ctr/model.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"

namespace ps {

absl::Status CtrModelConfig::Validate() const {
  if (dim < 1 || dim > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("dim: ", dim, " is not in [1, 1024]"));
  }
  for (size_t i = 0; i < hidden.size(); ++i) {
    if (hidden[i] < 1 || hidden[i] > 65536) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden[", i, "]: ", hidden[i], " is not in [1, 65536]"));
    }
  }
  return absl::OkStatus();
}

int CtrModel::width(int k) const {
  if (k == 0) return input_width();
  if (k == num_layers()) return 1;
  return config_.hidden[k - 1];
}

absl::StatusOr<CtrModel> CtrModel::Create(const CtrModelConfig& config) {
  absl::Status valid = config.Validate();
  if (!valid.ok()) return valid;
  CtrModel model;
  model.config_ = config;
  for (int k = 0; k < model.num_layers(); ++k) {
    const int in = model.width(k), out = model.width(k + 1);
    model.spec_.push_back({absl::StrCat("layer", k, "/weight"), {in, out}});
    model.spec_.push_back({absl::StrCat("layer", k, "/bias"), {out}});
    std::vector<float> weight(static_cast<size_t>(in) * out);
    const float scale = static_cast<float>(std::sqrt(6.0 / (in + out)));
    InitRow(config.seed, static_cast<uint64_t>(k), static_cast<int>(weight.size()), scale,
            weight.data());
    model.params_.push_back(std::move(weight));
    model.params_.push_back(std::vector<float>(out, 0.0f));
  }
  return model;
}

absl::Status CtrModel::Forward(absl::Span<const CtrExample> batch, const RowLookup& lookup,
                               CtrActivations* acts) const {
  const int n = static_cast<int>(batch.size());
  const int dim = config_.dim;
  acts->batch = n;
  acts->unique_ids.clear();
  acts->slot.resize(static_cast<size_t>(n) * kCtrCategorical);
  absl::flat_hash_map<uint64_t, int32_t> index;
  index.reserve(static_cast<size_t>(n) * kCtrCategorical);
  for (int b = 0; b < n; ++b) {
    for (int f = 0; f < kCtrCategorical; ++f) {
      const uint64_t id = batch[b].ids[f];
      auto [it, inserted] = index.try_emplace(id, static_cast<int32_t>(acts->unique_ids.size()));
      if (inserted) acts->unique_ids.push_back(id);
      acts->slot[b * kCtrCategorical + f] = it->second;
    }
  }
  acts->rows.resize(acts->unique_ids.size() * dim);
  absl::Status looked_up = lookup(acts->unique_ids, acts->rows.data());
  if (!looked_up.ok()) return looked_up;

  acts->layers.resize(num_layers());
  const int in = input_width();
  std::vector<float>& input = acts->layers[0];
  input.resize(static_cast<size_t>(n) * in);
  for (int b = 0; b < n; ++b) {
    float* x = &input[static_cast<size_t>(b) * in];
    std::copy(batch[b].dense, batch[b].dense + kCtrDense, x);
    for (int f = 0; f < kCtrCategorical; ++f) {
      const float* row = &acts->rows[static_cast<size_t>(acts->slot[b * kCtrCategorical + f]) * dim];
      std::copy(row, row + dim, x + kCtrDense + f * dim);
    }
  }
  for (int k = 0; k < num_layers(); ++k) {
    const int w_in = width(k), w_out = width(k + 1);
    const bool last = k + 1 == num_layers();
    std::vector<float>& out = last ? acts->logits : acts->layers[k + 1];
    out.resize(static_cast<size_t>(n) * w_out);
    const std::vector<float>& bias = params_[2 * k + 1];
    for (int b = 0; b < n; ++b) {
      std::copy(bias.begin(), bias.end(), out.begin() + static_cast<size_t>(b) * w_out);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, w_out, w_in, 1.0f,
                acts->layers[k].data(), w_in, params_[2 * k].data(), w_out, 1.0f, out.data(),
                w_out);
    if (!last) {
      for (float& v : out) v = v > 0.0f ? v : 0.0f;
    }
  }
  return absl::OkStatus();
}

void CtrModel::Backward(const CtrActivations& acts, absl::Span<const float> dlogits,
                        CtrGradients* grads) const {
  const int n = acts.batch;
  const int dim = config_.dim;
  grads->dense.resize(params_.size());
  std::vector<float> delta(dlogits.begin(), dlogits.end());  // d/d(layer output)
  std::vector<float> delta_in;
  for (int k = num_layers() - 1; k >= 0; --k) {
    const int w_in = width(k), w_out = width(k + 1);
    const std::vector<float>& x = acts.layers[k];
    std::vector<float>& dw = grads->dense[2 * k];
    std::vector<float>& db = grads->dense[2 * k + 1];
    dw.resize(static_cast<size_t>(w_in) * w_out);
    db.assign(w_out, 0.0f);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, w_in, w_out, n, 1.0f, x.data(), w_in,
                delta.data(), w_out, 0.0f, dw.data(), w_out);
    for (int b = 0; b < n; ++b) {
      for (int j = 0; j < w_out; ++j) db[j] += delta[static_cast<size_t>(b) * w_out + j];
    }
    delta_in.resize(static_cast<size_t>(n) * w_in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w_in, w_out, 1.0f, delta.data(),
                w_out, params_[2 * k].data(), w_out, 0.0f, delta_in.data(), w_in);
    if (k > 0) {
      // x is the ReLU output of layer k - 1: no gradient where it was cut.
      for (size_t i = 0; i < delta_in.size(); ++i) {
        if (x[i] <= 0.0f) delta_in[i] = 0.0f;
      }
    }
    delta.swap(delta_in);
  }
  // delta is now d/d(input); scatter the embedding slices onto their rows.
  const int in = input_width();
  grads->ids = acts.unique_ids;
  grads->rows.assign(acts.unique_ids.size() * dim, 0.0f);
  for (int b = 0; b < n; ++b) {
    const float* dx = &delta[static_cast<size_t>(b) * in + kCtrDense];
    for (int f = 0; f < kCtrCategorical; ++f) {
      float* g = &grads->rows[static_cast<size_t>(acts.slot[b * kCtrCategorical + f]) * dim];
      for (int j = 0; j < dim; ++j) g[j] += dx[f * dim + j];
    }
  }
}

float Sigmoid(float logit) {
  return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logit))));
}

double SigmoidCrossEntropy(absl::Span<const float> logits, absl::Span<const float> labels,
                           std::vector<float>* dlogits) {
  const size_t n = logits.size();
  double total = 0;
  if (dlogits != nullptr) dlogits->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double z = logits[i], y = labels[i];
    // log(1 + e^z) - y z, written so that neither exp overflows.
    total += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
    if (dlogits != nullptr) {
      (*dlogits)[i] = static_cast<float>((1.0 / (1.0 + std::exp(-z)) - y) / n);
    }
  }
  return total / n;
}

}  // namespace ps

#include "worker/mlp/model.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {

absl::StatusOr<std::unique_ptr<Mlp>> Mlp::Create(ComputeBackend* backend, std::vector<int> dims,
                                                 int max_batch) {
  if (dims.size() < 2) return absl::InvalidArgumentError("an MLP needs inputs and classes");
  for (int d : dims) {
    if (d <= 0) return absl::InvalidArgumentError(absl::StrCat("layer width ", d, " is not > 0"));
  }
  if (max_batch <= 0) return absl::InvalidArgumentError("max_batch must be > 0");
  std::unique_ptr<Mlp> m(new Mlp(backend, std::move(dims), max_batch));
  RETURN_IF_ERROR(m->Allocate());
  return m;
}

Mlp::Mlp(ComputeBackend* backend, std::vector<int> dims, int max_batch)
    : backend_(backend), dims_(std::move(dims)), max_batch_(max_batch) {
  for (size_t l = 0; l + 1 < dims_.size(); ++l) {
    spec_.push_back(TensorSpec{absl::StrCat("fc", l + 1, ".weight"), {dims_[l], dims_[l + 1]}});
    spec_.push_back(TensorSpec{absl::StrCat("fc", l + 1, ".bias"), {dims_[l + 1]}});
  }
}

absl::Status Mlp::Allocate() {
  const size_t L = dims_.size() - 1;
  auto alloc = [this](size_t n, std::vector<std::unique_ptr<DeviceBuffer>>* v) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> b, backend_->Allocate(n));
    v->push_back(std::move(b));
    return absl::OkStatus();
  };
  for (size_t l = 0; l < L; ++l) {
    const size_t wn = size_t(dims_[l]) * dims_[l + 1];
    RETURN_IF_ERROR(alloc(wn, &w_));
    RETURN_IF_ERROR(alloc(wn, &dw_));
    RETURN_IF_ERROR(alloc(dims_[l + 1], &b_));
    RETURN_IF_ERROR(alloc(dims_[l + 1], &db_));
    RETURN_IF_ERROR(alloc(size_t(max_batch_) * dims_[l + 1], &deltas_));
  }
  for (size_t l = 0; l <= L; ++l) RETURN_IF_ERROR(alloc(size_t(max_batch_) * dims_[l], &acts_));
  ASSIGN_OR_RETURN(labels_, backend_->Allocate(max_batch_));
  return absl::OkStatus();
}

TensorList Mlp::InitialValues(uint64_t seed) const {
  std::mt19937_64 rng(seed);
  TensorList out;
  for (size_t l = 0; l + 1 < dims_.size(); ++l) {
    const float limit = std::sqrt(6.0f / float(dims_[l] + dims_[l + 1]));
    std::vector<float> w(size_t(dims_[l]) * dims_[l + 1]);
    // Uniform in [-limit, limit) from the top 24 bits: identical on every host.
    for (float& v : w) v = (float((rng() >> 40) & 0xffffff) / float(1 << 24) * 2 - 1) * limit;
    out.push_back(std::move(w));
    out.push_back(std::vector<float>(dims_[l + 1], 0.0f));
  }
  return out;
}

absl::Status Mlp::CheckWeights(const TensorList& weights) const {
  if (weights.size() != spec_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", weights.size(), " tensors, the model has ", spec_.size()));
  }
  for (size_t l = 0; l < w_.size(); ++l) {
    if (weights[2 * l].size() != w_[l]->size() || weights[2 * l + 1].size() != b_[l]->size()) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l + 1, " weights have the wrong size"));
    }
  }
  return absl::OkStatus();
}

absl::Status Mlp::SetWeights(const TensorList& weights) {
  RETURN_IF_ERROR(CheckWeights(weights));
  w_view_.clear();
  b_view_.clear();
  for (size_t l = 0; l < w_.size(); ++l) {
    RETURN_IF_ERROR(backend_->CopyToDevice(weights[2 * l], w_[l].get()));
    RETURN_IF_ERROR(backend_->CopyToDevice(weights[2 * l + 1], b_[l].get()));
  }
  return absl::OkStatus();
}

absl::Status Mlp::UseWeights(TensorList* weights) {
  RETURN_IF_ERROR(CheckWeights(*weights));
  std::vector<std::unique_ptr<DeviceBuffer>> w, b;
  for (size_t l = 0; l < w_.size(); ++l) {
    w.push_back(backend_->WrapHost(absl::MakeSpan((*weights)[2 * l])));
    b.push_back(backend_->WrapHost(absl::MakeSpan((*weights)[2 * l + 1])));
    if (w.back() == nullptr || b.back() == nullptr) return SetWeights(*weights);
  }
  w_view_ = std::move(w);
  b_view_ = std::move(b);
  return absl::OkStatus();
}

absl::Status Mlp::HoldDataset(absl::Span<const float> images, absl::Span<const float> labels) {
  if (images.size() != labels.size() * inputs()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset of ", labels.size(), " labels needs ",
                                                   labels.size() * inputs(), " input values, got ",
                                                   images.size()));
  }
  held_images_.reset();
  held_labels_.reset();
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> held_images, backend_->Allocate(images.size()));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> held_labels, backend_->Allocate(labels.size()));
  RETURN_IF_ERROR(backend_->CopyToDevice(images, held_images.get()));
  RETURN_IF_ERROR(backend_->CopyToDevice(labels, held_labels.get()));
  held_images_ = std::move(held_images);
  held_labels_ = std::move(held_labels);
  return absl::OkStatus();
}

absl::Status Mlp::CheckRows(int64_t rows) const {
  if (rows <= 0 || rows > max_batch_) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", rows, " rows; this model takes 1..", max_batch_));
  }
  return absl::OkStatus();
}

absl::Status Mlp::UploadBatch(const float* x, const float* labels, int rows) {
  RETURN_IF_ERROR(CheckRows(rows));
  RETURN_IF_ERROR(backend_->CopyToDevice(absl::MakeConstSpan(x, size_t(rows) * dims_[0]),
                                         acts_[0].get()));
  return backend_->CopyToDevice(absl::MakeConstSpan(labels, rows), labels_.get());
}

absl::Status Mlp::GatherBatch(absl::Span<const int64_t> examples) {
  RETURN_IF_ERROR(CheckRows(examples.size()));
  if (held_images_ == nullptr) {
    return absl::FailedPreconditionError("no dataset held: call HoldDataset first");
  }
  RETURN_IF_ERROR(backend_->GatherRows(*held_images_, dims_[0], examples, acts_[0].get()));
  return backend_->GatherRows(*held_labels_, 1, examples, labels_.get());
}

absl::StatusOr<BatchStats> Mlp::Forward(int rows, bool want_grad) {
  const size_t L = w_.size();
  for (size_t l = 0; l < L; ++l) {
    const int in = dims_[l], out = dims_[l + 1];
    RETURN_IF_ERROR(
        backend_->Gemm(false, false, rows, out, in, 1.0f, *acts_[l], W(l), 0.0f, acts_[l + 1].get()));
    RETURN_IF_ERROR(backend_->AddBias(rows, out, B(l), acts_[l + 1].get()));
    if (l + 1 < L) RETURN_IF_ERROR(backend_->Relu(rows * out, acts_[l + 1].get()));
  }
  ASSIGN_OR_RETURN(LossSums sums,
                   backend_->SoftmaxCrossEntropy(rows, dims_.back(), *acts_[L], *labels_,
                                                 1.0f / rows, want_grad ? deltas_[L - 1].get() : nullptr));
  return BatchStats{sums.loss_sum, sums.correct, rows};
}

absl::StatusOr<BatchStats> Mlp::ForwardBackward(int rows, TensorList* grads,
                                                const OnReady& on_ready) {
  ASSIGN_OR_RETURN(BatchStats stats, Forward(rows, /*want_grad=*/true));
  const size_t L = w_.size();
  grads->resize(spec_.size());
  for (size_t l = L; l-- > 0;) {
    const int in = dims_[l], out = dims_[l + 1];
    std::vector<float>& dw = (*grads)[2 * l];
    std::vector<float>& db = (*grads)[2 * l + 1];
    dw.resize(dw_[l]->size());
    db.resize(db_[l]->size());
    // Where the backend's buffers are host memory, the gradients are
    // computed straight into `grads`; elsewhere copied there.
    const std::unique_ptr<DeviceBuffer> dw_host = backend_->WrapHost(absl::MakeSpan(dw));
    const std::unique_ptr<DeviceBuffer> db_host = backend_->WrapHost(absl::MakeSpan(db));
    DeviceBuffer* dw_out = dw_host != nullptr ? dw_host.get() : dw_[l].get();
    DeviceBuffer* db_out = db_host != nullptr ? db_host.get() : db_[l].get();
    // dW = act^T delta; db = column sums of delta.
    RETURN_IF_ERROR(
        backend_->Gemm(true, false, in, out, rows, 1.0f, *acts_[l], *deltas_[l], 0.0f, dw_out));
    RETURN_IF_ERROR(backend_->ColumnSums(rows, out, *deltas_[l], db_out));
    absl::Status s;
    if (dw_host == nullptr) s = backend_->StartCopyToHost(*dw_[l], absl::MakeSpan(dw));
    if (s.ok() && db_host == nullptr) s = backend_->StartCopyToHost(*db_[l], absl::MakeSpan(db));
    if (s.ok() && l > 0) {
      // While the gradients travel and on_ready sends them, the device goes
      // on with the delta of the layer below = (delta W^T) masked by its ReLU.
      s = backend_->Gemm(false, true, rows, in, out, 1.0f, *deltas_[l], W(l), 0.0f,
                         deltas_[l - 1].get());
      if (s.ok()) s = backend_->ReluBackward(rows * in, *acts_[l], deltas_[l - 1].get());
    }
    // Even after an error: no copy may land in `grads` once this returns.
    const absl::Status landed = backend_->FinishCopiesToHost();
    RETURN_IF_ERROR(s);
    RETURN_IF_ERROR(landed);
    if (on_ready) on_ready({static_cast<int>(2 * l), static_cast<int>(2 * l + 1)});
  }
  return stats;
}

absl::StatusOr<BatchStats> Mlp::TrainStep(const float* x, const float* labels, int rows,
                                          TensorList* grads, const OnReady& on_ready) {
  RETURN_IF_ERROR(UploadBatch(x, labels, rows));
  return ForwardBackward(rows, grads, on_ready);
}

absl::StatusOr<BatchStats> Mlp::TrainStep(absl::Span<const int64_t> examples, TensorList* grads,
                                          const OnReady& on_ready) {
  RETURN_IF_ERROR(GatherBatch(examples));
  return ForwardBackward(static_cast<int>(examples.size()), grads, on_ready);
}

absl::StatusOr<BatchStats> Mlp::Evaluate(const float* x, const float* labels, int rows) {
  RETURN_IF_ERROR(UploadBatch(x, labels, rows));
  return Forward(rows, /*want_grad=*/false);
}

}  // namespace ps

#include "worker/param_store.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {

std::string ParamStore::mode_name() const {
  const std::optional<Mode> m = mode();
  return m.has_value() ? ModeName(*m) : "standalone";
}

absl::Status RemoteParamStore::Init(const ModelSpec& spec, const TensorList& initial,
                                    bool creator, TensorList* weights) {
  RETURN_IF_ERROR(client_->Init(spec, creator ? &initial : nullptr));
  return client_->Pull(/*min_version=*/0, weights);
}

absl::Status RemoteParamStore::PushPull(const TensorList& grads, TensorList* weights) {
  return client_->PushPull(grads, weights);
}

int RemoteParamStore::DroppedShards() const {
  int n = 0;
  for (PushOutcome o : client_->LastPushOutcomes()) n += o == PushOutcome::kDropped;
  return n;
}

absl::Status RemoteParamStore::BeginPushPull(const TensorList* grads, TensorList* weights) {
  pending_weights_ = weights;
  in_progress_ = client_->StartPushPull(grads, &incoming_);
  return absl::OkStatus();
}

void RemoteParamStore::SendGradients(const std::vector<int>& tensors) {
  in_progress_->Send(tensors);
}

absl::Status RemoteParamStore::FinishPushPull() {
  absl::Status s = in_progress_->Wait();
  in_progress_.reset();
  if (s.ok()) {
    pending_weights_->resize(incoming_.size());
    for (size_t i = 0; i < incoming_.size(); ++i) (*pending_weights_)[i].swap(incoming_[i]);
  }
  pending_weights_ = nullptr;
  return s;
}

absl::Status LocalParamStore::BeginPushPull(const TensorList* grads, TensorList* weights) {
  pending_grads_ = grads;
  pending_weights_ = weights;
  return absl::OkStatus();
}

absl::Status LocalParamStore::FinishPushPull() {
  return PushPull(*pending_grads_, pending_weights_);
}

absl::Status LocalParamStore::Init(const ModelSpec& spec, const TensorList& initial,
                                   bool /*creator*/, TensorList* weights) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  optimizers_.clear();
  for (const TensorSpec& t : spec) {
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt, CreateOptimizer(options_, t.num_elements()));
    optimizers_.push_back(std::move(opt));
  }
  *weights = initial;
  version_ = 0;
  return absl::OkStatus();
}

absl::Status LocalParamStore::PushPull(const TensorList& grads, TensorList* weights) {
  if (grads.size() != optimizers_.size() || weights->size() != grads.size()) {
    return absl::InvalidArgumentError("gradients do not match the model");
  }
  // Every size is checked before anything is applied.
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].size() != (*weights)[i].size()) {
      return absl::InvalidArgumentError(absl::StrCat("gradient ", i, " has the wrong size"));
    }
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    RETURN_IF_ERROR(ApplyGradient(optimizers_[i].get(), /*step=*/version_ + 1, grads[i],
                                  absl::MakeSpan((*weights)[i])));
  }
  ++version_;
  return absl::OkStatus();
}

}  // namespace ps

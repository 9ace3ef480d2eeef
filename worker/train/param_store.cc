#include "worker/train/param_store.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {

std::string ParamStore::mode_name() const {
  const std::optional<Mode> m = mode();
  return m.has_value() ? ModeName(*m) : "standalone";
}

absl::Status RemoteParamStore::Init(const ModelSpec& spec, const TensorList& initial, bool creator,
                                    TensorList* weights) {
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

absl::Status LocalStoreOptions::Validate() const {
  RETURN_IF_ERROR(ValidateOptimizerOptions(dense));
  if (absl::Status s = rows.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the rows' optimizer: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status LocalParamStore::DeclareTables(const std::vector<TableSpec>& tables) {
  RETURN_IF_ERROR(ValidateTableSpecs(tables));
  tables_.clear();
  for (const TableSpec& t : tables) {
    LocalEmbeddingTableOptions o;
    o.dim = t.dim;
    o.seed = t.seed;
    o.init_scale = t.init_scale;
    o.optimizer = options_.rows;
    ASSIGN_OR_RETURN(LocalEmbeddingTable table, LocalEmbeddingTable::Create(o));
    tables_.emplace(t.name, std::move(table));
  }
  return absl::OkStatus();
}

absl::Status LocalParamStore::Init(const ModelSpec& spec, const TensorList& initial,
                                   bool /*creator*/, TensorList* weights) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  optimizers_.clear();
  for (const TensorSpec& t : spec) {
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
                     CreateOptimizer(options_.dense, t.num_elements()));
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

absl::Status LocalParamStore::BeginPushPull(const TensorList* grads, TensorList* weights) {
  pending_grads_ = grads;
  pending_weights_ = weights;
  return absl::OkStatus();
}

absl::Status LocalParamStore::FinishPushPull() {
  return PushPull(*pending_grads_, pending_weights_);
}

absl::StatusOr<LocalEmbeddingTable*> LocalParamStore::Table(absl::string_view name, size_t floats,
                                                            size_t ids) {
  auto it = tables_.find(name);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("no embedding table '", name, "' was declared"));
  }
  if (floats != ids * it->second.dim()) {
    return absl::InvalidArgumentError(absl::StrCat("table '", name, "': ", floats, " floats for ",
                                                   ids, " rows of dim ", it->second.dim()));
  }
  return &it->second;
}

absl::Status LocalParamStore::PullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                                       absl::Span<float> rows) {
  ASSIGN_OR_RETURN(LocalEmbeddingTable * t, Table(table, rows.size(), ids.size()));
  t->Lookup(ids, /*create=*/false, rows.data());
  return absl::OkStatus();
}

absl::Status LocalParamStore::PushRows(absl::string_view table, absl::Span<const uint64_t> ids,
                                       absl::Span<const float> grads) {
  ASSIGN_OR_RETURN(LocalEmbeddingTable * t, Table(table, grads.size(), ids.size()));
  // A repeated id's rows are summed in caller order and applied once, as
  // the client sends them.
  absl::flat_hash_map<uint64_t, size_t> first;  // id -> its position in `unique`
  std::vector<uint64_t> unique;
  for (uint64_t id : ids) {
    if (first.try_emplace(id, unique.size()).second) unique.push_back(id);
  }
  if (unique.size() == ids.size()) {
    t->Apply(ids, grads);
    return absl::OkStatus();
  }
  const size_t dim = t->dim();
  std::vector<float> summed(unique.size() * dim, 0.0f);
  for (size_t i = 0; i < ids.size(); ++i) {
    float* to = &summed[first[ids[i]] * dim];
    for (size_t k = 0; k < dim; ++k) to[k] += grads[i * dim + k];
  }
  t->Apply(unique, summed);
  return absl::OkStatus();
}

size_t LocalParamStore::rows(absl::string_view table) const {
  auto it = tables_.find(table);
  return it == tables_.end() ? 0 : it->second.size();
}

absl::StatusOr<std::unique_ptr<ParamStore>> ConnectParamStore(const ClientOptions* client,
                                                              const LocalStoreOptions& standalone) {
  if (client == nullptr) {
    RETURN_IF_ERROR(standalone.Validate());
    return std::unique_ptr<ParamStore>(std::make_unique<LocalParamStore>(standalone));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PsClient> c, PsClient::Connect(*client));
  return std::unique_ptr<ParamStore>(std::make_unique<RemoteParamStore>(std::move(c)));
}

}  // namespace ps

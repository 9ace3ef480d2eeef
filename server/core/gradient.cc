#include "server/core/gradient.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {

void PushBuffer::Release() {
  if (pool_ != nullptr) pool_->metrics_->pending_pushes.Add(-1);
  pool_.reset();
}

std::vector<float> PushBuffer::TakeValues() && {
  std::vector<float> v = std::move(values_);
  Release();
  return v;
}

std::shared_ptr<GradientPool> GradientPool::Create(std::string name, int max_pending,
                                                   size_t max_spare,
                                                   std::shared_ptr<ShardMetrics> metrics) {
  return std::shared_ptr<GradientPool>(
      new GradientPool(std::move(name), max_pending, max_spare, std::move(metrics)));
}

GradientPool::GradientPool(std::string name, int max_pending, size_t max_spare,
                           std::shared_ptr<ShardMetrics> metrics)
    : name_(std::move(name)),
      max_pending_(max_pending),
      buffers_(BufferPool::Create(max_spare)),
      metrics_(std::move(metrics)) {}

absl::StatusOr<PushBuffer> GradientPool::Take(size_t n) {
  // Counted first, then checked: concurrent takers never pass the limit together.
  Gauge& pending = metrics_->pending_pushes;
  if (pending.Add(1) > max_pending_) {
    pending.Add(-1);
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, " already has ", max_pending_,
        " pushes in progress (--max_pending_pushes); a client may be starting pushes that it "
        "never finishes"));
  }
  PushBuffer b;
  b.pool_ = shared_from_this();
  b.values_ = buffers_->Take(n);
  return b;
}

GradientAssembly::GradientAssembly(int worker_id, int64_t computed_version,
                                   std::shared_ptr<const ShardLayout> layout,
                                   SliceAssembler::Options options,
                                   std::shared_ptr<GradientPool> pool)
    : worker_id_(worker_id),
      computed_version_(computed_version),
      layout_(layout),
      assembler_(std::move(layout), std::move(options)),
      pool_(std::move(pool)) {}

absl::Status GradientAssembly::TakeBuffer() {
  if (have_buffer_) return absl::OkStatus();
  ASSIGN_OR_RETURN(buffer_, pool_->Take(layout_->num_elements));
  have_buffer_ = true;
  return absl::OkStatus();
}

absl::Status GradientAssembly::Add(const RawTensorSlice& chunk) {
  return assembler_.Add(chunk, [this](const SliceRange& r) -> absl::StatusOr<float*> {
    RETURN_IF_ERROR(TakeBuffer());
    return buffer_.data() + r.flat_offset;
  });
}

absl::Status GradientAssembly::AddMessage(const std::vector<RawTensorSlice>& chunks) {
  RETURN_IF_ERROR(assembler_.Validate(chunks));
  RETURN_IF_ERROR(TakeBuffer());
  for (const RawTensorSlice& c : chunks) RETURN_IF_ERROR(Add(c));
  return absl::OkStatus();
}

absl::StatusOr<AssembledGradient> GradientAssembly::Finish() && {
  RETURN_IF_ERROR(assembler_.Finish());
  RETURN_IF_ERROR(TakeBuffer());
  have_buffer_ = false;
  return AssembledGradient{worker_id_, computed_version_, std::move(layout_), std::move(buffer_)};
}

}  // namespace ps

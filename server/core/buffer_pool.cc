#include "server/core/buffer_pool.h"

#include <utility>

namespace ps {

std::vector<float> BufferPool::Take(size_t n) {
  std::vector<float> buffer;
  {
    absl::MutexLock l(&mu_);
    // Prefer a spare of the right size; any spare beats a fresh allocation.
    for (size_t i = 0; i < spare_.size(); ++i) {
      if (spare_[i].size() == n || i + 1 == spare_.size()) {
        buffer = std::move(spare_[i]);
        spare_.erase(spare_.begin() + i);
        break;
      }
    }
  }
  buffer.resize(n);
  return buffer;
}

void BufferPool::Give(std::vector<float> buffer) {
  absl::MutexLock l(&mu_);
  if (spare_.size() < max_spare_) spare_.push_back(std::move(buffer));
}

std::shared_ptr<std::vector<float>> BufferPool::Share(std::vector<float> buffer) {
  std::shared_ptr<BufferPool> self = shared_from_this();
  return std::shared_ptr<std::vector<float>>(new std::vector<float>(std::move(buffer)),
                                             [self](std::vector<float>* b) {
                                               self->Give(std::move(*b));
                                               delete b;
                                             });
}

void BufferPool::Clear() {
  std::vector<std::vector<float>> freed;
  absl::MutexLock l(&mu_);
  freed.swap(spare_);
}

}  // namespace ps

#include "server/core/prefetcher.h"

#include <utility>

namespace ps {

Prefetcher::Prefetcher(size_t max_jobs) : max_jobs_(max_jobs < 1 ? 1 : max_jobs) {}

Prefetcher::~Prefetcher() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    jobs_.clear();
  }
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::Add(Job job) {
  absl::MutexLock l(&mu_);
  if (stopping_) return;
  if (jobs_.size() >= max_jobs_) {
    jobs_.pop_front();
    ++dropped_;
  }
  jobs_.push_back(std::move(job));
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

int64_t Prefetcher::dropped() const {
  absl::MutexLock l(&mu_);
  return dropped_;
}

bool Prefetcher::WaitIdle(absl::Time deadline) const {
  absl::MutexLock l(&mu_);
  const auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return jobs_.empty() && !running_; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

void Prefetcher::Run() {
  for (;;) {
    Job job;
    {
      absl::MutexLock l(&mu_);
      const auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || !jobs_.empty();
      };
      mu_.Await(absl::Condition(&ready));  // woken by Add or the destructor
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = true;
    }
    job();
    absl::MutexLock l(&mu_);
    running_ = false;
  }
}

}  // namespace ps

#include "server/core/stats.h"

#include <algorithm>

namespace ps {

void Gauge::RaiseTo(int64_t v) {
  int64_t cur = value_.load(std::memory_order_relaxed);
  while (cur < v && !value_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void Histogram::RecordValue(int64_t v) {
  v = std::max<int64_t>(0, v);
  const size_t bucket = std::lower_bound(bounds_, bounds_ + num_bounds_, v) - bounds_;
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds.assign(bounds_, bounds_ + num_bounds_);
  for (size_t i = 0; i <= num_bounds_; ++i) {
    s.counts.push_back(buckets_[i].load(std::memory_order_relaxed));
    s.count += s.counts.back();
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

void ShardMetrics::RecordStaleness(int64_t s) {
  staleness_sum.Add(s);
  staleness_count.Add(1);
  staleness_max.RaiseTo(s);
  staleness.RecordValue(s);
}

double ShardMetrics::MeanStaleness() const {
  const int64_t n = staleness_count.Get();
  return n == 0 ? 0.0 : static_cast<double>(staleness_sum.Get()) / static_cast<double>(n);
}

}  // namespace ps

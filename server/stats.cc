#include "server/stats.h"

#include <algorithm>

namespace ps {

void Gauge::RaiseTo(int64_t v) {
  int64_t cur = value_.load(std::memory_order_relaxed);
  while (cur < v && !value_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void Histogram::Record(absl::Duration d) {
  const int64_t us = std::max<int64_t>(0, absl::ToInt64Microseconds(d));
  const size_t bucket =
      std::lower_bound(kBoundsMicros.begin(), kBoundsMicros.end(), us) - kBoundsMicros.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(us, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds_micros.assign(kBoundsMicros.begin(), kBoundsMicros.end());
  for (const std::atomic<int64_t>& b : buckets_) {
    s.counts.push_back(b.load(std::memory_order_relaxed));
    s.count += s.counts.back();
  }
  s.sum_micros = sum_micros_.load(std::memory_order_relaxed);
  return s;
}

void ShardMetrics::RecordStaleness(int64_t s) {
  staleness_sum.Add(s);
  staleness_count.Add(1);
  staleness_max.RaiseTo(s);
}

double ShardMetrics::MeanStaleness() const {
  const int64_t n = staleness_count.Get();
  return n == 0 ? 0.0 : static_cast<double>(staleness_sum.Get()) / static_cast<double>(n);
}

}  // namespace ps

#include "tools/ctl/top_view.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ps {
namespace {

using Reply = v1::StatusResponse;

bool Contains(const google::protobuf::RepeatedField<int32_t>& ids, int w) {
  return std::find(ids.begin(), ids.end(), w) != ids.end();
}

bool SameIncarnation(const Reply& a, const Reply& b) {
  return a.incarnation().run_id() == b.incarnation().run_id() &&
         a.incarnation().start() == b.incarnation().start() && a.shard_id() == b.shard_id();
}

// The MODE cell of a shard that gave no reply.
std::string FailureName(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return "DOWN";
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return "DENIED";
    default:
      return "ERROR";
  }
}

std::string ModeName(v1::Mode mode) {
  switch (mode) {
    case v1::MODE_SYNC:
      return "sync";
    case v1::MODE_ASYNC:
      return "async";
    case v1::MODE_SSP:
      return "ssp";
    default:
      return "?";
  }
}

// The live workers: with leases (worker_timeout_ms > 0) the shard's; without
// (async, or --worker_timeout=0) nothing drops a worker, so every one seen.
std::vector<int> LiveWorkers(const Reply& r) {
  if (r.worker_timeout_ms() > 0) return {r.live_workers().begin(), r.live_workers().end()};
  std::vector<int> live;
  for (int w : r.workers_seen()) {
    if (!Contains(r.dropped_workers(), w)) live.push_back(w);
  }
  return live;
}

// A bucket bound: 50us, 2.5ms, 1s; "+Inf" for the open bucket.
std::string Micros(std::optional<int64_t> us) {
  if (!us.has_value()) return "-";
  if (*us == INT64_MAX) return "+Inf";
  if (*us >= 1000 * 1000) return absl::StrCat(static_cast<double>(*us) / 1e6, "s");
  if (*us >= 1000) return absl::StrCat(static_cast<double>(*us) / 1e3, "ms");
  return absl::StrCat(*us, "us");
}

// Bytes per second with K, M, G (powers of 1000).
std::string Rate(double bytes_per_s) {
  if (bytes_per_s >= 1e9) return absl::StrFormat("%.1fG", bytes_per_s / 1e9);
  if (bytes_per_s >= 1e6) return absl::StrFormat("%.1fM", bytes_per_s / 1e6);
  if (bytes_per_s >= 1e3) return absl::StrFormat("%.1fK", bytes_per_s / 1e3);
  return absl::StrFormat("%.0f", bytes_per_s);
}

// The calls a histogram counted since `prev` (null: since the server
// started).
std::vector<int64_t> CountsSince(const v1::LatencyHistogram& now,
                                 const v1::LatencyHistogram* prev) {
  std::vector<int64_t> counts(now.counts().begin(), now.counts().end());
  if (prev == nullptr || prev->counts_size() != now.counts_size()) return counts;
  for (size_t i = 0; i < counts.size(); ++i) {
    counts[i] -= prev->counts(static_cast<int>(i));
    if (counts[i] < 0) return {};  // not the same server's counters
  }
  return counts;
}

std::vector<std::string> LatencyCells(const v1::LatencyHistogram& now,
                                      const v1::LatencyHistogram* prev) {
  const std::vector<int64_t> bounds(now.bounds_micros().begin(), now.bounds_micros().end());
  const std::vector<int64_t> counts = CountsSince(now, prev);
  return {Micros(BucketQuantileMicros(bounds, counts, 0.5)),
          Micros(BucketQuantileMicros(bounds, counts, 0.99))};
}

// A worker's step on one shard; nullopt where the shard cannot tell.
//   SSP: its clock (worker_steps). Async: the pushes it made (its last
//   seq). Sync: the version, plus one once its gradient for the open step
//   is in; unknown for a dropped or never seen worker.
std::optional<int64_t> WorkerStep(const Reply& r, int w) {
  if (r.worker_steps_size() > w) return r.worker_steps(w);
  if (r.mode() == v1::MODE_ASYNC) {
    if (r.worker_last_seq_size() > w) return r.worker_last_seq(w);
    return std::nullopt;
  }
  if (r.mode() != v1::MODE_SYNC || !r.initialized()) return std::nullopt;
  if (!Contains(r.workers_seen(), w) || Contains(r.dropped_workers(), w)) return std::nullopt;
  return r.version() + (Contains(r.waiting_for(), w) ? 0 : 1);
}

// Left-aligned columns, two spaces apart.
std::vector<std::string> Columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::vector<std::string> out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace

std::optional<int64_t> BucketQuantileMicros(const std::vector<int64_t>& bounds_micros,
                                            const std::vector<int64_t>& counts, double q) {
  if (counts.size() != bounds_micros.size() + 1) return std::nullopt;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (total <= 0) return std::nullopt;
  // The rank of the quantile call, 1-based: the smallest with rank/total >= q.
  const int64_t rank =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(total))));
  int64_t seen = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    seen += counts[i];
    if (seen >= rank) return i < bounds_micros.size() ? bounds_micros[i] : INT64_MAX;
  }
  return INT64_MAX;
}

void TopView::Add(TopPoll poll) {
  prev_ = std::move(cur_);
  cur_ = std::move(poll);
}

std::vector<std::string> TopView::Render() const {
  if (!cur_.has_value()) return {};
  const TopPoll& cur = *cur_;
  std::vector<std::vector<std::string>> rows = {
      {"SHARD", "SERVER", "MODE", "VERSION", "STEPS/S", "LIVE", "DROPPED", "WAITING",
       "PUSH_P50", "PUSH_P99", "PULL_P50", "PULL_P99", "IN_B/S", "OUT_B/S"}};
  std::vector<std::string> down;
  const Reply* any = nullptr;  // a shard that answered
  for (size_t s = 0; s < cur.replies.size(); ++s) {
    const std::string server = s < cur.servers.size() ? cur.servers[s] : "?";
    if (!cur.replies[s].ok()) {
      const std::string what = FailureName(cur.replies[s].status());
      rows.push_back({"-", server, what, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
      down.push_back(absl::StrCat(server, " ", what, ": ", cur.replies[s].status().ToString()));
      continue;
    }
    const Reply& r = *cur.replies[s];
    if (any == nullptr) any = &r;
    // The same server's previous answer, if it was the same incarnation.
    const Reply* prev = nullptr;
    double dt = 0;
    if (prev_.has_value() && s < prev_->replies.size() && prev_->replies[s].ok() &&
        SameIncarnation(*prev_->replies[s], r)) {
      prev = &*prev_->replies[s];
      dt = absl::ToDoubleSeconds(cur.time - prev_->time);
    }
    std::string steps = "-", in = "-", out = "-";
    if (prev != nullptr && dt > 0) {
      steps = absl::StrFormat("%.1f", static_cast<double>(r.version() - prev->version()) / dt);
      in = Rate(static_cast<double>(r.bytes_received() - prev->bytes_received()) / dt);
      out = Rate(static_cast<double>(r.bytes_sent() - prev->bytes_sent()) / dt);
    }
    std::vector<std::string> push =
        LatencyCells(r.push_latency(), prev != nullptr ? &prev->push_latency() : nullptr);
    std::vector<std::string> pull =
        LatencyCells(r.pull_latency(), prev != nullptr ? &prev->pull_latency() : nullptr);
    rows.push_back({absl::StrCat(r.shard_id()), server, ModeName(r.mode()),
                    absl::StrCat(r.version()), steps, absl::StrCat(LiveWorkers(r).size()),
                    absl::StrCat(r.dropped_workers_size()), absl::StrCat(r.waiting_calls()),
                    push[0], push[1], pull[0], pull[1], in, out});
  }
  std::vector<std::string> lines = Columns(rows);
  lines.insert(lines.end(), down.begin(), down.end());
  if (any == nullptr) return lines;

  // Workers: a state and a step from every shard that answered; the step is
  // the lowest of its shards' (the step it has reached everywhere).
  std::vector<std::vector<std::string>> workers = {{"WORKER", "STATE", "STEP", "LAG"}};
  std::vector<std::optional<int64_t>> steps(any->num_workers());
  std::vector<std::string> states(any->num_workers(), "-");
  for (const absl::StatusOr<Reply>& reply : cur.replies) {
    if (!reply.ok()) continue;
    const std::vector<int> live = LiveWorkers(*reply);
    for (int w = 0; w < any->num_workers(); ++w) {
      if (Contains(reply->dropped_workers(), w)) {
        states[w] = "dropped";
      } else if (std::find(live.begin(), live.end(), w) != live.end() && states[w] != "dropped") {
        states[w] = "live";
      } else if (Contains(reply->workers_seen(), w) && states[w] == "-") {
        states[w] = "seen";
      }
      const std::optional<int64_t> step = WorkerStep(*reply, w);
      if (step.has_value()) steps[w] = steps[w].has_value() ? std::min(*steps[w], *step) : *step;
    }
  }
  std::optional<int64_t> newest;
  for (const std::optional<int64_t>& step : steps) {
    if (step.has_value()) newest = newest.has_value() ? std::max(*newest, *step) : *step;
  }
  for (int w = 0; w < any->num_workers(); ++w) {
    workers.push_back({absl::StrCat(w), states[w],
                       steps[w].has_value() ? absl::StrCat(*steps[w]) : "-",
                       steps[w].has_value() ? absl::StrCat(*newest - *steps[w]) : "-"});
  }
  const std::vector<std::string> worker_lines = Columns(workers);
  lines.insert(lines.end(), worker_lines.begin(), worker_lines.end());
  return lines;
}

}  // namespace ps

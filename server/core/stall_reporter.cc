#include "server/core/stall_reporter.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace {

// "34.2s": the form of every duration in the lines.
std::string FormatSeconds(absl::Duration d) {
  return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
}

}  // namespace

StallReporter::StallReporter(int shard_id, int num_workers, absl::Duration report_after)
    : shard_id_(shard_id), num_workers_(num_workers), report_after_(report_after) {}

absl::Time StallReporter::OnPushKept(absl::Time now) {
  if (opened_ != absl::InfiniteFuture()) return absl::InfiniteFuture();
  opened_ = now;
  if (report_after_ <= absl::ZeroDuration()) return absl::InfiniteFuture();
  next_report_ = opened_ + report_after_;
  return next_report_;
}

std::optional<std::string> StallReporter::OnStepClosed(absl::Time now, int64_t step) {
  std::optional<std::string> line;
  if (reports_ > 0) {
    line = absl::StrCat("shard ", shard_id_, ": step ", step, " completed after ",
                        FormatSeconds(now - opened_));
  }
  Reset();
  return line;
}

void StallReporter::Reset() {
  opened_ = absl::InfiniteFuture();
  next_report_ = absl::InfiniteFuture();
  reports_ = 0;
}

std::optional<std::string> StallReporter::Report(absl::Time now, int64_t step,
                                                 const std::vector<int>& missing) {
  if (now < next_report_) return std::nullopt;
  std::vector<int> received;
  for (int w = 0, m = 0; w < num_workers_; ++w) {
    if (m < static_cast<int>(missing.size()) && missing[m] == w) {
      ++m;
    } else {
      received.push_back(w);
    }
  }
  std::string line = absl::StrCat(
      "shard ", shard_id_, ": step ", step, " has waited ", FormatSeconds(now - opened_),
      " for gradients from workers [", absl::StrJoin(missing, ", "), "] (received from [",
      absl::StrJoin(received, ", "), "])");
  ++reports_;
  // The next report is due when the step has waited twice as long (10 s,
  // 20 s, 40 s, ...), so a step that never completes logs a few lines, not a
  // line every period; a check that came late skips the reports it missed.
  while (next_report_ <= now) next_report_ = opened_ + 2 * (next_report_ - opened_);
  return line;
}

}  // namespace ps

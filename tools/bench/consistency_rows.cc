#include "tools/bench/consistency_rows.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

// The non-empty, unrepeated items of a comma-separated list.
absl::StatusOr<std::vector<std::string>> SplitList(absl::string_view text, absl::string_view flag) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::string s(absl::StripAsciiWhitespace(item));
    if (std::find(out.begin(), out.end(), s) != out.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " lists ", s, " twice"));
    }
    out.push_back(s);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return out;
}

// The median; with an even count, the mean of the middle two (infinite if
// either is). REQUIRES: !v.empty().
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "name" of "--name=value" or "--name".
absl::string_view FlagName(absl::string_view flag) {
  absl::ConsumePrefix(&flag, "--");
  return flag.substr(0, flag.find('='));
}

}  // namespace

const std::vector<ConsistencyMode>& AllConsistencyModes() {
  static const auto* modes = new std::vector<ConsistencyMode>{
      {"sync", "sync", {"--mode=sync"}},
      {"sync_q3", "sync, quorum 3", {"--mode=sync", "--sync_quorum=3"}},
      {"ssp1", "ssp S=1", {"--mode=ssp", "--staleness=1"}},
      {"ssp3", "ssp S=3", {"--mode=ssp", "--staleness=3"}},
      {"async", "async", {"--mode=async"}},
      {"async_inverse", "async, lr/(1+staleness)", {"--mode=async", "--staleness_lr=inverse"}},
  };
  return *modes;
}

absl::StatusOr<std::vector<ConsistencyMode>> ParseModes(absl::string_view keys,
                                                        absl::string_view flag) {
  absl::StatusOr<std::vector<std::string>> list = SplitList(keys, flag);
  if (!list.ok()) return list.status();
  std::vector<ConsistencyMode> out;
  for (const std::string& key : *list) {
    const auto& all = AllConsistencyModes();
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const ConsistencyMode& m) { return m.key == key; });
    if (it == all.end()) {
      std::string known;
      for (const ConsistencyMode& m : all) absl::StrAppend(&known, known.empty() ? "" : ",", m.key);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown --", flag, " entry '", key, "' (known: ", known, ")"));
    }
    out.push_back(*it);
  }
  return out;
}

absl::StatusOr<std::vector<OptimizerRun>> ParseOptimizers(absl::string_view pairs,
                                                          absl::string_view flag) {
  absl::StatusOr<std::vector<std::string>> list = SplitList(pairs, flag);
  if (!list.ok()) return list.status();
  std::vector<OptimizerRun> out;
  for (const std::string& item : *list) {
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    OptimizerRun o;
    const bool word = parts.size() == 2 && !parts[0].empty() &&
                      std::all_of(parts[0].begin(), parts[0].end(), [](char c) {
                        return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
                      });
    if (!word || !absl::SimpleAtod(parts[1], &o.lr) || !(o.lr > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", item, "' is not NAME:LR (e.g. adam:0.001, LR > 0)"));
    }
    o.name = parts[0];
    for (const OptimizerRun& seen : out) {
      if (seen.name == o.name) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, " lists ", o.name, " twice"));
      }
    }
    out.push_back(o);
  }
  return out;
}

std::set<std::string> FlagNamesFromHelp(absl::string_view helpfull) {
  // Abseil's usage lists each flag as "    --name (help...); default: ...;",
  // continuation lines indented further.
  std::set<std::string> names;
  for (absl::string_view line : absl::StrSplit(helpfull, '\n')) {
    if (!absl::ConsumePrefix(&line, "    --")) continue;
    const size_t end = line.find(' ');
    if (end == absl::string_view::npos || end == 0) continue;
    names.insert(std::string(line.substr(0, end)));
  }
  return names;
}

RowFlags ServerFlagsFor(const ConsistencyMode& mode, const OptimizerRun& optimizer,
                        const std::set<std::string>& known) {
  RowFlags out;
  std::vector<std::string> wanted = mode.server_flags;
  const bool has_optimizer_flag = known.count("optimizer") > 0;
  if (has_optimizer_flag || optimizer.name != "sgd") {
    wanted.push_back(absl::StrCat("--optimizer=", optimizer.name));
  }
  wanted.push_back(absl::StrCat("--lr=", optimizer.lr));
  for (const std::string& f : wanted) {
    if (known.count(std::string(FlagName(f))) == 0) {
      out.unsupported_flag = f;
      out.flags.clear();
      return out;
    }
    out.flags.push_back(f);
  }
  return out;
}

std::optional<EvalLine> ParseEvalLine(absl::string_view line) {
  std::vector<absl::string_view> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
  EvalLine e;
  if (w.size() < 8 || w[0] != "step" || w[6] != "test_accuracy" ||
      !absl::SimpleAtoi(w[1], &e.step) || !absl::SimpleAtod(w[7], &e.accuracy)) {
    return std::nullopt;
  }
  return e;
}

AccuracySummary Summarize(const std::vector<AccuracyPoint>& points, double target) {
  AccuracySummary s;
  for (const AccuracyPoint& p : points) {
    if (!s.time_to_target_s && p.accuracy >= target) {
      s.time_to_target_s = p.t_s;
      s.step_at_target = p.step;
    }
  }
  if (!points.empty()) {
    s.final_accuracy = points.back().accuracy;
    s.final_t_s = points.back().t_s;
  }
  return s;
}

StalenessSummary CombineStaleness(const std::vector<ShardStaleness>& shards) {
  StalenessSummary s;
  double weighted = 0;
  int64_t pushes = 0;
  for (const ShardStaleness& r : shards) {
    s.max = std::max(s.max, r.max_staleness);
    weighted += r.mean_staleness * static_cast<double>(r.pushes_accepted);
    pushes += r.pushes_accepted;
  }
  if (pushes > 0) s.mean = weighted / static_cast<double>(pushes);
  return s;
}

RepeatedRow CombineRuns(const std::vector<AccuracySummary>& runs,
                        const std::vector<StalenessSummary>& staleness) {
  RepeatedRow out;
  const double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> times, finals, final_ts, steps;
  for (const AccuracySummary& r : runs) {
    times.push_back(r.time_to_target_s.value_or(kNever));
    finals.push_back(r.final_accuracy);
    final_ts.push_back(r.final_t_s);
    if (r.time_to_target_s) {
      ++out.reached;
      steps.push_back(static_cast<double>(r.step_at_target));
    }
  }
  const double t = Median(times);
  if (t != kNever) out.median_time_to_target_s = t;
  if (!steps.empty()) out.median_step_at_target = static_cast<int64_t>(Median(steps));
  out.median_final_accuracy = Median(finals);
  out.median_final_t_s = Median(final_ts);
  double sum = 0;
  for (const StalenessSummary& s : staleness) {
    sum += s.mean;
    out.staleness.max = std::max(out.staleness.max, s.max);
  }
  if (!staleness.empty()) out.staleness.mean = sum / static_cast<double>(staleness.size());
  return out;
}

}  // namespace ps

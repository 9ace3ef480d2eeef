#include "tools/process/cpu_affinity.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ps {

absl::StatusOr<cpu_set_t> ParseCpuList(absl::string_view text, absl::string_view flag) {
  cpu_set_t set;
  CPU_ZERO(&set);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "='", text, "': ", why,
                                                   " (expected CPUs as taskset -c takes them, "
                                                   "e.g. 0 or 0-3 or 0,2)"));
  };
  if (text.empty()) return bad("empty");
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = -1, hi = -1;
    if (!absl::SimpleAtoi(ends[0], &lo) ||
        !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &hi)) {
      return bad(absl::StrCat("'", part, "' is not a CPU number or range"));
    }
    if (lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
      return bad(absl::StrCat("'", part, "' is out of range [0, ", CPU_SETSIZE, ")"));
    }
    for (int c = lo; c <= hi; ++c) CPU_SET(c, &set);
  }
  return set;
}

absl::Status PinCallingThread(const cpu_set_t& cpus, absl::string_view flag) {
  if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", CpuListString(cpus),
                                                   ": cannot run there: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string CpuListString(const cpu_set_t& cpus) {
  std::vector<std::string> parts;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &cpus)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &cpus)) ++end;
    parts.push_back(end == c ? absl::StrCat(c) : absl::StrCat(c, "-", end));
    c = end;
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace ps

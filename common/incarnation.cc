#include "common/incarnation.h"

#include "absl/strings/str_format.h"

namespace ps {

std::string IncarnationName(const Incarnation& incarnation) {
  return absl::StrFormat("run %016x start %d", incarnation.run_id, incarnation.start);
}

const char* PushOutcomeName(PushOutcome outcome) {
  switch (outcome) {
    case PushOutcome::kApplied:
      return "applied";
    case PushOutcome::kDuplicate:
      return "duplicate";
    case PushOutcome::kDropped:
      return "dropped";
  }
  return "unknown";
}

}  // namespace ps

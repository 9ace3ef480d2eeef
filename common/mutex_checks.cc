#include "common/mutex_checks.h"

#include "absl/synchronization/mutex.h"

namespace ps {

void SkipMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace ps

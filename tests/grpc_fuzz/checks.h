// Checks on the fuzzed server through the generated stubs: its status and
// health, its weights and embedding rows (all finite?), its model, its
// tables declared, and a pending sync step
// completed so that real workers can train after the fuzzing. Each opens a
// channel of its own; thread-safe.
#ifndef PS_TESTS_GRPC_FUZZ_CHECKS_H_
#define PS_TESTS_GRPC_FUZZ_CHECKS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "tests/grpc_fuzz/harness.h"

namespace ps {
namespace grpc_fuzz {

// The server's status.
absl::StatusOr<v1::StatusResponse> GetStatus(const std::string& address);

// The health service's answer ("SERVING", ...) or the call's error.
std::string HealthStatus(const std::string& address);

// Sync mode: a step that some but not all workers pushed (the fuzzer's valid
// pushes) would make the real workers' pushes for that step collide. Pushes
// zero gradients for the missing workers to complete it.
absl::Status CompletePendingStep(Harness& h, const std::string& address);

// Declares kTables: worker 0's InitParams with the server's model (h.spec)
// and the tables, as a worker that declares them rejoins.
absl::Status DeclareTables(const Harness& h, const std::string& address);

// Pulls rows 0..kMaxIdsPerRequest-1 of each of kTables (creating those
// missing while the tables have room); a description of the first
// non-finite value, or "" (also when a table is full).
std::string NonFiniteRows(const std::string& address);

// Pulls the weights; a description of the first non-finite value, or "".
std::string NonFiniteWeights(const std::string& address);

// Loads the model the server reports (spec and this shard's layout).
absl::StatusOr<std::vector<SliceInfo>> ServerModel(const std::string& address, int num_workers);

}  // namespace grpc_fuzz
}  // namespace ps

#endif  // PS_TESTS_GRPC_FUZZ_CHECKS_H_

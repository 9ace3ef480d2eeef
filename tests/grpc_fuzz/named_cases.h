// The named cases of the gRPC fuzz test: the requests the fuzzing is meant
// to catch (chunk ranges that wrap past INT64_MAX, NaN/Inf gradients, lying
// lengths, specs whose element count wraps, bytes that are no protobuf to
// every unary RPC, waits that must end or be cancelled), run one at a time
// after the real init, each reported by name.
#ifndef PS_TESTS_GRPC_FUZZ_NAMED_CASES_H_
#define PS_TESTS_GRPC_FUZZ_NAMED_CASES_H_

#include <functional>
#include <string>
#include <vector>

#include "tests/grpc_fuzz/case_gen.h"
#include "tests/grpc_fuzz/harness.h"

namespace ps {
namespace grpc_fuzz {

struct NamedCase {
  std::string name;
  // Runs the case; returns what went wrong, or "".
  std::function<std::string(Harness&, CaseGen&)> run;
};

std::vector<NamedCase> NamedCases();

}  // namespace grpc_fuzz
}  // namespace ps

#endif  // PS_TESTS_GRPC_FUZZ_NAMED_CASES_H_

// The unary cases of the gRPC fuzz test: one call of one RPC with a request
// from CaseGen, recorded in the Harness's tally (row "unary <name>").
//
// The RPCs are every method of ps.v1.ParameterServer, read from its service
// descriptor in the generated descriptor pool, so that a new RPC is fuzzed
// without an edit here (its requests come from CaseGen::Generic until it gets
// a generator of its own); plus grpc.health.v1.Health/Check, methods that do
// not exist, and the streaming methods called as unary (one message, then
// half-closed). Thread-safe.
#ifndef PS_TESTS_GRPC_FUZZ_UNARY_CASES_H_
#define PS_TESTS_GRPC_FUZZ_UNARY_CASES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/grpc_fuzz/case_gen.h"
#include "tests/grpc_fuzz/harness.h"

namespace ps {
namespace grpc_fuzz {

struct UnaryRpc {
  std::string name;    // "Push", "Health.Check", "Stream (as unary)", ...
  std::string method;  // "/ps.v1.ParameterServer/Push"; random for the unknown method
  bool unary = true;   // a unary method that exists (not streaming, not made up)
  int weight = 8;      // relative frequency among the random cases
  // The request, as bytes; sets `method` for the unknown method.
  std::function<Request(CaseGen&, const Harness&, std::string* method)> make;
  int version_field = 0;  // the response's int64 `version` field (0: none)
};

// The RPCs the unary cases call; built once from the descriptors.
const std::vector<UnaryRpc>& UnaryRpcs();

// One random unary case. Before worker 0 initialized the model
// (`before_init`), no InitParams: a fuzzed one could create a garbage model
// that the real worker's init would then rightly fail to match.
void UnaryCase(Harness& h, uint64_t seed, int index, bool before_init);

}  // namespace grpc_fuzz
}  // namespace ps

#endif  // PS_TESTS_GRPC_FUZZ_UNARY_CASES_H_

// The stream cases of the gRPC fuzz test: a script of StreamRequests on one
// Stream call (calls complete or cut short, out of order, mutated, with
// offsets at the int64 edges or NaN/Inf data), then how the client ends the
// stream; each call's answer and the stream's end are recorded in the
// Harness. Thread-safe (each case has its own CaseGen and stream).
#ifndef PS_TESTS_GRPC_FUZZ_STREAM_CASES_H_
#define PS_TESTS_GRPC_FUZZ_STREAM_CASES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "tests/grpc_fuzz/case_gen.h"
#include "tests/grpc_fuzz/harness.h"

namespace ps {
namespace grpc_fuzz {

// A stream case: a script of request messages, then how the client ends.
struct StreamScript {
  std::string what;
  std::vector<std::string> messages;  // encoded StreamRequests, in order
  enum class End {
    kWritesDone,  // half-close (also mid-call: the server must still end the stream)
    kSilent,      // stop writing mid-call without half-closing
    kCancel,      // cancel after `cancel_after`
  } end = End::kWritesDone;
  absl::Duration cancel_after;
  uint64_t silent_call = 0;               // kSilent: the call left open
  std::map<uint64_t, std::string> calls;  // call_id -> kind, for the tally
  bool clean = true;                      // no message mutated
  bool complete_calls = false;            // every call complete, ids increasing
  bool must_fail = false;                 // every call is invalid: no OK answer allowed
  bool nonfinite = false;                 // ... because of NaN/Inf data
};

// Adds `msgs` (one call) to the script, each as it is or, at `rate`, mutated
// (and now and then garbled).
void AddCall(CaseGen& g, StreamScript* s, uint64_t call_id, int kind,
             const std::vector<v1::StreamRequest>& msgs, double rate);

// Indices of all the harness's slices.
std::vector<int> AllSlices(const Harness& h);

// The chunks that wedged a server: (offset 0, length 1), (1, 2^63-1 with
// `data_bytes` of data), (the wrapped offset 1 + 2^63-1, length 0). A check
// of offset + length that wraps lets the second through; it "covers" the
// slice if its data fills what is left of the buffer (a clamped span), and
// then the third starts at INT64_MIN.
std::vector<v1::TensorSlice> WrappingChunks(const Harness& h, int i, size_t data_bytes);

// A random stream case.
StreamScript RandomStreamScript(CaseGen& g, const Harness& h);

// Runs a stream script; records the stream's end and every call's answer.
// Returns what went wrong (also recorded as a finding), or "".
std::string RunStream(Harness& h, int index, const StreamScript& s);

}  // namespace grpc_fuzz
}  // namespace ps

#endif  // PS_TESTS_GRPC_FUZZ_STREAM_CASES_H_

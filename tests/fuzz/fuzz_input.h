// The input format of the wire fuzzer (tests/fuzz/wire_fuzz.cc), shared by
// the fuzz target and the seed-corpus generator (tests/fuzz/make_corpus.cc).
//
// One input is a small header followed by one message:
//
//   byte 0   which decoder gets the message (FuzzTarget, modulo kNumTargets)
//   byte 1   the layout the decoded slices are assembled into:
//            shard (b / 3) % S of S = 1 + b % 3 shards of FuzzSpec()
//   byte 2   n = b % 8 cut points follow, 2 bytes each (little-endian), each
//            taken modulo (message size + 1): the message is handed to the
//            decoder as the n + 1 pieces between the sorted cuts (some may be
//            empty), as a received gRPC message arrives in several slices
//   rest     the message: protobuf bytes of proto/ps.proto, or for
//            kModelSpec the compact spec encoding of EncodeFuzzSpec
//
// (Inputs written before the row targets existed, with byte 0 of 8 or more,
// now reach another target; the seed corpus uses 0..10 only.)
//
// An input too short for its header is ignored by the target. Plain
// functions of their arguments; thread-safe.
#ifndef PS_TESTS_FUZZ_FUZZ_INPUT_H_
#define PS_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/model_spec.h"

namespace ps {
namespace fuzz {

enum class FuzzTarget : uint8_t {
  kPushRequest = 0,      // DecodePushRequest, then the slices are assembled
  kPushPullRequest = 1,  // DecodePushPullRequest, then the slices are assembled
  kPullRequest = 2,      // DecodePullRequest
  kPullResponse = 3,     // DecodePullResponse, then the slices are assembled
  kStreamRequest = 4,    // DecodeStreamRequest, then the slices are assembled
  kStreamResponse = 5,   // DecodeStreamResponse, then the slices are assembled
  kTensorSlice = 6,      // ReadTensorSlice, then the slice is assembled
  kModelSpec = 7,        // DecodeFuzzSpec, ValidateModelSpec, the partition
  // Embedding rows (tests/fuzz/rows_fuzz.h): protobuf parsed whole; the
  // cut count picks the server's settings instead of cutting.
  kPullRowsRequest = 8,  // PullRowsRequest through SparseTables::Pull
  kPushRowsRequest = 9,  // PushRowsRequest through SparseTables::Push
  kTableSpecs = 10,      // ModelSpec: TablesFromProto, ValidateTableSpecs, Declare
};
inline constexpr int kNumTargets = 11;

// Short lower-case name of a target ("push_request", ...), for file names.
const char* TargetName(FuzzTarget target);

// The model every layout is cut from: a 4-3-2 MLP, 23 elements.
const ModelSpec& FuzzSpec();

struct FuzzInput {
  FuzzTarget target = FuzzTarget::kPushRequest;
  int num_shards = 1;
  int shard = 0;
  std::vector<size_t> cuts;  // sorted, each <= message.size()
  absl::string_view message;  // views the input
};

// Splits `data` into header and message; false if it is too short.
bool ParseFuzzInput(absl::string_view data, FuzzInput* out);

// The input that ParseFuzzInput reads back as `target`, shard `shard` of
// `num_shards` (1..3), `message` cut at `cuts` (at most 7, each <= 65535).
std::string MakeFuzzInput(FuzzTarget target, int num_shards, int shard,
                          const std::vector<size_t>& cuts, absl::string_view message);

// The compact spec encoding of the kModelSpec target, one tensor after the
// other: varint name size, the name, varint rank, one varint per dimension
// (int64 as two's complement, like protobuf). A truncated last tensor is
// dropped.
std::string EncodeFuzzSpec(const ModelSpec& spec);
ModelSpec DecodeFuzzSpec(absl::string_view bytes);

}  // namespace fuzz
}  // namespace ps

#endif  // PS_TESTS_FUZZ_FUZZ_INPUT_H_

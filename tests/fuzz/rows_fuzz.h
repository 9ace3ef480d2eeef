// The embedding-row targets of the wire fuzzer (tests/fuzz/wire_fuzz.cc):
// the requests PullRows and PushRows decode, taken through what the shard
// does with them (server/core/sparse_tables.h, with declared tables), and the
// tables of a ModelSpec (TablesFromProto, ValidateTableSpecs, then
// SparseTables::Declare).
//
// The message is protobuf bytes of proto/ps.proto, parsed whole (protobuf's
// parser, not one of ours, so the input's cut points are not needed to cut
// it): they choose the server's settings instead, see RowsSetting in
// rows_fuzz.cc. Each function aborts (FUZZ_CHECK) when a property breaks:
//   - every status is OK or one of the codes the contract names
//     (NOT_FOUND, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, FAILED_PRECONDITION
//     for a push of a later step), and never passes the ids on to allocate
//     more than the table and the per-pull bound allow;
//   - a pull that succeeds returns ids * dim finite floats, and the same
//     floats again when repeated;
//   - no table holds more than --max_rows rows;
//   - a push that is applied and offered again is a duplicate (sync, or
//     async with a seq);
//   - an accepted table spec is within its limits and declares.
// Plain functions; thread-compatible (libFuzzer calls them from one thread).
#ifndef PS_TESTS_FUZZ_ROWS_FUZZ_H_
#define PS_TESTS_FUZZ_ROWS_FUZZ_H_

#include "tests/fuzz/fuzz_input.h"

namespace ps {
namespace fuzz {

void FuzzPullRows(const FuzzInput& in);
void FuzzPushRows(const FuzzInput& in);
void FuzzTableSpecs(const FuzzInput& in);

}  // namespace fuzz
}  // namespace ps

#endif  // PS_TESTS_FUZZ_ROWS_FUZZ_H_

// CtrReader: reads click logs from text files into CtrExamples
// (worker/ctr/data.h), one example a line, so a user with real data can train
// on it. Two formats:
//
// Criteo TSV (the Display Advertising Challenge's train.txt): 40
// tab-separated fields, label (0 or 1), 13 integer fields, 26 categorical
// tokens (8 hex digits in Criteo's files; any token is accepted). Any field
// but the label may be empty.
//   - dense[j] = log(1 + x) for x >= 0, -log(1 - x) for x < 0 (Criteo's second
//     column has small negative counts; the sign is kept), 0 when empty;
//   - ids[f] = CtrFeatureId(f, 52 bits of a 64-bit hash of the token), the
//     hash fixed by this file (FNV-1a then SplitMix64), never kMissingRawId; an
//     empty field is CtrFeatureId(f, kMissingRawId).
//
// libsvm: "label index:value index:value ...", separated by spaces or tabs,
// "#" starting a comment. The label is a number, positive meaning a click
// (so 0/1 and -1/+1 files both work). Indices are non-negative integers, in
// the line's order:
//   - an index in [dense_base, dense_base + 13) sets dense[index - dense_base]
//     = value (as is, not log-transformed) when dense_base >= 0;
//   - every other pair with a nonzero value is the line's next categorical
//     value: the k-th goes to feature k mod 26 with raw id = the index (which
//     must be < 2^52 - 1); when the feature already holds one (k >= 26, e.g.
//     LIBSVM's one-hot "criteo" files with 39 pairs a line) the raw id becomes
//     a hash of the two (a cross). The value is otherwise ignored: one-hot
//     files write 1. A pair with value 0 is absent.
//   - features that get no pair hold the missing id.
//
// Errors: a malformed line is INVALID_ARGUMENT "<path>:<line>: <what>"; a
// missing file NOT_FOUND, one that cannot be opened UNAVAILABLE with the
// errno's message, a read error DATA_LOSS. Empty lines are
// skipped (in libsvm files also those holding only spaces or a comment).
// Stateless functions: thread-safe.
#ifndef PS_WORKER_CTR_READER_H_
#define PS_WORKER_CTR_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/ctr/data.h"

namespace ps {

enum class CtrFormat { kCriteoTsv, kLibsvm };

struct CtrReaderOptions {
  CtrFormat format = CtrFormat::kCriteoTsv;
  // libsvm only: the index of dense[0], or -1 for no dense pairs (every
  // pair categorical).
  int64_t libsvm_dense_base = -1;
  // Stop after this many examples; -1 reads the whole file.
  int64_t max_examples = -1;
};

// The 52-bit raw id of a Criteo categorical token (never kMissingRawId).
uint64_t CtrTokenRawId(absl::string_view token);

// Parse one line (without its newline) into *example. INVALID_ARGUMENT
// saying what is wrong (without the file and line; the readers add them).
absl::Status ParseCriteoLine(absl::string_view line, CtrExample* example);
absl::Status ParseLibsvmLine(absl::string_view line, int64_t dense_base,
                             CtrExample* example);

// Calls `fn` on each example of the file in order; stops at the first error
// (its own or fn's) and returns it.
absl::Status ForEachCtrExample(const std::string& path, const CtrReaderOptions& options,
                               const std::function<absl::Status(const CtrExample&)>& fn);

// The whole file (or its first max_examples) in memory, 264 bytes an
// example (sizeof(CtrExample)).
absl::StatusOr<std::vector<CtrExample>> ReadCtrFile(const std::string& path,
                                                    const CtrReaderOptions& options);

}  // namespace ps

#endif  // PS_WORKER_CTR_READER_H_

// The flags of ps_bench that several of its modes read: declared here,
// defined in bench_flags.cc, each mode's own flags beside it
// (bench_<mode>_flags.cc, read by the mode's <Mode>OptionsFromFlags in its
// header). Read after absl::ParseCommandLine; not thread-safe against a
// concurrent flag change.
#ifndef PS_TOOLS_BENCH_BENCH_FLAGS_H_
#define PS_TOOLS_BENCH_BENCH_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "tools/bench/bench_common.h"

ABSL_DECLARE_FLAG(std::string, ops);          // transport, sparse
ABSL_DECLARE_FLAG(double, seconds);           // transport, apply, sparse
ABSL_DECLARE_FLAG(int, warmup);               // transport, sparse
ABSL_DECLARE_FLAG(bool, json);                // every mode but consistency
ABSL_DECLARE_FLAG(bool, tls);                 // transport, train
ABSL_DECLARE_FLAG(std::string, tls_dir);      // transport, train
ABSL_DECLARE_FLAG(std::string, dataset_dir);  // train, consistency
ABSL_DECLARE_FLAG(int64_t, max_steps);        // train (mlp and ctr)
ABSL_DECLARE_FLAG(double, row_timeout);       // consistency, train --processes
ABSL_DECLARE_FLAG(int, repeats);              // consistency, train --scrape_every

namespace ps {

// --tls and --tls_dir.
BenchTls BenchTlsFromFlags();

// --server_binary, or the ps_server built beside ps_bench
// (tools/process/runfiles.h); NOT_FOUND when there is none.
absl::StatusOr<std::string> ServerBinaryFromFlags();

// --worker_binary, or the ps_worker built beside ps_bench.
absl::StatusOr<std::string> WorkerBinaryFromFlags();

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_FLAGS_H_

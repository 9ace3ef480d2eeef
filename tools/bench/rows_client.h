// One client process of ps_bench sparse's cold workload
// (tools/bench/bench_rows_cold.h): ps_bench re-run as
// `ps_bench sparse --rows_client=W ...` by ChildProcess, the one launcher.
//
// It talks to its parent on stdout, a line per step, and waits for the
// parent's go: a byte on a FIFO the parent made (`go_fifo`), read with a
// deadline; a go sent early waits in the FIFO.
//   ready DISTINCT DRAWS     connected, its share of the pool's rows created
//   warm                     (after a go) the operation's warm-up is done
//   result OP OPS SECONDS P50_US P99_US   (after a go) the timed phase
// and exits 0, or prints "error MESSAGE" and exits 1.
#ifndef PS_TOOLS_BENCH_ROWS_CLIENT_H_
#define PS_TOOLS_BENCH_ROWS_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tools/bench/rows_pool.h"

namespace ps {

struct RowsClientOptions {
  std::vector<std::string> servers;  // addresses of shard 0, 1, ...
  int client = 0;                    // this client's number (its worker id)
  int clients = 1;                   // W
  std::string transport = "stream";  // the client's transport
  int dim = 16;
  RowsPoolOptions pool;
  std::vector<std::string> ops;  // pull, push, push_pull
  absl::Duration warmup = absl::Milliseconds(500);
  absl::Duration duration = absl::Seconds(2);
  std::string go_fifo;                            // the parent's FIFO of go bytes
  absl::Duration go_timeout = absl::Minutes(10);  // longest wait for a go
};

// Runs the client's part; OK when every result was printed.
absl::Status RunRowsClient(const RowsClientOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_ROWS_CLIENT_H_

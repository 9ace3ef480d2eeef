#include "tools/bench/rows_client.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ps_client.h"
#include "common/embedding_shard.h"
#include "common/status_macros.h"
#include "tools/bench/bench_common.h"

namespace ps {
namespace {

constexpr char kTable[] = "rows";

// The read end of the parent's FIFO, opened read-write so that it never
// reads end-of-file while the parent has not opened it yet.
class GoFifo {
 public:
  static absl::StatusOr<GoFifo> Open(const std::string& path) {
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open --rows_go_fifo ", path));
    return GoFifo(fd);
  }
  GoFifo(GoFifo&& o) : fd_(std::exchange(o.fd_, -1)) {}
  ~GoFifo() {
    if (fd_ >= 0) close(fd_);
  }

  // Waits for the parent's next go byte until `timeout`.
  absl::Status Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      pollfd p = {fd_, POLLIN, 0};
      const int n = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      char c;
      if (n > 0 && read(fd_, &c, 1) == 1) return absl::OkStatus();
      if (n < 0 && errno != EINTR) {
        return absl::InternalError(absl::StrCat("poll of the go FIFO: errno ", errno));
      }
    }
    return absl::DeadlineExceededError(
        absl::StrCat("no go from ps_bench within ", absl::FormatDuration(timeout)));
  }

 private:
  explicit GoFifo(int fd) : fd_(fd) {}
  int fd_;
};

void Say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

absl::Status RunRowsClient(const RowsClientOptions& o) {
  ASSIGN_OR_RETURN(GoFifo go, GoFifo::Open(o.go_fifo));
  ASSIGN_OR_RETURN(const RowsPool pool, MakeRowsPool(o.pool));
  ClientOptions co;
  co.servers = o.servers;
  co.worker_id = o.client;
  co.num_workers = o.clients;
  ASSIGN_OR_RETURN(co.transport, ParseTransport(o.transport));
  ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Connect(co));
  RETURN_IF_ERROR(client->DeclareTables({TableSpec{kTable, o.dim, 1, 0.01f}}));
  TensorList init = {{0.0f}};
  // Client 0 creates the (unused) dense parameter; the others join.
  RETURN_IF_ERROR(client->Init({{"unused", {1}}}, o.client == 0 ? &init : nullptr));
  const int64_t k = o.pool.ids_per_request;
  // Gradients in [-1, 1), as ps-lite's driver pushes.
  std::vector<float> grads(static_cast<size_t>(k) * o.dim);
  for (size_t i = 0; i < grads.size(); ++i) {
    grads[i] = static_cast<float>((Mix64(i + 1) >> 11) * 0x1.0p-53 * 2 - 1);
  }
  // This client's share of the rows, created before timing.
  for (size_t c = o.client; c < pool.populate.size(); c += o.clients) {
    const std::vector<uint64_t>& ids = pool.populate[c];
    std::vector<float> g(ids.size() * o.dim);
    for (size_t i = 0; i < g.size(); ++i) g[i] = grads[i % grads.size()];
    RETURN_IF_ERROR(client->PushRows(kTable, ids, g));
  }
  Say(absl::StrCat("ready ", pool.distinct_ids, " ", pool.draws_per_request));
  std::vector<float> out(grads.size());
  size_t cursor = pool.requests.size() * o.client / o.clients;  // clients apart
  for (const std::string& op : o.ops) {
    const auto once = [&]() -> absl::Status {
      const std::vector<uint64_t>& ids = pool.requests[cursor++ % pool.requests.size()];
      if (op == "pull") return client->PullRows(kTable, ids, absl::MakeSpan(out));
      if (op == "push") return client->PushRows(kTable, ids, grads);
      return client->PushPullRows(kTable, ids, grads, absl::MakeSpan(out));
    };
    RETURN_IF_ERROR(go.Wait(o.go_timeout));
    const absl::Time warm_start = absl::Now();
    for (int i = 0; i < 2 || absl::Now() - warm_start < o.warmup; ++i) RETURN_IF_ERROR(once());
    Say("warm");
    RETURN_IF_ERROR(go.Wait(o.go_timeout));
    std::vector<absl::Duration> lat;
    const absl::Time start = absl::Now();
    absl::Time now = start;
    while (now - start < o.duration || lat.size() < 3) {
      RETURN_IF_ERROR(once());
      const absl::Time end = absl::Now();
      lat.push_back(end - now);
      now = end;
    }
    Say(absl::StrFormat("result %s %d %.6f %.1f %.1f", op, lat.size(),
                        absl::ToDoubleSeconds(now - start), Percentile(lat, 0.5),
                        Percentile(lat, 0.99)));
  }
  return absl::OkStatus();
}

}  // namespace ps

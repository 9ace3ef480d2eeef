// What every case of the gRPC fuzz test shares (tests/grpc_fuzz/): its
// configuration (seeds, bounds, server flags), the real ps_server and
// ps_worker binaries as child processes, the model the cases aim at, and
// the tallies and findings the cases record. The Harness of one mode is
// shared by all its cases: its counters, Tally and Findings are thread-safe;
// its model and stubs are set before the cases start and only read by them.
#ifndef PS_TESTS_GRPC_FUZZ_HARNESS_H_
#define PS_TESTS_GRPC_FUZZ_HARNESS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/ps.pb.h"
#include "tests/proto_fuzzer.h"
#include "tools/process/child_process.h"
#include "tools/process/server_process.h"

namespace ps {
namespace grpc_fuzz {

// The binaries under test: argv[1] and argv[2] of the test.
extern std::string g_server_bin;
extern std::string g_worker_bin;

inline constexpr uint64_t kDefaultSeed = 20240917;
// Random cases per mode; plus kPreInitCases and the named ones.
inline constexpr int kDefaultCasesPerMode = 5000;
inline constexpr int kPreInitCases = 200;
inline constexpr int kThreads = 48;  // cases in flight at once
inline constexpr int kChannels = 4;  // client connections they share

// The server's longest legitimate wait (--pull_timeout): a pull for a
// version that does not come, or a non-zero worker's init before worker 0's.
// (The client's deadline, kClientDeadline, is well past it.)
inline constexpr int kPullTimeoutS = 2;
// Without --call_timeout (FUZZ_SERVER_FLAGS=--call_timeout=0), a stream left
// silent mid-call may wait forever: the server cannot tell a slow worker from
// a gone one. Those cases then cancel themselves after this.
inline constexpr absl::Duration kSilentGiveUp = absl::Seconds(2);
// Bound on the server's peak RSS (VmHWM). The model is 535,818 floats
// (2.1 MB). A correct server holds at most: 2 pooled weight buffers plus one
// snapshot per pull still being sent (at most kThreads), one gradient buffer
// per stream push being assembled and per sync worker pending (at most
// kThreads + 2), and the received bytes of each request in flight (at most
// kThreads requests of at most ~5 MB: a full push whose data the fuzzer
// doubled or padded by 1 MiB): 48 x (2.1 + 2.1 + 5) MB ~ 440 MB at worst,
// plus some 30 MB of code, gRPC and allocator slack; 200-310 MiB measured.
// A leak of one buffer per case (10,000 cases) or an allocation sized by a
// request's declared length (InitParams of a 2^28-element spec: 1 GiB)
// goes well past it.
inline constexpr int64_t kRssBoundBytes = int64_t{512} << 20;
inline constexpr absl::Duration kShutdownBound = absl::Seconds(15);
// The server's address-space limit, so that a request that makes it allocate
// without bound fails there (bad_alloc) instead of exhausting this shared
// machine. Far above kRssBoundBytes: gRPC's threads reserve stacks and the
// allocator reserves arenas without touching them.
inline constexpr uint64_t kServerAddressSpace = uint64_t{8} << 30;
inline constexpr char kDatasetDir[] = "/usr/share/datasets/fashion-mnist";

// Embedding tables: DeclareTables (checks.h) declares these after the real
// init, and every ps_server here runs with these row bounds (ServerFlags),
// small so that the row cases reach them.
struct FuzzTable {
  const char* name;
  int dim;
};
inline constexpr FuzzTable kTables[] = {{"emb", 8}, {"wide", 64}};
inline constexpr int kMaxRows = 64;           // --max_rows
inline constexpr int kMaxIdsPerRequest = 32;  // --max_ids_per_request

// Flags of every ps_server started here, besides --listen, --port_file,
// --mode and --num_workers; FUZZ_SERVER_FLAGS adds some.
std::vector<std::string> ServerFlags();
// The server's --call_timeout if `flags` pass one.
std::optional<absl::Duration> CallTimeout(const std::vector<std::string>& flags);
// FUZZ_SEED, or kDefaultSeed.
uint64_t Seed();
// FUZZ_CASES, or kDefaultCasesPerMode.
int CasesPerMode();
// One generator seed per case, so that a case does not depend on the others.
uint64_t CaseSeed(uint64_t seed, absl::string_view mode, int phase, int index);
// Where logs go: the test's undeclared outputs.
std::string OutputDir();
std::string MiB(int64_t bytes);
// The same, or why the bytes could not be read.
std::string MiB(const absl::StatusOr<int64_t>& bytes);

// ps_server in `mode` on 127.0.0.1, as a child process, serving.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartServer(const std::string& tag,
                                                           absl::string_view mode, int num_workers,
                                                           const std::vector<std::string>& flags);

struct WorkersResult {
  bool ok = true;        // every worker exited with status 0
  std::string report;    // per worker: how it ended, with its log's tail if it failed
  double accuracy = -1;  // worker 0's final test accuracy
};

// Runs workers 0..num_workers-1 of the real ps_worker against `address` for
// `steps` steps, in parallel, and waits for them (at most 3 minutes).
WorkersResult RunWorkers(const std::string& tag, const std::string& address, int num_workers,
                         int steps);

// Counts of outcomes per row ("unary Push", "stream call PUSH", ...).
// Thread-safe.
class Tally {
 public:
  // `example`: a status message, kept (the first of each outcome) for
  // FUZZ_VERBOSE=1.
  void Add(const std::string& row, const std::string& outcome, const std::string& example = "") {
    absl::MutexLock l(&mu_);
    if (++rows_[row][outcome] == 1 && !example.empty()) examples_[row][outcome] = example;
  }

  std::string Format() const {
    absl::MutexLock l(&mu_);
    std::string out;
    for (const auto& [row, outcomes] : rows_) {
      int64_t n = 0;
      std::vector<std::pair<int64_t, std::string>> sorted;
      for (const auto& [o, c] : outcomes) {
        n += c;
        sorted.emplace_back(-c, o);
      }
      std::sort(sorted.begin(), sorted.end());
      std::vector<std::string> parts;
      for (const auto& [c, o] : sorted) parts.push_back(absl::StrCat(o, " ", -c));
      absl::StrAppendFormat(&out, "  %-26s %6d  %s\n", row, n, absl::StrJoin(parts, ", "));
      if (std::getenv("FUZZ_VERBOSE") == nullptr) continue;
      for (const auto& [o, e] : examples_[row])
        absl::StrAppend(&out, "      e.g. ", o, ": ", e, "\n");
    }
    return out;
  }
  // Cases recorded in `row`.
  int64_t Count(const std::string& row) const {
    absl::MutexLock l(&mu_);
    auto it = rows_.find(row);
    int64_t n = 0;
    if (it != rows_.end()) {
      for (const auto& [outcome, c] : it->second) n += c;
    }
    return n;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, int64_t>> rows_ ABSL_GUARDED_BY(mu_);
  mutable std::map<std::string, std::map<std::string, std::string>> examples_ ABSL_GUARDED_BY(mu_);
};

// Problems found, by kind, each with the case that showed it. Thread-safe.
class Findings {
 public:
  void Add(const std::string& kind, std::string detail) {
    absl::MutexLock l(&mu_);
    by_kind_[kind].push_back(std::move(detail));
  }

  int64_t size() const {
    absl::MutexLock l(&mu_);
    int64_t n = 0;
    for (const auto& [kind, details] : by_kind_) n += details.size();
    return n;
  }

  // Each kind with its count and its first `examples` cases.
  std::string Format(size_t examples) const {
    absl::MutexLock l(&mu_);
    std::string out;
    for (const auto& [kind, details] : by_kind_) {
      absl::StrAppend(&out, "  ", details.size(), " x ", kind, ", e.g.\n");
      for (size_t i = 0; i < details.size() && i < examples; ++i) {
        absl::StrAppend(&out, "      ", details[i].substr(0, 300), "\n");
      }
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<std::string>> by_kind_ ABSL_GUARDED_BY(mu_);
};

// One slice of the model that the server owns.
struct SliceInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t length = 0;
  int64_t flat_offset = 0;  // where it starts in the shard's flat buffer (slices in order)
};

// The 784-512-256-10 MLP that ps_worker creates, as one shard owns it
// (whole tensors, in spec order). Before the real init the cases aim at it.
std::vector<SliceInfo> MlpSlices();

struct Harness {
  std::string mode;   // "sync" or "async"
  std::string phase;  // of the cases running now, to name them in findings
  int num_workers = 1;
  std::optional<absl::Duration> call_timeout;  // the server's, if the flags pass one
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  std::vector<SliceInfo> slices;
  v1::ModelSpec spec;
  int64_t total_elements = 0;  // of the shard's slices
  // Per slice: `length` small float32 values (|x| <= 1e-4). Accepted
  // gradients stay small, so that the fuzzing leaves a model that still
  // trains; the extreme values go into requests that must be refused.
  std::vector<std::string> grad_data;
  FieldHints hints;

  std::atomic<int64_t> version{0};  // the newest version any answer showed
  std::atomic<int64_t> unary_cases{0};
  std::atomic<int64_t> stream_cases{0};
  std::atomic<int64_t> messages{0};  // request messages sent
  std::atomic<int64_t> nonfinite_accepted{0};
  std::atomic<int64_t> no_server_status{0};
  std::atomic<int64_t> metadata_too_large{0};
  Tally tally;
  Findings findings;

  grpc::GenericStub* stub(int i) { return stubs[i % stubs.size()].get(); }

  void SawVersion(int64_t v) {
    int64_t cur = version.load();
    while (v > cur && !version.compare_exchange_weak(cur, v)) {
    }
  }

  // Sets the model the cases aim at, and the plausible field values.
  void SetModel(std::vector<SliceInfo> s);
};

// Records a call's outcome in `row`; a call the server never answered is a
// finding.
void Record(Harness& h, const std::string& row, const grpc::Status& s, bool we_cancelled,
            const std::string& what);

// Runs one_case(i) for i in [0, n) on kThreads threads.
void RunCases(int n, const std::function<void(int)>& one_case);

}  // namespace grpc_fuzz
}  // namespace ps

#endif  // PS_TESTS_GRPC_FUZZ_HARNESS_H_

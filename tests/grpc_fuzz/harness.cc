#include "tests/grpc_fuzz/harness.h"

#include <sys/wait.h>

#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/grpc_fuzz/calls.h"

namespace ps {
namespace grpc_fuzz {

using grpc::StatusCode;

std::string g_server_bin;
std::string g_worker_bin;

std::vector<std::string> ServerFlags() {
  std::vector<std::string> flags = {
      absl::StrCat("--pull_timeout=", kPullTimeoutS),
      // The server fails a stream call left silent mid-way after 2 s, and
      // the silent-stream cases require it to (see RunStream, End::kSilent).
      "--call_timeout=2",
      absl::StrCat("--max_rows=", kMaxRows),
      absl::StrCat("--max_ids_per_request=", kMaxIdsPerRequest),
  };
  // FUZZ_SERVER_FLAGS="--call_timeout=2 ..." adds flags without an edit.
  if (const char* extra = std::getenv("FUZZ_SERVER_FLAGS")) {
    for (absl::string_view f : absl::StrSplit(extra, ' ', absl::SkipEmpty())) {
      flags.emplace_back(f);
    }
  }
  return flags;
}

std::optional<absl::Duration> CallTimeout(const std::vector<std::string>& flags) {
  std::optional<absl::Duration> t;
  for (const std::string& f : flags) {
    absl::string_view v = f;
    double s;
    if (absl::ConsumePrefix(&v, "--call_timeout=") && absl::SimpleAtod(v, &s)) {
      t = absl::Seconds(s);
    }
  }
  return t;
}

uint64_t Seed() {
  static const uint64_t seed = [] {
    uint64_t s = kDefaultSeed;
    const char* env = std::getenv("FUZZ_SEED");
    if (env != nullptr && !absl::SimpleAtoi(env, &s)) {
      ADD_FAILURE() << "FUZZ_SEED=" << env << " is not a number";
    }
    return s;
  }();
  return seed;
}

int CasesPerMode() {
  int n = kDefaultCasesPerMode;
  const char* env = std::getenv("FUZZ_CASES");
  if (env != nullptr && !absl::SimpleAtoi(env, &n)) ADD_FAILURE() << "bad FUZZ_CASES=" << env;
  return n;
}

uint64_t CaseSeed(uint64_t seed, absl::string_view mode, int phase, int index) {
  uint64_t z = seed ^ (std::hash<std::string>()(std::string(mode)) * 0x9e3779b97f4a7c15ull) ^
               (uint64_t(phase) << 48) ^ uint64_t(index);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finalizer
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string OutputDir() {
  for (const char* var : {"TEST_UNDECLARED_OUTPUTS_DIR", "TEST_TMPDIR"}) {
    if (const char* d = std::getenv(var)) return d;
  }
  return "/tmp";
}

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

std::string MiB(const absl::StatusOr<int64_t>& bytes) {
  return bytes.ok() ? MiB(*bytes) : absl::StrCat("unknown (", bytes.status().message(), ")");
}

absl::StatusOr<std::unique_ptr<ServerProcess>> StartServer(const std::string& tag,
                                                           absl::string_view mode, int num_workers,
                                                           const std::vector<std::string>& flags) {
  ServerProcessOptions o;
  o.binary = g_server_bin;
  o.flags = {absl::StrCat("--mode=", mode), absl::StrCat("--num_workers=", num_workers)};
  o.flags.insert(o.flags.end(), flags.begin(), flags.end());
  o.dir = OutputDir();
  o.name = absl::StrCat(tag, "_server");
  // So that a runaway allocation fails in the server instead of exhausting
  // a shared machine.
  o.address_space = kServerAddressSpace;
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(o);
  if (server.ok()) std::cout << "started " << (*server)->command_line() << std::endl;
  return server;
}

WorkersResult RunWorkers(const std::string& tag, const std::string& address, int num_workers,
                         int steps) {
  WorkersResult r;
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int w = 0; w < num_workers; ++w) {
    std::vector<std::string> argv = {
        g_worker_bin, "--servers=" + address, absl::StrCat("--worker_id=", w),
        absl::StrCat("--num_workers=", num_workers), absl::StrCat("--max_steps=", steps),
        "--batch_size=64", absl::StrCat("--dataset_dir=", kDatasetDir), "--threads=1",
        // Both client transports: worker 0 streams, worker 1 makes unary calls.
        w % 2 == 0 ? "--transport=stream" : "--transport=unary", "--wait_timeout=60",
        "--connect_timeout=10"};
    auto child = ChildProcess::Spawn(
        argv, absl::StrCat(OutputDir(), "/", tag, "_worker", w, ".log"), /*pipe_stdout=*/false);
    if (!child.ok()) {
      r.ok = false;
      absl::StrAppend(&r.report, child.status().ToString(), "\n");
      return r;
    }
    workers.push_back(*std::move(child));
  }
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  for (int w = 0; w < num_workers; ++w) {
    std::optional<int> st = workers[w]->Wait(deadline);
    const bool ok = st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
    r.ok = r.ok && ok;
    absl::StrAppend(&r.report, "  worker ", w, ": ", DescribeExit(st), "\n");
    if (!ok) absl::StrAppend(&r.report, workers[w]->LogTail(15));
  }
  std::ifstream in(workers[0]->log());
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("final test_accuracy ");
    if (at != std::string::npos) {
      const std::vector<std::string> words = absl::StrSplit(line.substr(at + 20), ' ');
      if (!absl::SimpleAtod(words[0], &r.accuracy)) r.accuracy = -1;
    }
  }
  return r;
}

std::vector<SliceInfo> MlpSlices() {
  std::vector<SliceInfo> out;
  const std::vector<int64_t> dims = {784, 512, 256, 10};
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    const std::string layer = absl::StrCat("fc", i + 1);
    out.push_back({layer + ".weight", {dims[i], dims[i + 1]}, 0, dims[i] * dims[i + 1]});
    out.push_back({layer + ".bias", {dims[i + 1]}, 0, dims[i + 1]});
  }
  return out;
}

void Harness::SetModel(std::vector<SliceInfo> s) {
  slices = std::move(s);
  total_elements = 0;
  for (SliceInfo& x : slices) {
    x.flat_offset = total_elements;
    total_elements += x.length;
  }
  spec.Clear();
  grad_data.clear();
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> small(-1e-4f, 1e-4f);
  for (const SliceInfo& x : slices) {
    v1::TensorSpec* t = spec.add_tensors();
    t->set_name(x.name);
    for (int64_t d : x.shape) t->add_shape(d);
    std::vector<float> v(x.length);
    for (float& f : v) f = small(rng);
    grad_data.emplace_back(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  hints = FieldHints();
  std::vector<std::string> names;
  std::vector<int64_t> dims, ends = {0, 1};
  for (const SliceInfo& x : slices) {
    names.push_back(x.name);
    dims.insert(dims.end(), x.shape.begin(), x.shape.end());
    ends.insert(ends.end(), {x.offset, x.length, x.length - 1, x.length + 1});
  }
  for (const char* f : {"ps.v1.TensorSlice.name", "ps.v1.TensorSpec.name"})
    hints.AddStrings(f, names);
  for (const char* f : {"ps.v1.TensorSlice.shape", "ps.v1.TensorSpec.shape"})
    hints.AddInts(f, dims);
  hints.AddInts("ps.v1.TensorSlice.offset", ends);
  hints.AddInts("ps.v1.TensorSlice.length", ends);
  const std::vector<int64_t> workers = {0, 1, num_workers - 1, num_workers};
  // Every request of ps.proto that names a worker (a new one included).
  const google::protobuf::FileDescriptor* file = v1::RegisterRequest::descriptor()->file();
  for (int i = 0; i < file->message_type_count(); ++i) {
    const google::protobuf::Descriptor* m = file->message_type(i);
    if (absl::EndsWith(m->name(), "Request") && m->FindFieldByName("worker_id") != nullptr) {
      hints.AddInts(absl::StrCat(m->full_name(), ".worker_id"), workers);
    }
  }
  hints.AddInts("ps.v1.RegisterRequest.num_workers", {num_workers, num_workers + 1, 0});
  hints.AddInts("ps.v1.StreamRequest.call_id", {1, 2, 3});
  for (const char* f :
       {"ps.v1.PullRequest.wait_timeout_ms", "ps.v1.PushPullRequest.wait_timeout_ms",
        "ps.v1.StreamRequest.wait_timeout_ms", "ps.v1.InitRequest.wait_timeout_ms",
        "ps.v1.PullRowsRequest.wait_timeout_ms", "ps.v1.PushPullRowsRequest.wait_timeout_ms"}) {
    hints.AddInts(f, {0, 1, 100, 2000});
  }
  // Rows pulls that wait for a version: now, the next step, one far off.
  hints.AddInts("ps.v1.PullRowsRequest.min_version", {0, 1, 2, 1000});
  hints.AddStrings("grpc.health.v1.HealthCheckRequest.service",
                   {"", "ps.v1.ParameterServer", "grpc.health.v1.Health"});
  hints.float_data.insert("ps.v1.TensorSlice.data");
}

void Record(Harness& h, const std::string& row, const grpc::Status& s, bool we_cancelled,
            const std::string& what) {
  std::string outcome = CodeName(s.error_code());
  if (we_cancelled && s.error_code() == StatusCode::CANCELLED) outcome = "CANCELLED(by client)";
  if (ClientGaveUp(s)) {
    outcome = "NO SERVER STATUS";
    ++h.no_server_status;
    h.findings.Add(absl::StrCat("no status from the server within the client's deadline (",
                                absl::FormatDuration(kClientDeadline), ")"),
                   absl::StrCat(row, " [", what, "]: ", Describe(s)));
  } else if (MetadataTooLarge(s)) {
    outcome = "METADATA TOO LARGE";
    ++h.metadata_too_large;
    h.findings.Add(
        "status lost: the server sent metadata over the client's limit on this connection (a "
        "status message echoing a long request string?)",
        absl::StrCat(row, " [", what, "]: ", Describe(s)));
  }
  h.tally.Add(row, outcome, s.error_message().substr(0, 300));
}

void RunCases(int n, const std::function<void(int)>& one_case) {
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < n; i = next++) one_case(i);
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace grpc_fuzz
}  // namespace ps

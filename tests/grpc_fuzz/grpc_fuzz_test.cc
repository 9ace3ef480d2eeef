// gRPC-level fuzz test of the real ps_server binary.
//
// For each consistency mode (sync with 2 workers, async) it starts ps_server
// as a subprocess on 127.0.0.1 and sends thousands of random and malformed
// requests to every RPC of ps.v1.ParameterServer (the list comes from its
// service descriptor, so a new RPC is fuzzed without an edit) and to
// grpc.health.v1.Health/Check, over both client transports: unary calls and
// the bidirectional Stream. Requests start as valid messages and are
// re-encoded by ProtoFuzzer (tests/proto_fuzzer.h), which walks their
// descriptors: exactly, mutated, random, garbled or as bytes that are no
// protobuf at all. They go out as raw bytes through grpc::GenericStub, so
// malformed messages reach the server's own decoders. Besides random field
// values the cases include extreme integers, lying length prefixes,
// truncated and oversized data, NaN/Inf gradients, chunk offsets whose sum
// with the length wraps past INT64_MAX, calls out of order (pushes before
// init, pulls for version 2^62), broken call-id sequences on a stream,
// streams half-closed or left silent mid-call, and cancelled calls.
//
// Each mode runs in three phases: cases before any worker initialized the
// model; real ps_worker processes initialize the 784-512-256-10 MLP (and
// worker 0 declares two embedding tables, kTables, that the PullRows and
// PushRows cases aim at, past --max_rows and --max_ids_per_request); named
// cases (the known hard ones, one at a time, each reported by name); random
// cases, kThreads at a time. Then it checks that
//  1. every call got its status from the server within its deadline (a
//     client-side DEADLINE_EXCEEDED fails; the server's own says "gave up
//     after"), and every RPC of the list was called;
//  2. the server stayed up and SERVING, its peak RSS (VmHWM) stayed under
//     kRssBoundBytes, no waiting call was left over, no push (of weights or
//     rows) with NaN/Inf gradients was accepted, its weights and rows are
//     finite, and PullRows and PushRows answered only the codes their
//     contract names;
//  3. real workers still train against it afterwards (exit status 0);
//  4. SIGTERM stops it within kShutdownBound with exit status 0.
// A third test sends InitParams with invalid model specs before any worker
// initialized the model: every one must be refused, and a real worker 0 must
// then initialize and train.
//
// The seed is printed; FUZZ_SEED=<n> replays a run's cases (each case draws
// from its own generator, seeded by the seed, the mode and its number; the
// server's state still depends on how the concurrent cases interleave).
// FUZZ_CASES=<n> sets the random cases per mode, FUZZ_SERVER_FLAGS adds
// server flags (space-separated), FUZZ_VERBOSE=1 adds an example status
// message per outcome to the tables. With Bazel: --test_env=FUZZ_SEED=...
// Each mode prints its cases per transport and RPC with the status codes
// they got; the server and worker logs go to the test's outputs.
//
// The parts, in tests/grpc_fuzz/: harness.h (configuration, processes,
// tallies), calls.h (raw calls), case_gen.h (requests), unary_cases.h,
// stream_cases.h, named_cases.h, checks.h (the server after the fuzzing).
//
// usage: grpc_fuzz_test PS_SERVER PS_WORKER   (Bazel passes both)
#include <signal.h>
#include <sys/wait.h>

#include <climits>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/testing/wait_until.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"
#include "tests/grpc_fuzz/calls.h"
#include "tests/grpc_fuzz/case_gen.h"
#include "tests/grpc_fuzz/checks.h"
#include "tests/grpc_fuzz/harness.h"
#include "tests/grpc_fuzz/named_cases.h"
#include "tests/grpc_fuzz/stream_cases.h"
#include "tests/grpc_fuzz/unary_cases.h"
#include "tools/process/child_process.h"
#include "tools/process/proc.h"
#include "tools/process/server_process.h"

namespace ps {
namespace grpc_fuzz {
namespace {

constexpr char kInitParams[] = "/ps.v1.ParameterServer/InitParams";

// ---------------------------------------------------------------------------
// The test of one mode.

void FuzzMode(const std::string& mode, int num_workers) {
  const uint64_t seed = Seed();
  const std::vector<std::string> flags = ServerFlags();
  std::cout << "grpc_fuzz " << mode << ": seed " << seed << " (FUZZ_SEED=" << seed << " replays)"
            << std::endl;
  auto server = StartServer(absl::StrCat("fuzz_", mode), mode, num_workers, flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  ChildProcess& proc = (*server)->process();

  Harness h;
  h.mode = mode;
  h.num_workers = num_workers;
  h.call_timeout = CallTimeout(flags);
  for (int c = 0; c < kChannels; ++c) {
    h.stubs.push_back(std::make_unique<grpc::GenericStub>(NewChannel(address)));
  }
  h.SetModel(MlpSlices());
  // Wall time of each phase, for the summary.
  std::vector<std::string> timings;
  absl::Time phase_start = absl::Now();
  auto phase_done = [&](absl::string_view name) {
    const absl::Time now = absl::Now();
    timings.push_back(absl::StrFormat("%s %.1f s", name, absl::ToDoubleSeconds(now - phase_start)));
    phase_start = now;
  };

  // Phase 1: before any worker initialized the model (pushes before init,
  // pulls waiting for it).
  h.phase = "before-init";
  RunCases(kPreInitCases, [&](int i) {
    const uint64_t s = CaseSeed(seed, mode, 1, i);
    CaseGen g(&h, s);
    if (g.fz().Chance(0.55)) {
      UnaryCase(h, s ^ 1, i, /*before_init=*/true);
    } else {
      RunStream(h, i, RandomStreamScript(g, h));
    }
  });
  ASSERT_FALSE(proc.Poll()) << "ps_server died before init: " << DescribeExit(proc.Poll()) << "\n"
                            << proc.LogTail(30);
  phase_done("before init");

  // The real worker 0 creates the real model (and every worker takes 2 steps).
  WorkersResult init = RunWorkers(absl::StrCat("fuzz_", mode, "_init"), address, num_workers, 2);
  ASSERT_TRUE(init.ok) << "the real workers failed to initialize the model:\n" << init.report;
  auto model = ServerModel(address, num_workers);
  ASSERT_TRUE(model.ok()) << model.status();
  h.SetModel(*model);
  if (auto st = GetStatus(address); st.ok()) h.SawVersion(st->version());
  // The embedding tables the row cases aim at (before: NOT_FOUND).
  const absl::Status declared = DeclareTables(h, address);
  ASSERT_TRUE(declared.ok()) << declared;
  phase_done("real init");

  // Phase 2: the named cases, one at a time.
  h.phase = "named";
  int named_index = 0;
  for (const NamedCase& c : NamedCases()) {
    CaseGen g(&h, CaseSeed(seed, mode, 2, named_index++));
    const std::string problem = c.run(h, g);
    std::cout << "  named case: " << c.name << ": "
              << (problem.empty() ? "ok" : "FAILED: " + problem) << std::endl;
    EXPECT_EQ(problem, "") << mode << ": " << c.name;
  }
  phase_done("named cases");

  // Phase 3: random cases, concurrently.
  h.phase = "random";
  const int n = CasesPerMode();
  RunCases(n, [&](int i) {
    const uint64_t s = CaseSeed(seed, mode, 3, i);
    CaseGen g(&h, s);
    if (g.fz().Chance(0.55)) {
      UnaryCase(h, s ^ 1, i, /*before_init=*/false);
    } else {
      RunStream(h, i, RandomStreamScript(g, h));
    }
  });
  phase_done("random cases");
  const absl::StatusOr<absl::Duration> server_cpu = ProcCpuTime(proc.pid());

  // Checks.
  const bool alive = !proc.Poll();
  EXPECT_TRUE(alive) << "ps_server died during fuzzing: " << DescribeExit(proc.Poll()) << "\n"
                     << proc.LogTail(30);
  const absl::StatusOr<int64_t> hwm = ProcStatusBytes(proc.pid(), "VmHWM");
  const absl::StatusOr<int64_t> rss = ProcStatusBytes(proc.pid(), "VmRSS");
  if (alive) {
    EXPECT_EQ(HealthStatus(address), "SERVING");
    // Waits end after --pull_timeout at the latest; none may be left over.
    int64_t waiting = -1;
    const absl::Status drained = WaitUntil(
        [&] {
          auto st = GetStatus(address);
          waiting = st.ok() ? st->waiting_calls() : -1;
          return waiting == 0;
        },
        absl::Seconds(kPullTimeoutS + 3), "no waiting calls on the server",
        absl::Milliseconds(100));
    EXPECT_EQ(waiting, 0) << "waiting calls left on the server after every call ended: " << drained;
    EXPECT_TRUE(hwm.ok() && *hwm <= kRssBoundBytes)
        << "peak RSS (VmHWM) " << MiB(hwm) << " over the bound " << MiB(kRssBoundBytes);
    if (mode == "sync") {
      const absl::Status completed = CompletePendingStep(h, address);
      EXPECT_TRUE(completed.ok()) << completed;
    }
    EXPECT_EQ(NonFiniteWeights(address), "") << "the weights are no longer finite";
    EXPECT_EQ(NonFiniteRows(address), "") << "the embedding rows are no longer finite";
    EXPECT_EQ(h.nonfinite_accepted.load(), 0) << "pushes with NaN/Inf gradients were accepted";
    // A real worker still trains.
    phase_done("checks");
    WorkersResult after =
        RunWorkers(absl::StrCat("fuzz_", mode, "_after"), address, num_workers, 30);
    EXPECT_TRUE(after.ok) << "real workers failed after the fuzzing:\n" << after.report;
    std::cout << "real workers after fuzzing:\n"
              << after.report << "  final test accuracy " << after.accuracy << std::endl;
    phase_done("real workers after");
    // SIGTERM: the server exits promptly and cleanly.
    proc.Signal(SIGTERM);
    const absl::Time term = absl::Now();
    std::optional<int> st = proc.Wait(absl::Now() + kShutdownBound);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0)
        << "after SIGTERM: " << DescribeExit(st) << " within " << kShutdownBound << "\n"
        << proc.LogTail(20);
    std::cout << "SIGTERM: " << DescribeExit(st) << " after "
              << absl::FormatDuration(absl::Now() - term) << std::endl;
    phase_done("SIGTERM");
  }

  EXPECT_EQ(h.no_server_status.load(), 0) << "calls that got no status from the server";
  EXPECT_EQ(h.metadata_too_large.load(), 0)
      << "calls failed by the client because the server's metadata was over its limit";
  EXPECT_EQ(h.findings.size(), 0) << "findings (listed below)";
  for (const UnaryRpc& rpc : UnaryRpcs()) {
    EXPECT_GT(h.tally.Count(absl::StrCat("unary ", rpc.name)), 0) << "never called: " << rpc.name;
  }
  std::cout << "\n=== grpc_fuzz " << mode << " (" << num_workers << " workers), seed " << seed
            << ": " << h.unary_cases + h.stream_cases << " cases (unary " << h.unary_cases
            << ", stream " << h.stream_cases << "), " << h.messages << " request messages\n"
            << "time: " << absl::StrJoin(timings, ", ") << "; server CPU "
            << (server_cpu.ok() ? absl::StrFormat("%.1f s", absl::ToDoubleSeconds(*server_cpu))
                                : std::string(server_cpu.status().message()))
            << " until the checks\n"
            << "server peak RSS (VmHWM) " << MiB(hwm) << ", RSS after fuzzing " << MiB(rss)
            << ", bound " << MiB(kRssBoundBytes) << "\n"
            << "  transport/RPC               cases  outcomes\n"
            << h.tally.Format();
  if (h.findings.size() > 0) {
    std::cout << h.findings.size() << " findings:\n" << h.findings.Format(4);
  }
  std::cout << std::flush;
}

TEST(GrpcFuzz, SyncMode) { FuzzMode("sync", 2); }

TEST(GrpcFuzz, AsyncMode) { FuzzMode("async", 1); }

// ---------------------------------------------------------------------------
// InitParams from worker 0 before the model exists: a spec that is invalid,
// or values that do not cover it, must be refused (with a status, without
// allocating for the declared size), and leave the server free for the real
// worker 0.

// Specs no server may accept from worker 0 without values; most are invalid
// in themselves.
std::vector<std::pair<std::string, v1::InitRequest>> BadInits(uint64_t seed) {
  std::vector<std::pair<std::string, v1::InitRequest>> out;
  std::mt19937_64 rng(seed);
  auto init = [](std::vector<std::pair<std::string, std::vector<int64_t>>> tensors) {
    v1::InitRequest m;
    for (auto& [name, shape] : tensors) {
      auto* t = m.mutable_spec()->add_tensors();
      t->set_name(name);
      for (int64_t d : shape) t->add_shape(d);
    }
    return m;
  };
  const int64_t k40 = int64_t{1} << 40;
  std::vector<std::pair<std::string, std::vector<std::vector<int64_t>>>> shapes = {
      {"a dimension of 0", {{0}, {10, 0}}},
      {"a negative dimension", {{-1}, {INT64_MIN}, {10, -10}}},
      {"a dimension over 2^40", {{k40 + 1}, {INT64_MAX}, {3, INT64_MAX}}},
      {"over 2^40 elements", {{int64_t{1} << 21, int64_t{1} << 20}, {k40, 2}}},
      {"an element count that wraps to 0",
       {{int64_t{1} << 32, int64_t{1} << 32},
        {k40, int64_t{1} << 24},
        {int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 24}}},
      {"an element count that wraps to a small number",
       {{(int64_t{1} << 32) + 1, (int64_t{1} << 32) - 1}}},
  };
  for (auto& [what, list] : shapes) {
    for (auto& shape : list) {
      // Alone, and after a valid tensor.
      out.emplace_back(what, init({{"w", shape}}));
      out.emplace_back(what + " (second tensor)", init({{"fc3.bias", {10}}, {"w", shape}}));
    }
  }
  out.emplace_back("no tensors", init({}));
  out.emplace_back("an empty name", init({{"", {10}}}));
  out.emplace_back("a name twice", init({{"b", {10}}, {"b", {10}}}));
  // Random valid-looking specs without their values, and with values that
  // cover only part of them.
  for (int k = 0; k < 60; ++k) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    for (int j = 1 + int(rng() % 4); j > 0; --j) {
      t.push_back({absl::StrCat("t", j), {1 + int64_t(rng() % 300), 1 + int64_t(rng() % 300)}});
    }
    v1::InitRequest m = init(t);
    std::string what = "a valid spec without values";
    if (rng() % 2 && t.size() > 1) {
      const auto& [name, shape] = t[0];
      v1::TensorSlice* s = m.add_values();
      s->set_name(name);
      for (int64_t d : shape) s->add_shape(d);
      s->set_length(shape[0] * shape[1]);
      s->set_data(std::string(4 * shape[0] * shape[1], '\0'));
      what = "values for only one of its tensors";
    }
    out.emplace_back(what, m);
  }
  // Large valid specs without values: refusing them must not allocate them
  // (1 GiB, 32 GiB, 4 TiB). Last, since a server that allocates first may die.
  for (int64_t n : {int64_t{1} << 28, int64_t{1} << 33, k40}) {
    out.emplace_back(absl::StrCat("a valid spec of ", n, " elements without values"),
                     init({{"w", {n}}}));
  }
  for (auto& [what, m] : out) m.set_wait_timeout_ms(100);
  return out;
}

TEST(GrpcFuzz, InitFromWorker0RefusesInvalidSpecs) {
  const uint64_t seed = Seed();
  std::cout << "grpc_fuzz init before worker 0: seed " << seed << std::endl;
  Tally tally;
  int cases = 0, servers = 0;
  std::unique_ptr<ServerProcess> server;
  // Checks a server that is done with: its peak RSS (unknown once it died,
  // which is a failure of its own), and whether it died.
  auto retire = [&](const std::string& after) {
    const absl::StatusOr<int64_t> hwm = ProcStatusBytes(server->pid(), "VmHWM");
    if (hwm.ok()) {
      EXPECT_LE(*hwm, kRssBoundBytes) << "peak RSS (VmHWM) " << MiB(hwm) << " after " << after;
    }
    std::cout << "  server " << servers << ": peak RSS " << MiB(hwm) << " after " << after
              << std::endl;
    server.reset();
  };
  for (auto& [what, m] : BadInits(seed)) {
    if (!server) {
      // A fresh server whenever one accepted a bad spec (it now has a model)
      // or died, so that every case meets a server without parameters.
      auto s = StartServer(absl::StrCat("fuzz_init", servers++), "async", 1, ServerFlags());
      ASSERT_TRUE(s.ok()) << s.status();
      server = *std::move(s);
    }
    ChildProcess& proc = server->process();
    grpc::GenericStub stub(NewChannel(server->address()));
    UnaryResult r = CallUnary(&stub, kInitParams, m.SerializeAsString());
    ++cases;
    const std::string spec = m.spec().ShortDebugString().substr(0, 200);
    std::string outcome = CodeName(r.status.error_code());
    if (ClientGaveUp(r.status)) {
      outcome = "NO SERVER STATUS";
      ADD_FAILURE() << what << " (" << spec << "): no status from the server";
    } else if (r.status.ok()) {
      ADD_FAILURE() << "InitParams from worker 0 with " << what << " was accepted: " << spec;
    }
    if (proc.Poll()) {
      outcome = "SERVER DIED";
      ADD_FAILURE() << "ps_server died on InitParams with " << what << " (" << spec
                    << "): " << DescribeExit(proc.Poll()) << "\n"
                    << proc.LogTail(5);
    }
    tally.Add("unary InitParams (before init)", outcome, r.status.error_message().substr(0, 300));
    if (std::getenv("FUZZ_VERBOSE") != nullptr) {
      std::cout << "  " << what << ": " << spec << ": " << Describe(r.status) << std::endl;
    }
    if (r.status.ok() || proc.Poll()) retire(what);
  }
  std::cout << "=== grpc_fuzz init before worker 0: " << cases << " cases on " << servers
            << " server(s)\n"
            << tally.Format() << std::flush;
  ASSERT_NE(server, nullptr);
  // The last server saw only refusals: the real worker 0 creates its model.
  WorkersResult w = RunWorkers("fuzz_init", server->address(), 1, 5);
  EXPECT_TRUE(w.ok) << "the real worker 0 could not initialize and train:\n" << w.report;
  ChildProcess& proc = server->process();
  const absl::StatusOr<int64_t> hwm = ProcStatusBytes(proc.pid(), "VmHWM");
  EXPECT_TRUE(hwm.ok() && *hwm <= kRssBoundBytes) << "peak RSS (VmHWM) " << MiB(hwm);
  std::cout << "  server " << servers << ": peak RSS " << MiB(hwm) << " after the real worker"
            << std::endl;
  proc.Signal(SIGTERM);
  std::optional<int> st = proc.Wait(absl::Now() + kShutdownBound);
  EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0)
      << "after SIGTERM: " << DescribeExit(st);
}

}  // namespace
}  // namespace grpc_fuzz
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " PS_SERVER PS_WORKER" << std::endl;
    return 2;
  }
  ps::grpc_fuzz::g_server_bin = argv[1];
  ps::grpc_fuzz::g_worker_bin = argv[2];
  return RUN_ALL_TESTS();
}

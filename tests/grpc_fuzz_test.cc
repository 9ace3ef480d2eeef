// gRPC-level fuzz test of the real ps_server binary.
//
// For each consistency mode (sync with 2 workers, async) it starts ps_server
// as a subprocess on 127.0.0.1 and sends thousands of random and malformed
// requests to every RPC of ps.v1.ParameterServer (Register, InitParams, Push,
// Pull, PushPull, GetStatus, Checkpoint, Stream) and to grpc.health.v1.Health/Check, over
// both client transports: unary calls and the bidirectional Stream. Requests
// start as valid messages and are re-encoded by ProtoFuzzer
// (tests/proto_fuzzer.h), which walks their descriptors: exactly, mutated,
// random, garbled or as bytes that are no protobuf at all. They go out as raw
// bytes through grpc::GenericStub, so malformed messages reach the server's
// own decoders. Besides random field values the cases include extreme
// integers, lying length prefixes, truncated and oversized data, NaN/Inf
// gradients, chunk offsets whose sum with the length wraps past INT64_MAX,
// calls out of order (pushes before init, pulls for version 2^62), broken
// call-id sequences on a stream, streams half-closed or left silent
// mid-call, and cancelled calls.
//
// Each mode runs in three phases: cases before any worker initialized the
// model; real ps_worker processes initialize the 784-512-256-10 MLP; named
// cases (the known hard ones, one at a time, each reported by name); random
// cases, kThreads at a time. Then it checks that
//  1. every call got its status from the server within its deadline (a
//     client-side DEADLINE_EXCEEDED fails; the server's own says "gave up
//     after");
//  2. the server stayed up and SERVING, its peak RSS (VmHWM) stayed under
//     kRssBoundBytes, no waiting call was left over, no push with NaN/Inf
//     gradients was accepted and its weights are finite;
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
// usage: grpc_fuzz_test PS_SERVER PS_WORKER   (Bazel passes both)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/client_callback.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/credentials.h"
#include "tests/child_process.h"
#include "tests/proto_fuzzer.h"

namespace ps {
namespace {

using google::protobuf::Message;
using grpc::StatusCode;
namespace health = grpc::health::v1;

// ---------------------------------------------------------------------------
// Configuration.

std::string g_server_bin;  // argv[1]
std::string g_worker_bin;  // argv[2]

constexpr uint64_t kDefaultSeed = 20240917;
constexpr int kDefaultCasesPerMode = 5000;  // random cases; plus kPreInitCases and the named ones
constexpr int kPreInitCases = 200;
constexpr int kThreads = 48;  // cases in flight at once
constexpr int kChannels = 4;  // client connections they share

// The server's longest legitimate wait (--pull_timeout): a pull for a
// version that does not come, or a non-zero worker's init before worker 0's.
constexpr int kPullTimeoutS = 2;
// Every client call's deadline: well past anything the server may
// legitimately wait (kPullTimeoutS, or --call_timeout below), with slack for
// a loaded 2-core machine. A call that reaches it got no status from the
// server, which fails the test.
constexpr absl::Duration kClientDeadline = absl::Seconds(10);
// Without --call_timeout (FUZZ_SERVER_FLAGS=--call_timeout=0), a stream left
// silent mid-call may wait forever: the server cannot tell a slow worker from
// a gone one. Those cases then cancel themselves after this.
constexpr absl::Duration kSilentGiveUp = absl::Seconds(2);
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
constexpr int64_t kRssBoundBytes = int64_t{512} << 20;
constexpr absl::Duration kShutdownBound = absl::Seconds(15);
// The server's address-space limit, so that a request that makes it allocate
// without bound fails there (bad_alloc) instead of exhausting this shared
// machine. Far above kRssBoundBytes: gRPC's threads reserve stacks and the
// allocator reserves arenas without touching them.
constexpr rlim_t kServerAddressSpace = rlim_t{8} << 30;
constexpr char kDatasetDir[] = "/usr/share/datasets/fashion-mnist";

// Flags of every ps_server started here, besides --listen, --port_file,
// --mode and --num_workers.
std::vector<std::string> ServerFlags() {
  std::vector<std::string> flags = {
      absl::StrCat("--pull_timeout=", kPullTimeoutS),
      // The server fails a stream call left silent mid-way after 2 s, and
      // the silent-stream cases require it to (see RunStream, End::kSilent).
      "--call_timeout=2",
  };
  // FUZZ_SERVER_FLAGS="--call_timeout=2 ..." adds flags without an edit.
  if (const char* extra = std::getenv("FUZZ_SERVER_FLAGS")) {
    for (absl::string_view f : absl::StrSplit(extra, ' ', absl::SkipEmpty())) {
      flags.emplace_back(f);
    }
  }
  return flags;
}

// The server's --call_timeout if `flags` pass one.
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

// One generator seed per case, so that a case does not depend on the others.
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

// ---------------------------------------------------------------------------
// The real ps_server and ps_worker binaries, as child processes.

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

absl::StatusOr<ServerProcess> StartServer(const std::string& tag, absl::string_view mode,
                                          int num_workers, const std::vector<std::string>& flags) {
  std::vector<std::string> all = {absl::StrCat("--mode=", mode),
                                  absl::StrCat("--num_workers=", num_workers)};
  all.insert(all.end(), flags.begin(), flags.end());
  return StartServerProcess(g_server_bin, all, OutputDir(), tag, kServerAddressSpace);
}

struct WorkersResult {
  bool ok = true;        // every worker exited with status 0
  std::string report;    // per worker: how it ended, with its log's tail if it failed
  double accuracy = -1;  // worker 0's final test accuracy
};

// Runs workers 0..num_workers-1 of the real ps_worker against `address` for
// `steps` steps, in parallel, and waits for them (at most 3 minutes).
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
    auto child =
        ChildProcess::Spawn(argv, absl::StrCat(OutputDir(), "/", tag, "_worker", w, ".log"));
    if (!child.ok()) {
      r.ok = false;
      absl::StrAppend(&r.report, child.status().ToString(), "\n");
      return r;
    }
    workers.push_back(*std::move(child));
  }
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  for (int w = 0; w < num_workers; ++w) {
    std::optional<int> st =
        workers[w]->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
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

// ---------------------------------------------------------------------------
// Calls as raw bytes.

constexpr char kRegister[] = "/ps.v1.ParameterServer/Register";
constexpr char kInitParams[] = "/ps.v1.ParameterServer/InitParams";
constexpr char kPush[] = "/ps.v1.ParameterServer/Push";
constexpr char kPull[] = "/ps.v1.ParameterServer/Pull";
constexpr char kPushPull[] = "/ps.v1.ParameterServer/PushPull";
constexpr char kGetStatus[] = "/ps.v1.ParameterServer/GetStatus";
constexpr char kCheckpoint[] = "/ps.v1.ParameterServer/Checkpoint";
constexpr char kStream[] = "/ps.v1.ParameterServer/Stream";
constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Valid() || !buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// The last value of varint field `field` at the top level of `bytes`.
std::optional<uint64_t> VarintField(const std::string& bytes, int field) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  std::optional<uint64_t> found;
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == field &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v;
      if (!in.ReadVarint64(&v)) return std::nullopt;
      found = v;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return std::nullopt;
    }
  }
  return found;
}

// Why `bytes` do not parse as a StreamResponse: proto3 requires its string
// field error_message to be UTF-8, which an error echoing request bytes may
// not be; or the framing is broken.
std::string WhyNotStreamResponse(const std::string& bytes) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    std::string message;
    uint32_t len;
    if (WireFormatLite::GetTagFieldNumber(tag) == 6 &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!in.ReadVarint32(&len) || !in.ReadString(&message, len)) break;
      if (!google::protobuf::internal::IsStructurallyValidUTF8(message)) {
        return absl::StrCat("its error_message (a proto3 string) is not UTF-8: \"",
                            absl::CHexEscape(message.substr(0, 120)), "\"");
      }
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  return "malformed";
}

std::string CodeName(StatusCode c) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int i = static_cast<int>(c);
  return i >= 0 && i < 17 ? kNames[i] : absl::StrCat("code ", i);
}

std::string Describe(const grpc::Status& s) {
  std::string m = s.error_message().substr(0, 300);
  return m.empty() ? CodeName(s.error_code()) : absl::StrCat(CodeName(s.error_code()), ": ", m);
}

// A RESOURCE_EXHAUSTED the client made up: a status or header from the
// server was over the client's metadata limit (8 KiB by default, as in
// ps_worker). gRPC then fails every call on that connection, not only the
// one with the long status.
bool MetadataTooLarge(const grpc::Status& s) {
  return s.error_code() == StatusCode::RESOURCE_EXHAUSTED &&
         absl::StrContains(s.error_message(), "metadata size exceeds limit");
}

// A DEADLINE_EXCEEDED the client made up: the server never answered. The
// server's own deadline errors say "gave up after" (a wait) or name
// --call_timeout (a stream call that never arrived in full).
bool ClientGaveUp(const grpc::Status& s) {
  return s.error_code() == StatusCode::DEADLINE_EXCEEDED &&
         !absl::StrContains(s.error_message(), "gave up after") &&
         !absl::StrContains(s.error_message(), "--call_timeout");
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(INT_MAX);
  args.SetMaxSendMessageSize(INT_MAX);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  return grpc::CreateCustomChannel(address, ps::MakeChannelCredentials(), args);
}

struct UnaryResult {
  grpc::Status status;
  std::string response;
  bool we_cancelled = false;  // TryCancel'ed before the call completed
  absl::Duration took;
};

// One unary call of `method` with `request` as its bytes; cancelled after
// `cancel_after` unless it completed. Blocks until it completes.
UnaryResult CallUnary(grpc::GenericStub* stub, const std::string& method,
                      const std::string& request,
                      absl::Duration cancel_after = absl::InfiniteDuration()) {
  const absl::Time start = absl::Now();
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(start + kClientDeadline));
  grpc::ByteBuffer req = ToBuffer(request), resp;
  absl::Notification done;
  UnaryResult r;
  stub->UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    r.status = std::move(s);
    done.Notify();
  });
  if (cancel_after != absl::InfiniteDuration() &&
      !done.WaitForNotificationWithTimeout(cancel_after)) {
    ctx.TryCancel();
    r.we_cancelled = true;
  }
  done.WaitForNotification();
  r.took = absl::Now() - start;
  if (r.status.ok()) r.response = ToString(resp);
  return r;
}

// A Stream call driven step by step from one thread: each Write blocks until
// gRPC took the message; responses are read all the time in the background.
// The call ends (OnDone) only after Release(), once the server finished it,
// the client cancelled it, or its deadline passed.
class ScriptedStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // A call's final StreamResponse (last = true).
  struct Answer {
    uint64_t call_id = 0;
    int code = 0;  // StreamResponse.error_code
    std::string message;
    int64_t version = 0;
  };

  ScriptedStream(grpc::GenericStub* stub, absl::Duration deadline) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    stub->PrepareBidiStreamingCall(&ctx_, kStream, grpc::StubOptions(), this);
    AddHold();  // writes start outside reactions; see Release()
    StartRead(&in_);
    StartCall();
  }

  ~ScriptedStream() override {
    Release();
    ctx_.TryCancel();  // no-op once done
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  ScriptedStream(const ScriptedStream&) = delete;
  ScriptedStream& operator=(const ScriptedStream&) = delete;

  // False once a write failed (the stream ended; its status tells why).
  bool Write(const std::string& bytes) {
    {
      absl::MutexLock l(&mu_);
      if (write_failed_ || released_ || writes_done_) return false;
      writing_ = true;
    }
    out_ = ToBuffer(bytes);
    StartWrite(&out_);
    absl::MutexLock l(&mu_);
    auto written = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !writing_; };
    mu_.Await(absl::Condition(&written));
    return !write_failed_;
  }

  // Half-closes: no more requests.
  void WritesDone() {
    {
      absl::MutexLock l(&mu_);
      if (writes_done_ || released_) return;
      writes_done_ = true;
    }
    StartWritesDone();
  }

  void Cancel() { ctx_.TryCancel(); }

  // No more operations from the script: lets the call end.
  void Release() {
    {
      absl::MutexLock l(&mu_);
      if (released_) return;
      released_ = true;
    }
    RemoveHold();
  }

  // Waits until call `call_id` was answered or the server ended the stream,
  // at most until `until`. True if either happened.
  bool WaitAnsweredOrEnded(uint64_t call_id, absl::Time until) {
    absl::MutexLock l(&mu_);
    auto ready = [this, call_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (reads_ended_) return true;
      for (const Answer& a : answers_) {
        if (a.call_id == call_id) return true;
      }
      return false;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&ready), until);
  }

  // The call's status once it ended; nullopt if it had not by `until`.
  // REQUIRES: Release() was called.
  std::optional<grpc::Status> WaitDone(absl::Time until) {
    absl::MutexLock l(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(&done_), until)) return std::nullopt;
    return status_;
  }

  std::vector<Answer> answers() {
    absl::MutexLock l(&mu_);
    return answers_;
  }
  // Responses that did not parse, and why the first did not.
  int unparsable() {
    absl::MutexLock l(&mu_);
    return unparsable_;
  }
  std::string unparsable_why() {
    absl::MutexLock l(&mu_);
    return unparsable_why_;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    writing_ = false;
    if (!ok) write_failed_ = true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock l(&mu_);
      reads_ended_ = true;
      return;
    }
    v1::StreamResponse r;
    const bool parsed = r.ParseFromString(ToString(in_));
    {
      absl::MutexLock l(&mu_);
      if (!parsed) {
        if (unparsable_++ == 0) unparsable_why_ = WhyNotStreamResponse(ToString(in_));
      } else if (r.last()) {
        answers_.push_back({r.call_id(), r.error_code(), r.error_message(), r.version()});
      }
    }
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& s) override {
    absl::MutexLock l(&mu_);
    status_ = s;
    done_ = true;
  }

 private:
  grpc::ClientContext ctx_;
  grpc::ByteBuffer in_;   // only the read path touches it
  grpc::ByteBuffer out_;  // the message being written; one at a time

  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);
  int unparsable_ ABSL_GUARDED_BY(mu_) = 0;
  std::string unparsable_why_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// What the cases of one mode share.

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
  void SetModel(std::vector<SliceInfo> s) {
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
    for (const char* m :
         {"RegisterRequest", "InitRequest", "PushRequest", "PullRequest", "StreamRequest"}) {
      hints.AddInts(absl::StrCat("ps.v1.", m, ".worker_id"), workers);
    }
    hints.AddInts("ps.v1.RegisterRequest.num_workers", {num_workers, num_workers + 1, 0});
    hints.AddInts("ps.v1.StreamRequest.call_id", {1, 2, 3});
    for (const char* f :
         {"ps.v1.PullRequest.wait_timeout_ms", "ps.v1.PushPullRequest.wait_timeout_ms",
          "ps.v1.StreamRequest.wait_timeout_ms", "ps.v1.InitRequest.wait_timeout_ms"}) {
      hints.AddInts(f, {0, 1, 100, 2000});
    }
    hints.AddStrings("grpc.health.v1.HealthCheckRequest.service",
                     {"", "ps.v1.ParameterServer", "grpc.health.v1.Health"});
    hints.float_data.insert("ps.v1.TensorSlice.data");
  }
};

// ---------------------------------------------------------------------------
// Requests: a valid message of each type, then encoded by the ProtoFuzzer as
// it is, mutated, garbled, random, or replaced by non-protobuf bytes.

struct Request {
  std::string bytes;
  std::string what;              // how it was made, for the findings
  bool clean_nonfinite = false;  // valid but for NaN/Inf gradient values
};

class CaseGen {
 public:
  CaseGen(Harness* h, uint64_t seed) : h_(h), fz_(seed, &h->hints) {}

  ProtoFuzzer& fz() { return fz_; }

  // ---- Plausible field values, with the odd extreme one.

  int Worker() {
    if (fz_.Chance(0.85)) return fz_.Uniform(h_->num_workers);
    static const std::vector<int> kOdd = {-1, 2, 3, 100, INT32_MAX, INT32_MIN};
    return fz_.Pick(kOdd);
  }

  int64_t Version() {
    const int64_t v = h_->version.load();
    switch (fz_.Uniform(10)) {
      case 0:
        return v - 1;
      case 1:
        return v + 1;
      case 2:
        return fz_.ExtremeInt64();
      default:
        return v;
    }
  }

  int64_t MinVersion() {
    const int64_t v = h_->version.load();
    switch (fz_.Uniform(10)) {
      case 0:
      case 1:
        return 0;
      case 2:
      case 3:
        return v;
      case 4:
      case 5:
        return v + 1;
      case 6:
        return v + 2;
      case 7:
        return int64_t{1} << 62;
      default:
        return fz_.ExtremeInt64();
    }
  }

  int64_t WaitMs() {
    static const std::vector<int64_t> kPool = {
        0, 0, 0, 1, 10, 100, 500, 2000, 5000, -1, INT64_MAX, INT64_MIN, int64_t{1} << 62};
    return fz_.Pick(kPool);
  }

  // ---- Valid messages.

  // Slice i's data (small values); with `nonfinite`, NaN or +-Inf planted.
  std::string Data(int i, int64_t from, int64_t n, bool nonfinite) {
    std::string d = h_->grad_data[i].substr(4 * from, 4 * n);
    if (nonfinite && n > 0) {
      static const std::vector<uint32_t> kBits = {0x7fc00000u, 0xffc00000u, 0x7f800000u,
                                                  0xff800000u, 0x7f800001u};
      for (int k = 1 + fz_.Uniform(3); k > 0; --k) {
        const uint32_t bits = fz_.Pick(kBits);
        std::memcpy(&d[4 * fz_.Uniform(n)], &bits, 4);
      }
    }
    return d;
  }

  void FillSlice(int i, int64_t from, int64_t n, bool nonfinite, v1::TensorSlice* s) {
    const SliceInfo& x = h_->slices[i];
    s->set_name(x.name);
    for (int64_t d : x.shape) s->add_shape(d);
    s->set_offset(x.offset + from);
    s->set_length(n);
    s->set_data(Data(i, from, n, nonfinite));
  }

  // Indices of the slices a push carries: all of them (a valid push), a few
  // small ones, all but one, or none.
  std::vector<int> PushSlices() {
    const int n = static_cast<int>(h_->slices.size());
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    switch (fz_.Uniform(10)) {
      case 0:
      case 1:
      case 2:
      case 3:
        return all;
      case 4:
        all.erase(all.begin() + fz_.Uniform(n));
        return all;
      case 5:
        return {};
      default: {  // 1-3 small slices (the biases), possibly twice
        std::vector<int> small, out;
        for (int i = 0; i < n; ++i) {
          if (h_->slices[i].length <= 1024) small.push_back(i);
        }
        if (small.empty()) small = all;
        for (int k = 1 + fz_.Uniform(3); k > 0; --k) out.push_back(fz_.Pick(small));
        return out;
      }
    }
  }

  v1::PushRequest PushTemplate(bool* nonfinite) {
    v1::PushRequest p;
    p.set_worker_id(Worker());
    p.set_version(Version());
    std::vector<int> which = PushSlices();
    *nonfinite = !which.empty() && fz_.Chance(0.15);
    const int poisoned = which.empty() ? -1 : fz_.Uniform(which.size());
    for (size_t k = 0; k < which.size(); ++k) {
      const int i = which[k];
      FillSlice(i, 0, h_->slices[i].length, *nonfinite && int(k) == poisoned, p.add_gradients());
    }
    return p;
  }

  // `valid` as it is (25%), mutated at a low or higher rate, random, garbled,
  // or not protobuf at all.
  Request Encode(const Message& valid, bool nonfinite) {
    Request r;
    const int pick = fz_.Uniform(100);
    if (pick < 25) {
      r.bytes = fz_.Mutate(valid, 0);
      r.what = "as is";
    } else if (pick < 60) {
      r.bytes = fz_.Mutate(valid, 0.05);
      r.what = fz_.changed() ? "mutated 5%" : "as is (5% changed nothing)";
    } else if (pick < 80) {
      r.bytes = fz_.Mutate(valid, 0.25);
      r.what = "mutated 25%";
    } else if (pick < 88) {
      r.bytes = fz_.Random(valid.GetDescriptor());
      r.what = "random";
    } else if (pick < 95) {
      r.bytes = fz_.Garble(fz_.Mutate(valid, 0.05));
      r.what = "garbled";
    } else {
      r.bytes = fz_.NotProtobuf();
      r.what = "not protobuf";
    }
    r.clean_nonfinite = nonfinite && pick < 60 && !fz_.changed();
    if (nonfinite) r.what += ", NaN/Inf data";
    return r;
  }

  Request Register() {
    v1::RegisterRequest m;
    m.set_worker_id(Worker());
    m.set_num_workers(fz_.Chance(0.8) ? h_->num_workers : fz_.Uniform(4));
    return Encode(m, false);
  }

  Request Init() {
    v1::InitRequest m;
    m.set_worker_id(Worker());
    *m.mutable_spec() = h_->spec;
    if (fz_.Chance(0.3) && m.spec().tensors_size() > 0) {
      // A spec that differs in one dimension.
      auto* t = m.mutable_spec()->mutable_tensors(fz_.Uniform(m.spec().tensors_size()));
      if (t->shape_size() > 0) t->set_shape(fz_.Uniform(t->shape_size()), fz_.ExtremeInt64());
    }
    if (m.worker_id() == 0 && fz_.Chance(0.5)) {
      for (int i : PushSlices()) FillSlice(i, 0, h_->slices[i].length, false, m.add_values());
    }
    m.set_wait_timeout_ms(WaitMs());
    return Encode(m, false);
  }

  Request Push() {
    bool nonfinite;
    v1::PushRequest m = PushTemplate(&nonfinite);
    return Encode(m, nonfinite);
  }

  Request Pull() {
    v1::PullRequest m;
    m.set_worker_id(Worker());
    m.set_min_version(MinVersion());
    m.set_wait_timeout_ms(WaitMs());
    return Encode(m, false);
  }

  Request PushPull() {
    bool nonfinite;
    v1::PushPullRequest m;
    *m.mutable_push() = PushTemplate(&nonfinite);
    m.set_min_version(MinVersion());
    m.set_wait_timeout_ms(WaitMs());
    return Encode(m, nonfinite);
  }

  Request Status() { return Encode(v1::StatusRequest(), false); }
  Request Checkpoint() { return Encode(v1::CheckpointRequest(), false); }

  Request Health() {
    health::HealthCheckRequest m;
    static const std::vector<std::string> kServices = {"", "", "ps.v1.ParameterServer",
                                                       "grpc.health.v1.Health", "nope"};
    m.set_service(fz_.Pick(kServices));
    return Encode(m, false);
  }

  // ---- Stream calls.

  // The first message of a call: its header.
  v1::StreamRequest Header(uint64_t call_id, int kind) {
    v1::StreamRequest m;
    m.set_call_id(call_id);
    m.set_kind(static_cast<v1::CallKind>(kind));
    m.set_worker_id(Worker());
    m.set_version(Version());
    m.set_min_version(kind == v1::CALL_PUSH_PULL && fz_.Chance(0.5) ? h_->version.load() + 1
                                                                    : MinVersion());
    m.set_wait_timeout_ms(WaitMs());
    return m;
  }

  // Chunks covering slices `which` in order (each slice cut into at most 32
  // sub-ranges), the way a worker sends a push.
  std::vector<v1::TensorSlice> Chunks(const std::vector<int>& which, bool nonfinite) {
    std::vector<v1::TensorSlice> out;
    static const std::vector<int64_t> kSizes = {INT64_MAX, 1 << 18, 1 << 16, 4096, 1000, 1};
    const int poisoned = which.empty() ? -1 : fz_.Uniform(which.size());
    for (size_t k = 0; k < which.size(); ++k) {
      const int i = which[k];
      const int64_t len = h_->slices[i].length;
      const int64_t size = std::max(std::min(fz_.Pick(kSizes), len), (len + 31) / 32);
      const int first = static_cast<int>(out.size());
      for (int64_t at = 0; at < len; at += size) {
        FillSlice(i, at, std::min(size, len - at), false, &out.emplace_back());
      }
      if (nonfinite && int(k) == poisoned) {
        v1::TensorSlice& c = out[first + fz_.Uniform(out.size() - first)];
        const int64_t from = c.offset() - h_->slices[i].offset;
        c.set_data(Data(i, from, c.length(), true));
      }
    }
    return out;
  }

  // The messages of one call: the header first, `chunks` spread over 1-4 per
  // message, `last` on the final one if `complete`.
  std::vector<v1::StreamRequest> Call(uint64_t call_id, int kind,
                                      std::vector<v1::TensorSlice> chunks, bool complete) {
    std::vector<v1::StreamRequest> msgs = {Header(call_id, kind)};
    size_t per = 1 + fz_.Uniform(4);
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (msgs.back().gradients_size() >= int(per)) {
        msgs.emplace_back().set_call_id(call_id);
        per = 1 + fz_.Uniform(4);
      }
      *msgs.back().add_gradients() = std::move(chunks[i]);
    }
    if (complete) msgs.back().set_last(true);
    return msgs;
  }

 private:
  Harness* const h_;
  ProtoFuzzer fz_;
};

// ---------------------------------------------------------------------------
// Unary cases.

enum class Rpc {
  kRegister,
  kInit,
  kPush,
  kPull,
  kPushPull,
  kStatus,
  kCheckpoint,
  kHealth,
  kUnknown,
  kStreamAsUnary
};

const char* RpcName(Rpc r) {
  switch (r) {
    case Rpc::kRegister:
      return "Register";
    case Rpc::kInit:
      return "InitParams";
    case Rpc::kPush:
      return "Push";
    case Rpc::kPull:
      return "Pull";
    case Rpc::kPushPull:
      return "PushPull";
    case Rpc::kStatus:
      return "GetStatus";
    case Rpc::kCheckpoint:
      return "Checkpoint";
    case Rpc::kHealth:
      return "Health.Check";
    case Rpc::kUnknown:
      return "(unknown method)";
    case Rpc::kStreamAsUnary:
      return "Stream (as unary)";
  }
  return "?";
}

// Records a call's outcome; a call the server never answered is a finding.
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

void UnaryCase(Harness& h, uint64_t seed, int index, bool before_init) {
  CaseGen g(&h, seed);
  ProtoFuzzer& fz = g.fz();
  // Weights per RPC: the tensor-carrying ones get the most.
  static const std::vector<std::pair<Rpc, int>> kWeights = {
      {Rpc::kRegister, 8}, {Rpc::kInit, 8},      {Rpc::kPush, 22},
      {Rpc::kPull, 14},    {Rpc::kPushPull, 18}, {Rpc::kStatus, 8},
      {Rpc::kHealth, 8},   {Rpc::kUnknown, 2},   {Rpc::kStreamAsUnary, 2},
      {Rpc::kCheckpoint, 4}};
  static const int kTotal = [] {
    int total = 0;
    for (const auto& [rpc, weight] : kWeights) total += weight;
    return total;
  }();
  int w = fz.Uniform(kTotal);
  auto it = kWeights.begin();
  for (; w >= it->second; ++it) w -= it->second;
  Rpc rpc = it->first;
  // Before worker 0 initialized the model, a fuzzed InitParams could create
  // a garbage one (the real worker's init would then rightly fail); the
  // third test covers InitParams then.
  if (before_init && rpc == Rpc::kInit) rpc = Rpc::kPull;
  Request req;
  std::string method;
  switch (rpc) {
    case Rpc::kRegister:
      req = g.Register();
      method = kRegister;
      break;
    case Rpc::kInit:
      req = g.Init();
      method = kInitParams;
      break;
    case Rpc::kPush:
      req = g.Push();
      method = kPush;
      break;
    case Rpc::kPull:
      req = g.Pull();
      method = kPull;
      break;
    case Rpc::kPushPull:
      req = g.PushPull();
      method = kPushPull;
      break;
    case Rpc::kStatus:
      req = g.Status();
      method = kGetStatus;
      break;
    case Rpc::kCheckpoint:
      req = g.Checkpoint();
      method = kCheckpoint;
      break;
    case Rpc::kHealth:
      req = g.Health();
      method = kHealthCheck;
      break;
    case Rpc::kUnknown: {
      static const std::vector<std::string> kMethods = {
          "/ps.v1.ParameterServer/Nope", "/ps.v1.ParameterServer/", "/ps.v1.Other/Push",
          "/grpc.health.v1.Health/Nope", "/ps.v1.ParameterServer/Push/x"};
      req = g.Status();
      method = fz.Pick(kMethods);
      break;
    }
    case Rpc::kStreamAsUnary: {
      // One StreamRequest, then the client half-closes: the server must end
      // the stream even when that leaves the call incomplete. Only pushes:
      // a unary client reads one response, and leaving a pull's weights
      // (several messages) unread would stall the stream on flow control.
      const bool complete = fz.Chance(0.5);
      req.what = complete ? "a push's only message" : "a push's first message";
      req.bytes = fz.Mutate(
          g.Call(1, v1::CALL_PUSH, g.Chunks({int(h.slices.size()) - 1}, false), complete)[0], 0);
      if (fz.Chance(0.2)) {
        req.bytes = fz.NotProtobuf();
        req.what = "not protobuf";
      }
      method = kStream;
      break;
    }
  }
  const absl::Duration cancel_after =
      fz.Chance(0.04) ? absl::Milliseconds(fz.Uniform(30)) : absl::InfiniteDuration();
  UnaryResult r = CallUnary(h.stub(index), method, req.bytes, cancel_after);
  ++h.unary_cases;
  ++h.messages;
  const std::string row = absl::StrCat("unary ", RpcName(rpc));
  const std::string what =
      absl::StrCat(h.phase, " case ", index, ", ", req.what, ", ", req.bytes.size(), " bytes",
                   r.we_cancelled ? ", cancelled" : "");
  Record(h, row, r.status, r.we_cancelled, what);
  if (req.clean_nonfinite && rpc == Rpc::kPush && r.status.ok()) {
    ++h.nonfinite_accepted;
    h.findings.Add("push with NaN/Inf gradient values accepted",
                   absl::StrCat(row, " [", what, "]"));
  }
  if (r.status.ok()) {
    // The newest version, so that later cases can aim at it.
    const int field = rpc == Rpc::kStatus ? 6 : 1;
    if (rpc == Rpc::kPush || rpc == Rpc::kPull || rpc == Rpc::kPushPull || rpc == Rpc::kStatus) {
      if (auto v = VarintField(r.response, field)) h.SawVersion(static_cast<int64_t>(*v));
    }
  }
}

// ---------------------------------------------------------------------------
// Stream cases: a script of request messages, then how the client ends.

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

const char* KindName(int kind) {
  switch (kind) {
    case v1::CALL_PUSH:
      return "PUSH";
    case v1::CALL_PULL:
      return "PULL";
    case v1::CALL_PUSH_PULL:
      return "PUSH_PULL";
    default:
      return "bad kind";
  }
}

// Adds `msgs` (one call) to the script, each as it is or, at `rate`, mutated
// (and now and then garbled).
void AddCall(CaseGen& g, StreamScript* s, uint64_t call_id, int kind,
             const std::vector<v1::StreamRequest>& msgs, double rate) {
  s->calls[call_id] = KindName(kind);
  for (const v1::StreamRequest& m : msgs) {
    std::string bytes = g.fz().Mutate(m, rate);
    s->clean = s->clean && !g.fz().changed();
    if (rate > 0 && g.fz().Chance(0.05)) {
      bytes = g.fz().Garble(std::move(bytes));
      s->clean = false;
    }
    s->messages.push_back(std::move(bytes));
  }
}

std::vector<int> AllSlices(const Harness& h) {
  std::vector<int> all(h.slices.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

// Elements of the shard's flat buffer from element `from` of slice i to its
// end: what a span clamped at the buffer's end holds.
int64_t RestOfShard(const Harness& h, int i, int64_t from) {
  return h.total_elements - h.slices[i].flat_offset - from;
}

// The chunks that wedged a server: (offset 0, length 1), (1, 2^63-1 with
// `data_bytes` of data), (the wrapped offset 1 + 2^63-1, length 0). A check
// of offset + length that wraps lets the second through; it "covers" the
// slice if its data fills what is left of the buffer (a clamped span), and
// then the third starts at INT64_MIN.
std::vector<v1::TensorSlice> WrappingChunks(const Harness& h, int i, size_t data_bytes) {
  const SliceInfo& x = h.slices[i];
  std::vector<v1::TensorSlice> out(3);
  const int64_t offsets[] = {x.offset, x.offset + 1,
                             static_cast<int64_t>(uint64_t(x.offset) + 1 + uint64_t(INT64_MAX))};
  const int64_t lengths[] = {1, INT64_MAX, 0};
  const size_t bytes[] = {4, data_bytes, 0};
  for (int k = 0; k < 3; ++k) {
    out[k].set_name(x.name);
    for (int64_t d : x.shape) out[k].add_shape(d);
    out[k].set_offset(offsets[k]);
    out[k].set_length(lengths[k]);
    out[k].set_data(std::string(bytes[k], '\0'));
  }
  return out;
}

// Offsets and lengths at the edges of int64: each sequence is an invalid
// push of one slice (it never covers the slice with matching data).
std::vector<v1::TensorSlice> OverflowChunks(CaseGen& g, const Harness& h, int i) {
  constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  const SliceInfo& x = h.slices[i];
  auto chunk = [&](int64_t offset, int64_t length, size_t data_bytes) {
    v1::TensorSlice c;
    c.set_name(x.name);
    for (int64_t d : x.shape) c.add_shape(d);
    c.set_offset(offset);
    c.set_length(length);
    c.set_data(std::string(data_bytes, '\0'));
    return c;
  };
  const int64_t end = x.offset + x.length;
  switch (g.fz().Uniform(10)) {
    case 0:  // the case that wedged a server
      return WrappingChunks(
          h, i, g.fz().Chance(0.5) ? 36 : 4 * std::min<int64_t>(RestOfShard(h, i, 1), 1 << 20));
    case 1:
      return {chunk(x.offset, kMax, 4)};
    case 2:
      return {chunk(x.offset, 1, 4), chunk(x.offset + 1, kMax, 8), chunk(kMin, kMax, 0)};
    case 3:
      return {chunk(end - 1, 2, 8)};
    case 4:
      return {chunk(-1, 1, 4)};
    case 5:
      return {chunk(x.offset, -1, 0)};
    case 6:
      return {chunk(x.offset, int64_t{1} << 62, 16)};  // 4 * length wraps to 0
    case 7:
      return {chunk(x.offset, (int64_t{1} << 62) + 1, 4)};  // 4 * length wraps to 4
    case 8:
      return {chunk(kMax, 1, 4)};
    default: {  // no progress: empty chunks
      std::vector<v1::TensorSlice> out(1 + g.fz().Uniform(200), chunk(x.offset, 0, 0));
      return out;
    }
  }
}

// A random stream case.
StreamScript RandomStreamScript(CaseGen& g, const Harness& h) {
  ProtoFuzzer& fz = g.fz();
  StreamScript s;
  static const std::vector<double> kRates = {0, 0, 0, 0.05, 0.05, 0.25};
  const double rate = fz.Pick(kRates);
  const int pick = fz.Uniform(100);
  auto push_chunks = [&](bool nonfinite) {
    return g.Chunks(fz.Chance(0.6) ? AllSlices(h) : g.PushSlices(), nonfinite);
  };
  if (pick < 40) {
    s.what = absl::StrCat("calls, mutation rate ", rate);
    s.complete_calls = true;
    uint64_t id = fz.Chance(0.9) ? 1 : fz.Pick(std::vector<uint64_t>{2, 1000, uint64_t{1} << 62});
    for (int n = 1 + fz.Uniform(3); n > 0; --n) {
      const int kind = fz.Chance(0.05) ? fz.Pick(std::vector<int>{3, -1, 7}) : fz.Uniform(3);
      const bool push = kind == v1::CALL_PUSH || kind == v1::CALL_PUSH_PULL;
      AddCall(g, &s, id, kind,
              g.Call(id, kind, push ? push_chunks(false) : std::vector<v1::TensorSlice>{}, true),
              rate);
      id += fz.Chance(0.9) ? 1 : 1 + fz.Uniform(1000);
    }
  } else if (pick < 48) {
    s.what = "messages that are not StreamRequests";
    s.clean = false;
    for (int n = 1 + fz.Uniform(3); n > 0; --n) {
      switch (fz.Uniform(4)) {
        case 0:
          s.messages.push_back(fz.NotProtobuf());
          break;
        case 1:
          s.messages.push_back(fz.Random(v1::StreamRequest::descriptor()));
          break;
        case 2:
          s.messages.push_back(fz.Garble(fz.Mutate(g.Header(1, fz.Uniform(3)), 0)));
          break;
        default:
          s.messages.push_back(g.Push().bytes);
          break;  // a PushRequest
      }
    }
  } else if (pick < 54) {
    s.what = "second call before the first's last message";
    AddCall(g, &s, 1, v1::CALL_PUSH, g.Call(1, v1::CALL_PUSH, push_chunks(false), false), rate);
    AddCall(g, &s, 2, v1::CALL_PULL, g.Call(2, v1::CALL_PULL, {}, true), rate);
  } else if (pick < 62) {
    static const std::vector<std::vector<uint64_t>> kIds = {
        {0}, {5, 3}, {7, 7}, {~uint64_t{0}, 1}, {1, ~uint64_t{0}, 2}, {2, 1, 0}};
    const std::vector<uint64_t>& ids = fz.Pick(kIds);
    s.what = absl::StrCat("call ids ", absl::StrJoin(ids, ","));
    for (uint64_t id : ids) {
      const int kind = fz.Uniform(3);
      const bool push = kind != v1::CALL_PULL;
      AddCall(g, &s, id, kind,
              g.Call(id, kind, push ? push_chunks(false) : std::vector<v1::TensorSlice>{}, true),
              rate);
    }
  } else if (pick < 68) {
    s.what = "half-closed mid-call";
    std::vector<v1::StreamRequest> msgs = g.Call(1, v1::CALL_PUSH, push_chunks(false), false);
    msgs.resize(1 + fz.Uniform(msgs.size()));
    AddCall(g, &s, 1, v1::CALL_PUSH, msgs, rate);
  } else if (pick < 71) {
    s.what = "push left silent mid-call";
    std::vector<v1::StreamRequest> msgs = g.Call(1, v1::CALL_PUSH_PULL, push_chunks(false), false);
    msgs.resize(1 + fz.Uniform(msgs.size()));
    AddCall(g, &s, 1, v1::CALL_PUSH_PULL, msgs, 0);
    s.end = StreamScript::End::kSilent;
    s.silent_call = 1;
  } else if (pick < 78) {
    s.what = "cancelled";
    const int kind = fz.Uniform(3);
    std::vector<v1::StreamRequest> msgs =
        g.Call(1, kind, kind == v1::CALL_PULL ? std::vector<v1::TensorSlice>{} : push_chunks(false),
               fz.Chance(0.5));
    if (kind == v1::CALL_PULL) msgs[0].set_min_version(int64_t{1} << 62);  // waits
    AddCall(g, &s, 1, kind, msgs, rate);
    s.end = StreamScript::End::kCancel;
    s.cancel_after = absl::Milliseconds(fz.Uniform(50));
  } else if (pick < 85) {
    const int i = fz.Uniform(h.slices.size());
    s.what = absl::StrCat("offsets/lengths at the int64 edges on ", h.slices[i].name);
    const int kind = fz.Chance(0.5) ? v1::CALL_PUSH : v1::CALL_PUSH_PULL;
    std::vector<v1::TensorSlice> chunks = OverflowChunks(g, h, i);
    std::vector<v1::StreamRequest> msgs = {g.Header(1, kind)};
    for (auto& c : chunks) {
      if (fz.Chance(0.5)) msgs.emplace_back().set_call_id(1);  // one chunk per message, or several
      *msgs.back().add_gradients() = std::move(c);
    }
    msgs.back().set_last(true);
    AddCall(g, &s, 1, kind, msgs, 0);
    s.must_fail = true;
  } else if (pick < 90) {
    s.what = "pull carrying gradients";
    AddCall(g, &s, 1, v1::CALL_PULL, g.Call(1, v1::CALL_PULL, push_chunks(false), true), rate);
  } else if (pick < 95) {
    s.what = "push with NaN/Inf gradient values";
    AddCall(g, &s, 1, v1::CALL_PUSH, g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), true), true),
            0);
    s.must_fail = s.nonfinite = true;
  } else {
    s.what = "many small calls";
    uint64_t id = 1;
    for (int n = 10 + fz.Uniform(20); n > 0; --n, ++id) {
      const int kind = fz.Chance(0.9) ? v1::CALL_PUSH : v1::CALL_PULL;
      std::vector<v1::TensorSlice> chunks;
      if (kind == v1::CALL_PUSH) chunks = g.Chunks({fz.Uniform(h.slices.size())}, false);
      AddCall(g, &s, id, kind, g.Call(id, kind, chunks, true), rate);
    }
  }
  return s;
}

// Runs a stream script; records the stream's end and every call's answer.
// Returns what went wrong (also recorded as a finding), or "".
std::string RunStream(Harness& h, int index, const StreamScript& s) {
  ScriptedStream st(h.stub(index), kClientDeadline);
  int sent = 0;
  for (const std::string& m : s.messages) {
    if (!st.Write(m)) break;  // the server ended the stream
    ++sent;
  }
  h.messages += sent;
  ++h.stream_cases;
  std::string problem;
  bool we_cancelled = false;
  switch (s.end) {
    case StreamScript::End::kWritesDone:
      st.WritesDone();
      break;
    case StreamScript::End::kCancel:
      // Waits `cancel_after` (less if the server ends the stream first).
      st.WaitAnsweredOrEnded(~uint64_t{0}, absl::Now() + s.cancel_after);
      st.Cancel();
      we_cancelled = true;
      break;
    case StreamScript::End::kSilent:
      if (h.call_timeout) {
        // --call_timeout: the server must fail the silent call by itself.
        const absl::Duration bound = *h.call_timeout + absl::Seconds(5);
        if (!st.WaitAnsweredOrEnded(s.silent_call, absl::Now() + bound)) {
          problem = absl::StrCat("the server did not fail a call left silent mid-way within ",
                                 absl::FormatDuration(bound), " (--call_timeout + 5 s)");
          h.findings.Add("call left silent not failed within --call_timeout + 5 s",
                         absl::StrCat("stream [", h.phase, " case ", index, ", ", s.what, "]"));
        }
        st.WritesDone();
      } else {
        // No --call_timeout: waiting is right; give up after kSilentGiveUp.
        st.WaitAnsweredOrEnded(s.silent_call, absl::Now() + kSilentGiveUp);
        st.Cancel();
        we_cancelled = true;
      }
      break;
  }
  st.Release();
  // The context's deadline ends the call by kClientDeadline at the latest.
  std::optional<grpc::Status> status =
      st.WaitDone(absl::Now() + kClientDeadline + absl::Seconds(10));
  const grpc::Status end =
      status.value_or(grpc::Status(StatusCode::DEADLINE_EXCEEDED, "never ended"));
  const std::string what = absl::StrCat(h.phase, " case ", index, ", ", s.what, ", ", sent, "/",
                                        s.messages.size(), " messages sent");
  Record(h, "stream Stream (end)", end, we_cancelled, what);

  std::map<uint64_t, ScriptedStream::Answer> answers;
  for (const ScriptedStream::Answer& a : st.answers()) {
    if (a.code == 0) h.SawVersion(a.version);
    answers.emplace(a.call_id, a);  // the first answer of each call
    if (s.must_fail && a.code == 0) {
      if (s.nonfinite) ++h.nonfinite_accepted;
      problem = absl::StrCat("call ", a.call_id, ": an invalid push was accepted (version ",
                             a.version, ")");
      h.findings.Add(
          s.nonfinite ? "push with NaN/Inf gradient values accepted" : "invalid push accepted",
          absl::StrCat("stream [", what, "]: ", problem));
    }
  }
  for (const auto& [id, kind] : s.calls) {
    auto it = answers.find(id);
    h.tally.Add(
        absl::StrCat("stream call ", kind),
        it == answers.end() ? "no answer" : CodeName(static_cast<StatusCode>(it->second.code)),
        it == answers.end() ? "" : it->second.message.substr(0, 300));
    // Complete calls, sent as they are: once the stream ended OK, each must
    // have been answered.
    if (s.complete_calls && s.clean && end.ok() && it == answers.end()) {
      problem = absl::StrCat("call ", id, " got no answer, yet the stream ended OK");
      h.findings.Add("complete call not answered, yet the stream ended OK",
                     absl::StrCat("stream [", what, "]: ", problem));
    }
  }
  if (st.unparsable() > 0) {
    problem = absl::StrCat("the server sent ", st.unparsable(),
                           " StreamResponse(s) that do not parse: ", st.unparsable_why());
    h.findings.Add("StreamResponse that does not parse",
                   absl::StrCat("stream [", what, "]: ", problem));
  }
  if (problem.empty() && ClientGaveUp(end)) {
    problem = "no status from the server within the deadline";
  }
  return problem;
}

// Runs case(i) for i in [0, n) on kThreads threads.
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

// ---------------------------------------------------------------------------
// Named cases: the ones the fuzzing is meant to catch, run first and alone,
// each reported by name.

struct NamedCase {
  std::string name;
  // Runs the case; returns what went wrong, or "".
  std::function<std::string(Harness&, CaseGen&)> run;
};

std::string ExpectRefused(Harness& h, const std::string& row, const std::string& method,
                          const std::string& bytes) {
  UnaryResult r = CallUnary(h.stub(0), method, bytes);
  ++h.unary_cases;
  ++h.messages;
  Record(h, row, r.status, false, h.phase);
  if (ClientGaveUp(r.status)) return "no status from the server within the deadline";
  if (r.status.ok()) return "accepted";
  return "";
}

int SliceIndex(const Harness& h, const std::string& name) {
  for (size_t i = 0; i < h.slices.size(); ++i) {
    if (h.slices[i].name == name) return static_cast<int>(i);
  }
  return 0;
}

std::vector<NamedCase> NamedCases() {
  std::vector<NamedCase> cases;
  auto stream_case = [](std::string what,
                        std::function<void(Harness&, CaseGen&, StreamScript*)> build) {
    return NamedCase{what, [what, build](Harness& h, CaseGen& g) {
                       StreamScript s;
                       s.what = what;
                       build(h, g, &s);
                       return RunStream(h, 0, s);
                     }};
  };
  // One chunk per message, as the case was first seen: on fc1.bias with 36
  // bytes, and on the last slice with 36 bytes = what is left of the shard's
  // buffer after its element 1 (fc3.bias: 9 floats).
  for (bool last_slice : {false, true}) {
    cases.push_back(stream_case(
        absl::StrCat("stream push on ", last_slice ? "the last slice" : "fc1.bias",
                     " with chunks (0,1), (1,2^63-1, 36 bytes), (wrapped offset,0), last"),
        [last_slice](Harness& h, CaseGen& g, StreamScript* s) {
          const int i = last_slice ? int(h.slices.size()) - 1 : SliceIndex(h, "fc1.bias");
          std::vector<v1::StreamRequest> msgs = {g.Header(1, v1::CALL_PUSH)};
          msgs[0].set_worker_id(0);
          msgs[0].set_version(h.version.load());
          for (v1::TensorSlice& c : WrappingChunks(h, i, 36)) {
            v1::StreamRequest& m = msgs.emplace_back();
            m.set_call_id(1);
            *m.add_gradients() = std::move(c);
          }
          msgs.back().set_last(true);
          AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
          s->must_fail = true;
        }));
  }
  cases.push_back(stream_case("stream half-closed (WritesDone) in the middle of a push",
                              [](Harness& h, CaseGen& g, StreamScript* s) {
                                std::vector<v1::StreamRequest> msgs =
                                    g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), false), false);
                                msgs.resize(1);
                                AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
                              }));
  cases.push_back(stream_case(
      "stream: a second call before the first's last message",
      [](Harness& h, CaseGen& g, StreamScript* s) {
        AddCall(g, s, 1, v1::CALL_PUSH, g.Call(1, v1::CALL_PUSH, g.Chunks({0}, false), false), 0);
        AddCall(g, s, 2, v1::CALL_PULL, g.Call(2, v1::CALL_PULL, {}, true), 0);
      }));
  cases.push_back(stream_case("stream: call_id 0", [](Harness&, CaseGen& g, StreamScript* s) {
    AddCall(g, s, 0, v1::CALL_PULL, g.Call(0, v1::CALL_PULL, {}, true), 0);
  }));
  cases.push_back(
      stream_case("stream: call ids 5, then 3", [](Harness&, CaseGen& g, StreamScript* s) {
        AddCall(g, s, 5, v1::CALL_PULL, g.Call(5, v1::CALL_PULL, {}, true), 0);
        AddCall(g, s, 3, v1::CALL_PULL, g.Call(3, v1::CALL_PULL, {}, true), 0);
      }));
  cases.push_back(stream_case("stream push with NaN/Inf gradient values",
                              [](Harness& h, CaseGen& g, StreamScript* s) {
                                std::vector<v1::StreamRequest> msgs =
                                    g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), true), true);
                                msgs[0].set_worker_id(0);
                                msgs[0].set_version(h.version.load());
                                AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
                                s->must_fail = s->nonfinite = true;
                              }));
  cases.push_back(
      stream_case("stream push left silent mid-call", [](Harness& h, CaseGen& g, StreamScript* s) {
        std::vector<v1::StreamRequest> msgs =
            g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), false), false);
        msgs.resize(1);
        AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
        s->end = StreamScript::End::kSilent;
        s->silent_call = 1;
      }));
  cases.push_back({"unary Push with NaN/Inf gradient values", [](Harness& h, CaseGen& g) {
                     v1::PushRequest p;
                     // Sync: not worker 0, whose stream push above may be pending.
                     p.set_worker_id(h.num_workers - 1);
                     p.set_version(h.version.load());
                     for (size_t i = 0; i < h.slices.size(); ++i) {
                       g.FillSlice(i, 0, h.slices[i].length, i == 1, p.add_gradients());
                     }
                     std::string problem =
                         ExpectRefused(h, "unary Push", kPush, p.SerializeAsString());
                     if (problem == "accepted") ++h.nonfinite_accepted;
                     return problem;
                   }});
  cases.push_back(
      {"unary Push with a slice at offset 1, length 2^63-1, 36 bytes", [](Harness& h, CaseGen& g) {
         v1::PushRequest p;
         p.set_version(h.version.load());
         for (size_t i = 0; i < h.slices.size(); ++i) {
           g.FillSlice(i, 0, h.slices[i].length, false, p.add_gradients());
         }
         v1::TensorSlice* s = p.mutable_gradients(SliceIndex(h, "fc1.bias"));
         s->set_offset(1);
         s->set_length(INT64_MAX);
         s->set_data(std::string(36, '\0'));
         return ExpectRefused(h, "unary Push", kPush, p.SerializeAsString());
       }});
  cases.push_back({"unary PushPull whose data claims 2^63-1 bytes", [](Harness& h, CaseGen&) {
                     std::string slice;
                     AppendLengthDelimited(1, "fc3.bias", &slice);
                     AppendTag(5, kWireLen, &slice);
                     AppendVarint(uint64_t(INT64_MAX), &slice);
                     slice += std::string(40, '\0');
                     std::string push;
                     AppendLengthDelimited(3, slice, &push);
                     std::string req;
                     AppendLengthDelimited(1, push, &req);
                     return ExpectRefused(h, "unary PushPull", kPushPull, req);
                   }});
  cases.push_back(
      {"unary InitParams with a spec whose element count wraps to 0", [](Harness& h, CaseGen&) {
         v1::InitRequest m;
         auto* t = m.mutable_spec()->add_tensors();
         t->set_name("w");
         t->add_shape(int64_t{1} << 32);
         t->add_shape(int64_t{1} << 32);
         return ExpectRefused(h, "unary InitParams", kInitParams, m.SerializeAsString());
       }});
  cases.push_back({"not protobuf, to every unary method", [](Harness& h, CaseGen& g) {
                     const std::vector<std::pair<Rpc, const char*>> kMethods = {
                         {Rpc::kRegister, kRegister}, {Rpc::kInit, kInitParams},
                         {Rpc::kPush, kPush},         {Rpc::kPull, kPull},
                         {Rpc::kPushPull, kPushPull}, {Rpc::kStatus, kGetStatus},
                         {Rpc::kCheckpoint, kCheckpoint}, {Rpc::kHealth, kHealthCheck}};
                     for (const auto& [rpc, method] : kMethods) {
                       std::string problem = ExpectRefused(h, absl::StrCat("unary ", RpcName(rpc)),
                                                           method, g.fz().NotProtobuf());
                       if (!problem.empty()) return absl::StrCat(method, ": ", problem);
                     }
                     return std::string();
                   }});
  cases.push_back(
      {"unary Pull for version 2^62: the server's DEADLINE_EXCEEDED within --pull_timeout",
       [](Harness& h, CaseGen&) {
         v1::PullRequest p;
         p.set_min_version(int64_t{1} << 62);
         UnaryResult r = CallUnary(h.stub(0), kPull, p.SerializeAsString());
         ++h.unary_cases;
         ++h.messages;
         Record(h, "unary Pull", r.status, false, h.phase);
         if (r.status.error_code() != StatusCode::DEADLINE_EXCEEDED || ClientGaveUp(r.status)) {
           return Describe(r.status);
         }
         if (r.took > absl::Seconds(kPullTimeoutS + 3)) {
           return absl::StrCat("took ", absl::FormatDuration(r.took));
         }
         return std::string();
       }});
  cases.push_back(
      {"cancelled waiting pulls (unary and stream) stop waiting on the server",
       [](Harness& h, CaseGen& g) {
         v1::PullRequest p;
         p.set_min_version(int64_t{1} << 62);
         p.set_wait_timeout_ms(60000);  // the server clamps it to --pull_timeout
         UnaryResult r =
             CallUnary(h.stub(0), kPull, p.SerializeAsString(), absl::Milliseconds(100));
         ++h.unary_cases;
         ++h.messages;
         Record(h, "unary Pull", r.status, r.we_cancelled, h.phase);
         StreamScript s;
         s.what = "cancelled waiting pull";
         std::vector<v1::StreamRequest> msgs = g.Call(1, v1::CALL_PULL, {}, true);
         msgs[0].set_worker_id(0);
         msgs[0].set_min_version(int64_t{1} << 62);
         AddCall(g, &s, 1, v1::CALL_PULL, msgs, 0);
         s.end = StreamScript::End::kCancel;
         s.cancel_after = absl::Milliseconds(100);
         const absl::Time cancelled = absl::Now();
         std::string problem = RunStream(h, 0, s);
         if (!problem.empty()) return problem;
         // Both waits would end by themselves after --pull_timeout;
         // cancelled, they must be gone well before.
         for (absl::Time until = cancelled + absl::Seconds(1); absl::Now() < until;) {
           UnaryResult st = CallUnary(h.stub(0), kGetStatus, "");
           v1::StatusResponse resp;
           if (st.status.ok() && resp.ParseFromString(st.response) && resp.waiting_calls() == 0) {
             return std::string();
           }
           absl::SleepFor(absl::Milliseconds(50));
         }
         return std::string("waiting_calls still > 0 1 s after the cancels");
       }});
  return cases;
}

// ---------------------------------------------------------------------------
// Checks on the server.

// The server's status, through the generated stub.
absl::StatusOr<v1::StatusResponse> GetStatus(const std::string& address) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::StatusResponse resp;
  grpc::Status s = stub->GetStatus(&ctx, v1::StatusRequest(), &resp);
  if (!s.ok()) return absl::UnavailableError(Describe(s));
  return resp;
}

std::string HealthStatus(const std::string& address) {
  auto stub = health::Health::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  health::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, health::HealthCheckRequest(), &resp);
  if (!s.ok()) return Describe(s);
  return health::HealthCheckResponse::ServingStatus_Name(resp.status());
}

// Sync mode: a step that some but not all workers pushed (the fuzzer's valid
// pushes) would make the real workers' pushes for that step collide. Pushes
// zero gradients for the missing workers to complete it.
absl::Status CompletePendingStep(Harness& h, const std::string& address) {
  auto st = GetStatus(address);
  if (!st.ok()) return st.status();
  if (st->waiting_for_size() == 0 || st->waiting_for_size() == h.num_workers)
    return absl::OkStatus();
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  for (int w : st->waiting_for()) {
    v1::PushRequest p;
    p.set_worker_id(w);
    p.set_version(st->version());
    for (const SliceInfo& x : h.slices) {
      v1::TensorSlice* s = p.add_gradients();
      s->set_name(x.name);
      for (int64_t d : x.shape) s->add_shape(d);
      s->set_offset(x.offset);
      s->set_length(x.length);
      s->set_data(std::string(4 * x.length, '\0'));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::PushResponse resp;
    grpc::Status s = stub->Push(&ctx, p, &resp);
    if (!s.ok()) return absl::InternalError(absl::StrCat("completing step: ", Describe(s)));
  }
  return absl::OkStatus();
}

// Pulls the weights; a description of the first non-finite value, or "".
std::string NonFiniteWeights(const std::string& address) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::PullRequest req;
  v1::PullResponse resp;
  grpc::Status s = stub->Pull(&ctx, req, &resp);
  if (!s.ok()) return absl::StrCat("pull failed: ", Describe(s));
  int64_t bad = 0;
  std::string first;
  for (const v1::TensorSlice& t : resp.weights()) {
    const std::string& d = t.data();
    for (size_t k = 0; k + 4 <= d.size(); k += 4) {
      float f;
      std::memcpy(&f, &d[k], 4);
      if (!std::isfinite(f)) {
        if (bad++ == 0) first = absl::StrCat(t.name(), "[", k / 4, "] = ", f);
      }
    }
  }
  return bad == 0 ? ""
                  : absl::StrCat(bad, " non-finite weights at version ", resp.version(), ", first ",
                                 first);
}

// Loads the model the server reports (spec and this shard's layout).
absl::StatusOr<std::vector<SliceInfo>> ServerModel(const std::string& address, int num_workers) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::RegisterRequest req;
  req.set_num_workers(num_workers);
  v1::RegisterResponse resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(Describe(s));
  if (!resp.initialized()) return absl::FailedPreconditionError("the server has no model");
  std::vector<SliceInfo> out;
  for (const v1::ShardRange& r : resp.layout()) {
    SliceInfo x{r.name(), {}, r.offset(), r.length()};
    for (const v1::TensorSpec& t : resp.spec().tensors()) {
      if (t.name() == r.name()) x.shape.assign(t.shape().begin(), t.shape().end());
    }
    out.push_back(std::move(x));
  }
  return out;
}

// ---------------------------------------------------------------------------
// The test of one mode.

void FuzzMode(const std::string& mode, int num_workers) {
  const uint64_t seed = Seed();
  const std::vector<std::string> flags = ServerFlags();
  std::cout << "grpc_fuzz " << mode << ": seed " << seed << " (FUZZ_SEED=" << seed << " replays)"
            << std::endl;
  auto server = StartServer(absl::StrCat("fuzz_", mode), mode, num_workers, flags);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = server->address;
  ChildProcess& proc = *server->process;

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
  const absl::Duration server_cpu = ProcCpuTime(proc.pid());

  // Checks.
  const bool alive = !proc.Poll();
  EXPECT_TRUE(alive) << "ps_server died during fuzzing: " << DescribeExit(proc.Poll()) << "\n"
                     << proc.LogTail(30);
  const int64_t hwm = ProcStatusBytes(proc.pid(), "VmHWM:");
  const int64_t rss = ProcStatusBytes(proc.pid(), "VmRSS:");
  if (alive) {
    EXPECT_EQ(HealthStatus(address), "SERVING");
    // Waits end after --pull_timeout at the latest; none may be left over.
    int64_t waiting = -1;
    for (absl::Time until = absl::Now() + absl::Seconds(kPullTimeoutS + 3); absl::Now() < until;
         absl::SleepFor(absl::Milliseconds(100))) {
      auto st = GetStatus(address);
      waiting = st.ok() ? st->waiting_calls() : -1;
      if (waiting == 0) break;
    }
    EXPECT_EQ(waiting, 0) << "waiting calls left on the server after every call ended";
    EXPECT_LE(hwm, kRssBoundBytes)
        << "peak RSS (VmHWM) " << MiB(hwm) << " over the bound " << MiB(kRssBoundBytes);
    if (mode == "sync") {
      const absl::Status completed = CompletePendingStep(h, address);
      EXPECT_TRUE(completed.ok()) << completed;
    }
    EXPECT_EQ(NonFiniteWeights(address), "") << "the weights are no longer finite";
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
    std::optional<int> st = proc.Wait(kShutdownBound);
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
  std::cout << "\n=== grpc_fuzz " << mode << " (" << num_workers << " workers), seed " << seed
            << ": " << h.unary_cases + h.stream_cases << " cases (unary " << h.unary_cases
            << ", stream " << h.stream_cases << "), " << h.messages << " request messages\n"
            << "time: " << absl::StrJoin(timings, ", ") << "; server CPU "
            << absl::StrFormat("%.1f s", absl::ToDoubleSeconds(server_cpu)) << " until the checks\n"
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
  std::optional<ServerProcess> server;
  // Checks a server that is done with: its peak RSS, and whether it died.
  auto retire = [&](const std::string& after) {
    const int64_t hwm = ProcStatusBytes(server->process->pid(), "VmHWM:");
    EXPECT_LE(hwm, kRssBoundBytes) << "peak RSS (VmHWM) " << MiB(hwm) << " after " << after;
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
    ChildProcess& proc = *server->process;
    grpc::GenericStub stub(NewChannel(server->address));
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
  ASSERT_TRUE(server.has_value());
  // The last server saw only refusals: the real worker 0 creates its model.
  WorkersResult w = RunWorkers("fuzz_init", server->address, 1, 5);
  EXPECT_TRUE(w.ok) << "the real worker 0 could not initialize and train:\n" << w.report;
  ChildProcess& proc = *server->process;
  const int64_t hwm = ProcStatusBytes(proc.pid(), "VmHWM:");
  EXPECT_LE(hwm, kRssBoundBytes) << "peak RSS (VmHWM) " << MiB(hwm);
  std::cout << "  server " << servers << ": peak RSS " << MiB(hwm) << " after the real worker"
            << std::endl;
  proc.Signal(SIGTERM);
  std::optional<int> st = proc.Wait(kShutdownBound);
  EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0)
      << "after SIGTERM: " << DescribeExit(st);
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " PS_SERVER PS_WORKER" << std::endl;
    return 2;
  }
  ps::g_server_bin = argv[1];
  ps::g_worker_bin = argv[2];
  return RUN_ALL_TESTS();
}

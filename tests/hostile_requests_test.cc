// Hostile and broken requests, over both transports (unary RPCs and the
// Stream RPC): each gets an error status that names the problem, within its
// deadline, without allocating what it declares, and the shard keeps serving
// real workers afterwards. Regression tests for a hostile-input review. The
// same test target also runs hostile_requests_clear_errors_test.cc. The
// fixture is tests/hostile_fixture.h.
#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hostile_fixture.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

using namespace hostile;  // NOLINT: the fixture and its helpers

TEST_F(Hostile, OverflowingChunkRangeIsInvalidArgumentOnBothTransports) {
  StartDefault();
  // The ~100-byte request that used to wedge a shard: chunks (0, 1),
  // (1, 2^63-1) with 36 bytes, then (the wrapped offset, 0, last).
  std::vector<v1::TensorSlice> evil(3);
  AddSlice(&evil[0], "fc1.bias", {10}, 0, 1, Floats({1}));
  AddSlice(&evil[1], "fc1.bias", {10}, 1, kI64Max, std::string(36, '\0'));
  AddSlice(&evil[2], "fc1.bias", {10}, kI64Min, 0, "");
  for (const char* t : kTransports) {
    absl::Status s = PushOver(t, 0, 0, evil);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'fc1.bias'")) << t;
    EXPECT_THAT(std::string(s.message()), HasSubstr("[0, 10)")) << t;
  }
  EXPECT_EQ(Version(), 0);
  ExpectStillTrains();
}

TEST_F(Hostile, EveryBadSliceGetsTheSameCodeOnBothTransports) {
  StartDefault();
  std::vector<std::pair<std::vector<v1::TensorSlice>, const char*>> cases;
  auto with = [&](int which, auto edit, const char* says) {
    std::vector<v1::TensorSlice> g = Good(1);
    edit(&g[which]);
    cases.emplace_back(g, says);
  };
  with(1, [](v1::TensorSlice* s) { s->set_name("nope"); }, "unknown tensor 'nope'");
  with(1, [](v1::TensorSlice* s) { s->set_offset(-1); }, "fc1.bias");
  with(1, [](v1::TensorSlice* s) { s->set_length(-5); }, "fc1.bias");
  with(1, [](v1::TensorSlice* s) { s->set_data("abc"); }, "not a multiple of 4");
  with(0, [](v1::TensorSlice* s) { s->clear_shape(); }, "shape");
  with(0, [](v1::TensorSlice* s) { s->set_length(39); }, "expected 39");
  with(0, [](v1::TensorSlice* s) { s->add_shape(3); }, "shape");
  for (const auto& [slices, says] : cases) {
    for (const char* t : kTransports) {
      absl::Status s = PushOver(t, 0, 0, slices);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr(says)) << t;
    }
  }
  EXPECT_EQ(Version(), 0);
  ExpectStillTrains();
}

// The bf16 wire (WireDtype in proto/types.proto): a slice whose bytes are not
// 2 * length, or whose dtype is unknown, is refused naming the tensor.
TEST_F(Hostile, BadBf16SlicesAreInvalidArgumentNamingTheTensorOnBothTransports) {
  StartDefault();
  std::vector<std::pair<std::vector<v1::TensorSlice>, const char*>> cases;
  auto with = [&](auto edit, const char* says) {
    std::vector<v1::TensorSlice> g = Good(1);
    edit(&g[1]);
    cases.emplace_back(g, says);
  };
  // float32 bytes labelled bf16: twice too many.
  with([](v1::TensorSlice* s) { s->set_dtype(v1::BF16); }, "20 bf16 elements, expected 10");
  with(
      [](v1::TensorSlice* s) {
        s->set_dtype(v1::BF16);
        s->set_data(std::string(18, '\0'));
      },
      "9 bf16 elements, expected 10");
  with(
      [](v1::TensorSlice* s) {
        s->set_dtype(v1::BF16);
        s->set_data("abc");
      },
      "not a multiple of 2");
  with([](v1::TensorSlice* s) { s->set_dtype(static_cast<v1::WireDtype>(7)); }, "unknown dtype 7");
  with([](v1::TensorSlice* s) { s->set_dtype(static_cast<v1::WireDtype>(-1)); }, "unknown dtype");
  for (const auto& [slices, says] : cases) {
    for (const char* t : kTransports) {
      absl::Status s = PushOver(t, 0, 0, slices);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'fc1.bias'")) << t << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr(says)) << t << ": " << s;
    }
  }
  EXPECT_EQ(Version(), 0);
  ExpectStillTrains();
}

TEST_F(Hostile, UnknownWeightsDtypeIsInvalidArgumentOnBothTransports) {
  StartDefault();
  v1::PullRequest pull;
  pull.set_weights_dtype(static_cast<v1::WireDtype>(5));
  v1::PullResponse resp;
  grpc::Status u = stub_->Pull(Context().get(), pull, &resp);
  EXPECT_EQ(u.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << u.error_message();
  EXPECT_THAT(u.error_message(), HasSubstr("unknown weights_dtype 5"));

  v1::PushPullRequest push_pull;
  push_pull.set_weights_dtype(static_cast<v1::WireDtype>(5));
  for (const v1::TensorSlice& s : Good(0)) *push_pull.mutable_push()->add_gradients() = s;
  grpc::Status pp = stub_->PushPull(Context().get(), push_pull, &resp);
  EXPECT_EQ(pp.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << pp.error_message();
  EXPECT_THAT(pp.error_message(), HasSubstr("unknown weights_dtype 5"));

  auto ctx = Context();
  auto rw = stub_->Stream(ctx.get());
  v1::StreamRequest req;
  req.set_call_id(1);
  req.set_kind(v1::CALL_PULL);
  req.set_weights_dtype(static_cast<v1::WireDtype>(5));
  req.set_last(true);
  rw->Write(req);
  rw->WritesDone();
  v1::StreamResponse sr;
  while (rw->Read(&sr)) {
  }
  grpc::Status st = rw->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("unknown weights_dtype 5"));
  ExpectStillTrains();
}

TEST_F(Hostile, NonFiniteGradientsAreRejectedOnBothTransports) {
  StartDefault();
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    std::vector<v1::TensorSlice> g = Good(1);
    std::vector<float> bias(10, 1.0f);
    bias[7] = bad;
    g[1].set_data(Floats(bias));
    for (const char* t : kTransports) {
      absl::Status s = PushOver(t, 0, 0, g);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("NaN or Inf")) << t;
    }
  }
  EXPECT_EQ(Version(), 0);
  TensorList w;
  ASSERT_TRUE(client_->Pull(0, &w).ok());
  for (const auto& t : w) {
    for (float v : t) ASSERT_TRUE(std::isfinite(v));
  }
  ExpectStillTrains();
}

TEST_F(Hostile, ExtremeWorkerIdsAndVersionsAreRangeChecked) {
  ServerOptions o;
  o.shard.mode = Mode::kAsync;
  o.shard.default_wait = absl::Seconds(1);  // what a wait of <= 0 ms gets
  o.shard.max_wait = absl::Seconds(2);      // the cap of any wait
  Start(o);
  for (const char* t : kTransports) {
    for (int worker : {-1, 1, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()}) {
      absl::Status s = PushOver(t, worker, 0, Good(1));
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t << " worker " << worker;
      EXPECT_THAT(std::string(s.message()), HasSubstr("worker_id")) << s;
    }
    for (int64_t version : {int64_t{-1}, kI64Min}) {
      absl::Status s = PushOver(t, 0, version, Good(1));
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t << " version " << version;
    }
    // Async: a version from the future.
    absl::Status s = PushOver(t, 0, kI64Max, Good(1));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << t << ": " << s;
  }
  // Pulls: extreme min_version and wait times end within the server's cap.
  for (int64_t wait_ms : {kI64Min, int64_t{-1}, int64_t{200}, kI64Max}) {
    v1::PullRequest req;
    req.set_min_version(kI64Max);
    req.set_wait_timeout_ms(wait_ms);
    v1::PullResponse resp;
    grpc::Status st = stub_->Pull(Context(90).get(), req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << wait_ms;
    EXPECT_THAT(st.error_message(), HasSubstr("gave up after"));
  }
  EXPECT_EQ(server_->shard()->Stats().max_staleness, 0);
  ExpectStillTrains();
}

TEST_F(Hostile, HugeOrMalformedModelSpecsAreRefusedBeforeAllocating) {
  ServerOptions o;
  o.shard.num_workers = 2;
  // Start without the default init: the specs below race for creation.
  o.listen = "127.0.0.1:0";
  auto s = PsServer::Start(o);
  ASSERT_TRUE(s.ok());
  server_ = *std::move(s);
  stub_ = v1::ParameterServer::NewStub(
      grpc::CreateChannel(server_->address(), ps::MakeChannelCredentials()));
  const int64_t rss_before = ProcStatusBytes(getpid(), "VmHWM:");
  struct Case {
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
    grpc::StatusCode code;
    const char* says;
  } cases[] = {
      // 1 GiB declared (2^28 floats), no values sent.
      {{{"big", {1 << 14, 1 << 14}}}, grpc::StatusCode::INVALID_ARGUMENT, "missing elements"},
      // 16 GiB declared: past --max_model_elements.
      {{{"a", {1 << 30}}, {"b", {1 << 30}}, {"c", {1 << 30}}, {"d", {1 << 30}}, {"e", {2}}},
       grpc::StatusCode::RESOURCE_EXHAUSTED, "max_model_elements"},
      // A product that overflows int64.
      {{{"x", {int64_t{1} << 40, int64_t{1} << 40}}}, grpc::StatusCode::INVALID_ARGUMENT,
       "more than"},
      {{{"x", {2, -3}}}, grpc::StatusCode::INVALID_ARGUMENT, "dimension < 1"},
      {{{"x", {1, 1, 1, 1, 1, 1, 1, 1, 1}}}, grpc::StatusCode::INVALID_ARGUMENT, "rank 9"},
      {{{std::string(300, 'n'), {2}}}, grpc::StatusCode::INVALID_ARGUMENT, "300 bytes"},
      {{{"x", {2}}, {"x", {2}}}, grpc::StatusCode::INVALID_ARGUMENT, "twice"},
      {{}, grpc::StatusCode::INVALID_ARGUMENT, "no tensors"},
  };
  for (const Case& c : cases) {
    v1::InitRequest req;
    req.set_worker_id(0);
    for (const auto& [name, shape] : c.tensors) {
      v1::TensorSpec* t = req.mutable_spec()->add_tensors();
      t->set_name(name);
      for (int64_t d : shape) t->add_shape(d);
    }
    v1::InitResponse resp;
    grpc::Status st = stub_->InitParams(Context().get(), req, &resp);
    EXPECT_EQ(st.error_code(), c.code) << c.says << ": " << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(c.says));
  }
  // Nothing of the declared sizes was allocated (the server runs in this
  // process; a 1 GiB buffer would show, even zero-filled... and untouched
  // pages would not, so the bound is on what was touched).
  EXPECT_LT(ProcStatusBytes(getpid(), "VmHWM:") - rss_before, int64_t{64} << 20);
  EXPECT_FALSE(server_->shard()->Stats().initialized);
}

TEST_F(Hostile, CompressedRequestsAreRefused) {
  StartDefault();
  v1::StatusRequest req;
  v1::StatusResponse resp;
  auto ctx = Context();
  ctx->set_compression_algorithm(GRPC_COMPRESS_GZIP);
  grpc::Status st = stub_->GetStatus(ctx.get(), req, &resp);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED) << st.error_message();
  // Uncompressed still works.
  EXPECT_TRUE(stub_->GetStatus(Context().get(), req, &resp).ok());
}

TEST_F(Hostile, OversizedMessagesAreRefusedByTheReceiveLimit) {
  ServerOptions o;
  o.shard.spec_limits.max_model_elements = 1024;
  Start(o);
  EXPECT_LT(MaxReceiveMessageBytes(o), 4 << 20);
  std::vector<v1::TensorSlice> g = Good(1);
  g[0].set_data(std::string(8 << 20, '\0'));  // 8 MB
  grpc::Status st = UnaryPush(0, 0, g);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  ExpectStillTrains();
}

// Stream calls that never finish: half-closed, silent, or overlapped.
TEST_F(Hostile, StreamHalfClosedMidCallFailsAndFreesTheBuffer) {
  ServerOptions o;
  o.shard.max_pending_pushes = 1;  // a leaked buffer would block the next push
  Start(o);
  for (int i = 0; i < 3; ++i) {
    auto ctx = Context();
    auto rw = stub_->Stream(ctx.get());
    v1::StreamRequest req;
    req.set_call_id(1);
    req.set_kind(v1::CALL_PUSH);
    AddSlice(req.add_gradients(), "fc1.bias", {10}, 0, 5, Floats(std::vector<float>(5, 1)));
    ASSERT_TRUE(rw->Write(req));  // no `last`
    rw->WritesDone();
    grpc::Status st = rw->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr("in the middle of call 1"));
  }
  ExpectStillTrains();
}

TEST_F(Hostile, SilentStreamCallIsFailedAfterTheCallTimeout) {
  ServerOptions o;
  o.shard.max_pending_pushes = 1;
  o.service.call_timeout = absl::Seconds(1);
  Start(o);
  auto ctx = Context(30);
  auto rw = stub_->Stream(ctx.get());
  v1::StreamRequest req;
  req.set_call_id(1);
  req.set_kind(v1::CALL_PUSH);
  AddSlice(req.add_gradients(), "fc1.bias", {10}, 0, 5, Floats(std::vector<float>(5, 1)));
  ASSERT_TRUE(rw->Write(req));  // then silence, stream left open
  // Once the server took the call's buffer (bounded poll: Write returns
  // before the server has read the message), another push cannot start.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server_->shard()->Stats().pending_pushes != 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(server_->shard()->Stats().pending_pushes, 1);
  EXPECT_EQ(StreamPush(0, 0, Good(1)).code(), absl::StatusCode::kResourceExhausted);
  grpc::Status st = rw->Finish();  // returns once the server ends the stream
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("call_timeout"));
  ExpectStillTrains();  // the buffer came back
}

TEST_F(Hostile, SecondStreamCallBeforeTheFirstIsAnsweredEndsTheStream) {
  StartDefault(Mode::kSync, 2);
  auto ctx = Context();
  auto rw = stub_->Stream(ctx.get());
  v1::StreamRequest pull;
  pull.set_kind(v1::CALL_PULL);
  pull.set_min_version(5);  // waits
  pull.set_wait_timeout_ms(60000);
  pull.set_last(true);
  for (uint64_t id : {1, 2}) {
    pull.set_call_id(id);
    ASSERT_TRUE(rw->Write(pull));
  }
  grpc::Status st = rw->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("one call at a time"));
  AwaitNoWaitingCalls();
}

TEST_F(Hostile, WaitingCallsAreCapped) {
  ServerOptions o;
  o.shard.mode = Mode::kSync;
  o.shard.num_workers = 2;
  o.shard.max_waiting_calls = 3;
  Start(o);
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<v1::PullResponse> resps(4);
  std::vector<grpc::Status> status(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    ctxs.push_back(Context(30));
    threads.emplace_back([&, i] {
      v1::PullRequest req;
      req.set_min_version(1);
      req.set_wait_timeout_ms(i < 3 ? 20000 : 1);
      status[i] = stub_->Pull(ctxs[i].get(), req, &resps[i]);
    });
    if (i < 3) {
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      while (server_->shard()->Stats().waiting_calls != i + 1 && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
  }
  threads[3].join();
  EXPECT_EQ(status[3].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status[3].error_message();
  EXPECT_THAT(status[3].error_message(), HasSubstr("max_waiting_calls"));
  for (int i = 0; i < 3; ++i) ctxs[i]->TryCancel();
  for (int i = 0; i < 3; ++i) threads[i].join();
  AwaitNoWaitingCalls();
}

}  // namespace
}  // namespace ps

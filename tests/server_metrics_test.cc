// ps_server's /metrics through a real server and real clients: the values a
// scrape shows after a known sync job match what the job did.
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/testing/wait_until.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/test_cluster.h"
#include "tests/unix_socket_dir.h"

namespace ps {
namespace {

constexpr int kSteps = 5;
constexpr int kElements = 1000;

// "name{labels}" -> value, for every sample line of an exposition.
std::map<std::string, double> Parse(const std::string& text) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space != absl::string_view::npos && absl::SimpleAtod(line.substr(space + 1), &v)) {
      out[std::string(line.substr(0, space))] = v;
    }
  }
  return out;
}

std::string Scrape(const std::string& address) {
  const size_t colon = address.rfind(':');
  httplib::Client client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  httplib::Result res = client.Get("/metrics");
  EXPECT_TRUE(res) << httplib::to_string(res.error());
  if (!res) return "";
  EXPECT_EQ(res->status, 200);
  return res->body;
}

std::string Rpc(const std::string& method, const std::string& code) {
  return "grpc_server_handled_total{grpc_service=\"ps.v1.ParameterServer\",grpc_method=\"" +
         method + "\",grpc_type=\"unary\",grpc_code=\"" + code + "\"}";
}

// One async server with a /metrics port on 127.0.0.1.
absl::StatusOr<LocalServers> AsyncServerWithMetrics() {
  ServerOptions o;
  o.metrics_listen = "127.0.0.1:0";
  o.shard.mode = Mode::kAsync;
  return LocalServers::Start(o, 1);
}

TEST(ServerMetrics, AScrapeShowsWhatASyncJobDid) {
  ServerOptions base;
  base.metrics_listen = "127.0.0.1:0";
  base.shard.num_workers = 2;
  base.shard.mode = Mode::kSync;
  base.shard.optimizer.learning_rate = 0.1f;
  absl::StatusOr<LocalServers> servers = LocalServers::Start(base, 1);
  ASSERT_TRUE(servers.ok()) << servers.status();
  const std::string metrics = servers->servers[0]->metrics_address();
  ASSERT_FALSE(metrics.empty());

  const ModelSpec spec = {{"w", {kElements}}};
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < 2; ++w) {
    ClientOptions o;
    o.servers = servers->addresses;
    o.worker_id = w;
    o.num_workers = 2;
    o.transport = ClientOptions::Transport::kUnary;
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
  }
  TensorList init = {std::vector<float>(kElements, 1.0f)};
  ASSERT_TRUE(clients[0]->Init(spec, &init).ok());
  ASSERT_TRUE(clients[1]->Init(spec, nullptr).ok());
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      TensorList grads = {std::vector<float>(kElements, 0.5f)};
      TensorList weights;
      for (int i = 0; i < kSteps; ++i) EXPECT_TRUE(clients[w]->PushPull(grads, &weights).ok());
    });
  }
  for (std::thread& t : threads) t.join();

  // A worker id out of range: the server answers INVALID_ARGUMENT.
  ClientOptions bad;
  bad.servers = servers->addresses;
  bad.worker_id = 7;
  bad.num_workers = 8;
  bad.connect_timeout = absl::Seconds(5);
  EXPECT_FALSE(PsClient::Connect(bad).ok());

  const std::string text = Scrape(metrics);
  const std::map<std::string, double> m = Parse(text);
  EXPECT_EQ(m.at("ps_server_model_version"), kSteps) << text;
  EXPECT_EQ(m.at("ps_server_pushes_total{outcome=\"applied\"}"), 2 * kSteps);
  EXPECT_EQ(m.at("ps_server_pushes_total{outcome=\"dropped\"}"), 0);
  EXPECT_EQ(m.at("ps_server_workers{state=\"live\"}"), 2);
  EXPECT_EQ(m.at("ps_server_model_elements"), kElements);
  EXPECT_EQ(m.at("ps_server_sync_barrier_wait_seconds_count"), kSteps);
  EXPECT_EQ(m.at("ps_server_push_staleness_count"), 2 * kSteps);
  EXPECT_EQ(m.at(Rpc("PushPull", "OK")), 2 * kSteps);
  EXPECT_EQ(m.at(Rpc("Register", "InvalidArgument")), 1);
  EXPECT_EQ(m.at("grpc_server_handling_seconds_count{grpc_service=\"ps.v1.ParameterServer\","
                 "grpc_method=\"PushPull\",grpc_type=\"unary\"}"),
            2 * kSteps);
  // Every PushPull carried the gradient in and the weights out, and each
  // Init pulled the weights once.
  EXPECT_EQ(m.at("ps_server_received_bytes_total"), 2.0 * kSteps * kElements * 4);
  EXPECT_EQ(m.at("ps_server_sent_bytes_total"), m.at("ps_server_pulls_total") * kElements * 4);
  EXPECT_NE(text.find("ps_build_info{version=\""), std::string::npos);
  EXPECT_NE(text.find("mode=\"sync\""), std::string::npos);
  // No checkpoint directory: no checkpoint families; no tables: no table families.
  EXPECT_EQ(text.find("ps_server_last_checkpoint_timestamp_seconds"), std::string::npos);
  EXPECT_EQ(text.find("ps_server_embedding_rows"), std::string::npos);
}

TEST(ServerMetrics, EmbeddingTablesShowTheirRowsAndMemory) {
  absl::StatusOr<LocalServers> servers = AsyncServerWithMetrics();
  ASSERT_TRUE(servers.ok()) << servers.status();
  ClientOptions o;
  o.servers = servers->addresses;
  o.transport = ClientOptions::Transport::kUnary;
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->DeclareTables({{"user", 8, 1, 0.01f}, {"item", 4, 2, 0.01f}}).ok());
  TensorList init = {std::vector<float>(3, 0.0f)};
  ASSERT_TRUE((*c)->Init({{"w", {3}}}, &init).ok());
  const std::vector<uint64_t> ids = {1, 2, 3, 2, 10, 11, 12, 13, 14, 15, 16};  // 10 distinct
  std::vector<float> rows(ids.size() * 8);
  ASSERT_TRUE((*c)->PullRows("user", ids, absl::MakeSpan(rows)).ok());
  const std::map<std::string, double> m = Parse(Scrape(servers->servers[0]->metrics_address()));
  EXPECT_EQ(m.at("ps_server_embedding_rows{table=\"user\"}"), 10);
  EXPECT_EQ(m.at("ps_server_embedding_rows{table=\"item\"}"), 0);
  // At least the 10 rows' values and adagrad state.
  EXPECT_GE(m.at("ps_server_embedding_memory_bytes{table=\"user\"}"), 10 * 8 * 2 * 4);
  EXPECT_EQ(m.at(Rpc("PullRows", "OK")), 1);
}

// The stream transport's streams carry every step, so they are not
// intercepted (server/rpc_metrics.h): each records itself when it ends.
TEST(ServerMetrics, AStreamIsRecordedWhenItEnds) {
  absl::StatusOr<LocalServers> servers = AsyncServerWithMetrics();
  ASSERT_TRUE(servers.ok()) << servers.status();
  const std::string metrics = servers->servers[0]->metrics_address();
  const std::string stream_ok =
      "grpc_server_handled_total{grpc_service=\"ps.v1.ParameterServer\",grpc_method=\"Stream\","
      "grpc_type=\"bidi_stream\",grpc_code=\"OK\"}";
  const std::string stream_count =
      "grpc_server_handling_seconds_count{grpc_service=\"ps.v1.ParameterServer\","
      "grpc_method=\"Stream\",grpc_type=\"bidi_stream\"}";
  {
    ClientOptions o;
    o.servers = servers->addresses;
    o.transport = ClientOptions::Transport::kStream;
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    TensorList init = {std::vector<float>(kElements, 1.0f)};
    ASSERT_TRUE((*c)->Init({{"w", {kElements}}}, &init).ok());
    TensorList grads = {std::vector<float>(kElements, 0.5f)};
    TensorList weights;
    for (int i = 0; i < kSteps; ++i) ASSERT_TRUE((*c)->PushPull(grads, &weights).ok());
    // Open: not recorded yet; the steps went over it, not as unary calls.
    const std::map<std::string, double> m = Parse(Scrape(metrics));
    EXPECT_EQ(m.count(stream_ok) ? m.at(stream_ok) : 0, 0);
    EXPECT_EQ(m.at(Rpc("PushPull", "OK")), 0);
    EXPECT_EQ(m.at("ps_server_model_version"), kSteps);
  }
  // The client closed its stream on the way out (the server finished it
  // OK); the server's end of it is recorded right after.
  std::map<std::string, double> m;
  EXPECT_EQ(WaitUntil(
                [&] {
                  m = Parse(Scrape(metrics));
                  return m.count(stream_ok) > 0;
                },
                absl::Seconds(10), "the stream's end in the metrics"),
            absl::OkStatus());
  EXPECT_EQ(m.count(stream_ok) ? m.at(stream_ok) : 0, 1);
  EXPECT_EQ(m.count(stream_count) ? m.at(stream_count) : 0, 1);
}

// Calls the port's AuthProcessor refuses never reach a handler; they are
// counted all the same, under their method and code (bearer tokens over a
// unix socket: no certificates needed).
TEST(ServerMetrics, RefusedCallsAreCounted) {
  UnixSocketDir dir;
  const std::string tokens = dir.folder() + "/tokens.txt";
  std::ofstream(tokens) << "worker-0 w0w0w0w0w0w0w0w0w0w0w0w0\nreader rdrdrdrdrdrdrdrdrdrdrdrd\n";
  ServerOptions o;
  o.listen = dir.Address("s.sock");
  o.metrics_listen = "127.0.0.1:0";
  o.shard.num_workers = 1;
  o.security.auth_token_file = tokens;
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto connect = [&](const std::string& token) {
    ClientOptions c;
    c.servers = {(*server)->address()};
    c.num_workers = 1;
    c.transport = ClientOptions::Transport::kUnary;
    c.connect_timeout = absl::Seconds(10);
    c.security.auth_token_file = dir.folder() + "/client-" + token.substr(0, 4) + ".token";
    std::ofstream(c.security.auth_token_file) << token << "\n";
    return PsClient::Connect(c);
  };
  absl::StatusOr<std::unique_ptr<PsClient>> worker = connect("w0w0w0w0w0w0w0w0w0w0w0w0");
  ASSERT_TRUE(worker.ok()) << worker.status();
  const ModelSpec spec = {{"w", {4}}};
  const TensorList init = {{1, 2, 3, 4}};
  ASSERT_TRUE((*worker)->Init(spec, &init).ok());
  // A reader may pull, but not register as a worker; a wrong token is no one.
  EXPECT_EQ(connect("rdrdrdrdrdrdrdrdrdrdrdrd").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(connect("xxxxxxxxxxxxxxxxxxxxxxxx").status().code(),
            absl::StatusCode::kUnauthenticated);

  const std::map<std::string, double> m = Parse(Scrape((*server)->metrics_address()));
  EXPECT_EQ(m.at(Rpc("Register", "OK")), 1);
  EXPECT_EQ(m.at(Rpc("Register", "PermissionDenied")), 1);
  EXPECT_EQ(m.at(Rpc("Register", "Unauthenticated")), 1);
  // Not timed: only the call that ran is in the histogram.
  EXPECT_EQ(m.at("grpc_server_handling_seconds_count{grpc_service=\"ps.v1.ParameterServer\","
                 "grpc_method=\"Register\",grpc_type=\"unary\"}"),
            1);
}

TEST(ServerMetrics, NoPortWithoutTheOption) {
  absl::StatusOr<LocalServers> servers = LocalServers::Start(ServerOptions(), 1);
  ASSERT_TRUE(servers.ok()) << servers.status();
  EXPECT_TRUE(servers->servers[0]->metrics_address().empty());
}

TEST(ServerMetrics, ABusyMetricsPortFailsTheStart) {
  ServerOptions base;
  base.metrics_listen = "127.0.0.1:0";
  absl::StatusOr<LocalServers> first = LocalServers::Start(base, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  base.metrics_listen = first->servers[0]->metrics_address();
  absl::StatusOr<LocalServers> second = LocalServers::Start(base, 1);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

}  // namespace
}  // namespace ps

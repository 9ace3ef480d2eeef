#include "rpc/metrics_endpoint.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace ps {
namespace {

std::shared_ptr<prometheus::Registry> OneCounter(double value) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("test_events_total")
      .Help("Events.")
      .Register(*registry)
      .Add({})
      .Increment(value);
  return registry;
}

MetricsEndpointOptions Loopback() {
  MetricsEndpointOptions options;
  options.listen = "127.0.0.1:0";
  return options;
}

TEST(MetricsEndpoint, ServesTheTextFormatOnLoopback) {
  auto registry = OneCounter(3);
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> ep = MetricsEndpoint::Start(Loopback(), {registry});
  ASSERT_TRUE(ep.ok()) << ep.status();
  ASSERT_GT((*ep)->port(), 0);
  httplib::Client client("127.0.0.1", (*ep)->port());
  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  EXPECT_NE(res->body.find("# TYPE test_events_total counter"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("test_events_total 3"), std::string::npos) << res->body;

  res = client.Get("/other");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST(MetricsEndpoint, SkipsCollectablesThatAreGone) {
  auto kept = OneCounter(1);
  std::weak_ptr<prometheus::Collectable> gone;
  {
    auto temp = OneCounter(2);
    gone = temp;
  }
  EXPECT_EQ(SerializeMetrics({kept, gone}), SerializeMetrics({kept}));
}

TEST(MetricsEndpoint, RefusesPlaintextOffLoopbackAndBadAddresses) {
  MetricsEndpointOptions options;
  options.listen = "0.0.0.0:0";
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> ep = MetricsEndpoint::Start(options, {});
  ASSERT_FALSE(ep.ok());
  EXPECT_EQ(ep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ep.status().message().find("--metrics_listen"), std::string::npos);

  for (const char* bad : {"nonsense", "127.0.0.1:99999", ":80", "127.0.0.1:x"}) {
    options.listen = bad;
    ep = MetricsEndpoint::Start(options, {});
    EXPECT_EQ(ep.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MetricsEndpoint, BusyPortIsUnavailable) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> first = MetricsEndpoint::Start(Loopback(), {});
  ASSERT_TRUE(first.ok()) << first.status();
  MetricsEndpointOptions options;
  options.listen = (*first)->address();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> second = MetricsEndpoint::Start(options, {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

// Mutual TLS with the certificates of deploy/make_certs.sh: the reader and
// admin may scrape, a worker is forbidden, no certificate gets no answer,
// and a reader's bearer token works when the token table is given.
class MetricsEndpointTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(absl::StrCat(std::getenv("TEST_TMPDIR"), "/certs"));
    const std::string cmd = absl::StrCat("deploy/make_certs.sh ", *dir_,
                                         " --servers=1 --workers=1 >/dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static std::string File(const std::string& name) { return absl::StrCat(*dir_, "/", name); }

  std::unique_ptr<MetricsEndpoint> StartTls(bool tokens) {
    MetricsEndpointOptions options = Loopback();
    options.security.tls_cert = File("server-0.pem");
    options.security.tls_key = File("server-0.key");
    options.security.tls_ca = File("ca.pem");
    if (tokens) options.security.auth_token_file = File("tokens.txt");
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> ep =
        MetricsEndpoint::Start(options, {registry_});
    EXPECT_TRUE(ep.ok()) << ep.status();
    return ep.ok() ? std::move(*ep) : nullptr;
  }

  // The status of GET /metrics as `who` (a certificate name, or "" for
  // none), -1 when the TLS handshake fails.
  int Scrape(const MetricsEndpoint& ep, const std::string& who, const std::string& token = "") {
    std::unique_ptr<httplib::SSLClient> client =
        who.empty() ? std::make_unique<httplib::SSLClient>("localhost", ep.port())
                    : std::make_unique<httplib::SSLClient>("localhost", ep.port(),
                                                           File(who + ".pem"),
                                                           File(who + ".key"));
    client->set_ca_cert_path(File("ca.pem").c_str());
    client->enable_server_certificate_verification(true);
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    httplib::Result res = client->Get("/metrics", headers);
    if (!res) return -1;
    if (res->status == 200) {
      EXPECT_NE(res->body.find("test_events_total 1"), std::string::npos);
    }
    return res->status;
  }

  static std::string Token(const std::string& who) {
    std::FILE* f = std::fopen(File(who + ".token").c_str(), "r");
    char line[256] = {0};
    if (f != nullptr) {
      if (std::fgets(line, sizeof(line), f) == nullptr) line[0] = 0;
      std::fclose(f);
    }
    std::string s(line);
    const size_t space = s.find(' ');
    s = s.substr(space + 1);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }

  static std::string* dir_;
  std::shared_ptr<prometheus::Registry> registry_ = OneCounter(1);
};
std::string* MetricsEndpointTls::dir_ = nullptr;

TEST_F(MetricsEndpointTls, ReaderAndAdminMayScrapeWorkersMayNot) {
  std::unique_ptr<MetricsEndpoint> ep = StartTls(/*tokens=*/false);
  ASSERT_NE(ep, nullptr);
  EXPECT_TRUE(ep->tls());
  EXPECT_EQ(Scrape(*ep, "reader"), 200);
  EXPECT_EQ(Scrape(*ep, "admin"), 200);
  EXPECT_EQ(Scrape(*ep, "worker-0"), 403);
  EXPECT_EQ(Scrape(*ep, ""), -1);  // the handshake requires a certificate
}

TEST_F(MetricsEndpointTls, BearerTokensOfReadersWork) {
  std::unique_ptr<MetricsEndpoint> ep = StartTls(/*tokens=*/true);
  ASSERT_NE(ep, nullptr);
  EXPECT_EQ(Scrape(*ep, "", Token("reader")), 200);
  EXPECT_EQ(Scrape(*ep, "", Token("worker-0")), 403);
  EXPECT_EQ(Scrape(*ep, "", "not-a-token-of-anyone-at-all"), 401);
  EXPECT_EQ(Scrape(*ep, ""), 401);
  EXPECT_EQ(Scrape(*ep, "reader"), 200);
}

TEST_F(MetricsEndpointTls, NeedsAllThreeFiles) {
  MetricsEndpointOptions options = Loopback();
  options.security.tls_cert = File("server-0.pem");
  options.security.tls_key = File("server-0.key");
  EXPECT_EQ(MetricsEndpoint::Start(options, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.security.tls_ca = File("ca.pem");
  options.security.tls_key = File("reader.key");
  EXPECT_EQ(MetricsEndpoint::Start(options, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps

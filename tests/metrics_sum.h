// SumMetric: one /metrics sample summed over in-process servers, for tests
// that check what the servers count.
#ifndef PS_TESTS_METRICS_SUM_H_
#define PS_TESTS_METRICS_SUM_H_

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tools/process/local_servers.h"

namespace ps {

// The sum over `servers` (each started with a metrics_listen) of the value
// of `sample`, a metric's name with its labels as /metrics writes them
// ("grpc_server_handled_total{grpc_service=...}"); 0 where a server has
// none. A server whose /metrics does not answer fails the test.
inline double SumMetric(const LocalServers& servers, const std::string& sample) {
  double total = 0;
  for (const auto& server : servers.servers) {
    const std::string address = server->metrics_address();
    const size_t colon = address.rfind(':');
    httplib::Client client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
    httplib::Result res = client.Get("/metrics");
    EXPECT_TRUE(res && res->status == 200) << sample;
    if (!res) continue;
    for (absl::string_view line : absl::StrSplit(res->body, '\n')) {
      double v = 0;
      if (absl::ConsumePrefix(&line, sample + " ") && absl::SimpleAtod(line, &v)) total += v;
    }
  }
  return total;
}

}  // namespace ps

#endif  // PS_TESTS_METRICS_SUM_H_

#include "tools/bench/metrics_scraper.h"

#include <utility>

#include "common/status_macros.h"
#include "httplib.h"

namespace ps {

MetricsScraper::MetricsScraper(std::vector<std::string> addresses, absl::Duration every)
    : addresses_(std::move(addresses)), every_(every), thread_([this] { Run(); }) {}

MetricsScraper::~MetricsScraper() {
  stop_.Notify();
  thread_.join();
}

void MetricsScraper::Run() {
  do {
    for (const std::string& address : addresses_) {
      httplib::Client client("http://" + address);
      client.set_connection_timeout(5);
      client.set_read_timeout(5);
      httplib::Result r = client.Get("/metrics");
      if (r && r->status == 200) {
        ++scrapes_;
      } else {
        ++failures_;
      }
    }
  } while (!stop_.WaitForNotificationWithTimeout(every_));
}

absl::StatusOr<std::unique_ptr<BenchScrape>> BenchScrape::Start(
    const std::vector<std::string>& server_addresses, int workers, absl::Duration every) {
  std::unique_ptr<BenchScrape> s(new BenchScrape());
  std::vector<std::string> addresses = server_addresses;
  for (int w = 0; w < workers; ++w) {
    s->metrics_.push_back(std::make_unique<WorkerMetrics>(w));
    MetricsEndpointOptions o;
    o.listen = "127.0.0.1:0";
    ASSIGN_OR_RETURN(std::unique_ptr<MetricsEndpoint> e,
                     MetricsEndpoint::Start(o, {s->metrics_.back()->registry()}));
    addresses.push_back(e->address());
    s->endpoints_.push_back(std::move(e));
  }
  s->scraper_ = std::make_unique<MetricsScraper>(std::move(addresses), every);
  return s;
}

}  // namespace ps

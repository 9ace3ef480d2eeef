#include "tools/metrics_scraper.h"

#include <utility>

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

}  // namespace ps

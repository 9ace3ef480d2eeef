// MetricsScraper: a thread that GETs http://ADDRESS/metrics of each address
// every `every` until destroyed, as a Prometheus server would; for ps_bench
// train's --scrape_every row, which measures what being scraped costs.
// Plaintext only. Thread-safe; the destructor stops the thread (waiting
// for the scrape in progress, at most one timeout of 5 s per address).
#ifndef PS_TOOLS_METRICS_SCRAPER_H_
#define PS_TOOLS_METRICS_SCRAPER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace ps {

class MetricsScraper {
 public:
  // `addresses`: HOST:PORT of each /metrics port. Scrapes at once, then
  // every `every`.
  MetricsScraper(std::vector<std::string> addresses, absl::Duration every);
  ~MetricsScraper();
  MetricsScraper(const MetricsScraper&) = delete;
  MetricsScraper& operator=(const MetricsScraper&) = delete;

  // Scrapes answered 200, and those that were not.
  int64_t scrapes() const { return scrapes_.load(); }
  int64_t failures() const { return failures_.load(); }

 private:
  void Run();

  const std::vector<std::string> addresses_;
  const absl::Duration every_;
  absl::Notification stop_;
  std::atomic<int64_t> scrapes_{0};
  std::atomic<int64_t> failures_{0};
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace ps

#endif  // PS_TOOLS_METRICS_SCRAPER_H_

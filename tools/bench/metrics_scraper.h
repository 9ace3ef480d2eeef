// For ps_bench train's --scrape_every row, which measures what /metrics
// costs a training run:
//   - MetricsScraper: a thread that GETs http://ADDRESS/metrics of each
//     address every `every` until destroyed, as a Prometheus server would
//     (plaintext only);
//   - BenchScrape: a WorkerMetrics and a /metrics port for each in-process
//     worker, and a MetricsScraper of those and the servers' ports.
// Thread-safe. The destructors stop the scraping thread (waiting for the
// scrape in progress: at most 5 s per address) and the ports.
#ifndef PS_TOOLS_BENCH_METRICS_SCRAPER_H_
#define PS_TOOLS_BENCH_METRICS_SCRAPER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "rpc/metrics_endpoint.h"
#include "worker/worker_metrics.h"

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

class BenchScrape {
 public:
  // Opens a plaintext /metrics port on 127.0.0.1 for each of `workers`
  // workers, then scrapes those and `server_addresses` every `every`.
  static absl::StatusOr<std::unique_ptr<BenchScrape>> Start(
      const std::vector<std::string>& server_addresses, int workers, absl::Duration every);

  // What worker w records into (ReporterOptions::external_metrics); lives as long as
  // this object.
  WorkerMetrics* worker(int w) { return metrics_[w].get(); }
  const MetricsScraper& scraper() const { return *scraper_; }

 private:
  BenchScrape() = default;
  std::vector<std::unique_ptr<WorkerMetrics>> metrics_;
  std::vector<std::unique_ptr<MetricsEndpoint>> endpoints_;
  std::unique_ptr<MetricsScraper> scraper_;  // last: stops first
};

}  // namespace ps

#endif  // PS_TOOLS_BENCH_METRICS_SCRAPER_H_

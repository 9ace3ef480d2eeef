#include "tools/bench/bench_common.h"

#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/flag_lists.h"

namespace ps {
namespace {

std::string HumanBytes(int64_t b) {
  if (b >= (1 << 20)) return absl::StrCat(b >> 20, " MB");
  if (b >= (1 << 10)) return absl::StrCat(b >> 10, " KB");
  return absl::StrCat(b, " B");
}

}  // namespace

absl::Status CheckBenchTls(const BenchTls& tls) {
  if (tls.enabled && tls.dir.empty()) {
    return absl::InvalidArgumentError(
        "--tls needs --tls_dir=DIR, made by deploy/make_certs.sh DIR --servers=1 --workers=W");
  }
  return absl::OkStatus();
}

SecurityOptions BenchSecurity(const BenchTls& tls, bool use, int worker) {
  SecurityOptions o;
  if (!use || !tls.enabled) return o;
  const std::string name = worker < 0 ? "server-0" : absl::StrCat("worker-", worker);
  o.tls_ca = absl::StrCat(tls.dir, "/ca.pem");
  o.tls_cert = absl::StrCat(tls.dir, "/", name, ".pem");
  o.tls_key = absl::StrCat(tls.dir, "/", name, ".key");
  return o;
}

double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

double Percentile(std::vector<absl::Duration> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return absl::ToDoubleMicroseconds(v[i]);
}

absl::StatusOr<std::vector<int64_t>> ParseNonEmptyList(const std::string& text, const char* flag) {
  absl::StatusOr<std::vector<int64_t>> out = ParsePositiveList(flag, text);
  if (out.ok() && out->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return out;
}

std::string Json(const std::string& section, const std::vector<Row>& rows) {
  std::vector<std::string> objs;
  for (const Row& r : rows) {
    std::string o = absl::StrFormat(
        "{\"name\": \"%s\", \"size\": %d, \"value\": %.6g, \"baseline\": %.6g, \"ratio\": %.4f",
        r.name, r.bytes, r.value, r.baseline, r.baseline > 0 ? r.value / r.baseline : 0);
    if (r.p50_us >= 0) {
      absl::StrAppendFormat(&o, ", \"p50_us\": %.1f, \"p99_us\": %.1f, \"baseline_p50_us\": %.1f",
                            r.p50_us, r.p99_us, r.baseline_p50_us);
    }
    if (r.cpu_us_per_mb >= 0) {
      absl::StrAppendFormat(&o, ", \"cpu_us_per_mb\": %.1f, \"baseline_cpu_us_per_mb\": %.1f",
                            r.cpu_us_per_mb, r.baseline_cpu_us_per_mb);
    }
    if (r.server_cpu_us_per_mb >= 0) {
      absl::StrAppendFormat(&o,
                            ", \"server_cpu_us_per_mb\": %.1f, "
                            "\"baseline_server_cpu_us_per_mb\": %.1f",
                            r.server_cpu_us_per_mb, r.baseline_server_cpu_us_per_mb);
    }
    if (r.accuracy >= 0) absl::StrAppendFormat(&o, ", \"test_accuracy\": %.4f", r.accuracy);
    if (r.ratio_se >= 0) absl::StrAppendFormat(&o, ", \"ratio_se\": %.4f", r.ratio_se);
    if (r.rows_per_s >= 0) {
      absl::StrAppendFormat(&o, ", \"ids\": %d, \"rows_per_s\": %.6g, \"unique_fraction\": %.4f",
                            r.ids, r.rows_per_s, r.unique_fraction);
    }
    if (r.pause_ms >= 0) absl::StrAppendFormat(&o, ", \"pause_ms\": %.1f", r.pause_ms);
    objs.push_back(o + "}");
  }
  return absl::StrCat("{\"mode\": \"", section, "\", \"rows\": [", absl::StrJoin(objs, ", "), "]}");
}

void PrintTable(const std::string& section, const std::vector<Row>& rows) {
  if (section == "transport") {
    // Rows against raw TCP, then (--tls) TLS rows against plaintext gRPC.
    for (bool tls : {false, true}) {
      std::vector<Row> part;
      for (const Row& r : rows) {
        if (absl::EndsWith(r.name, "+tls") == tls) part.push_back(r);
      }
      if (part.empty()) continue;
      if (tls && part[0].server_cpu_us_per_mb >= 0) {
        // --server_process: each side's CPU per MB, TLS and plaintext.
        std::printf("\nmutual TLS against plaintext gRPC, per side (ps_server processes):\n");
        std::printf("%-20s %8s %9s %9s %7s %10s %10s %7s %10s %10s %7s\n", "op/transport",
                    "payload", "TLS GB/s", "plain", "ratio", "client TLS", "plain", "ratio",
                    "server TLS", "plain", "ratio");
        std::printf("%-48s %28s %28s\n", "", "(cpu us/MB)", "(cpu us/MB)");
        for (const Row& r : part) {
          std::printf("%-20s %8s %9.3f %9.3f %7.2f %10.0f %10.0f %7.2f %10.0f %10.0f %7.2f\n",
                      r.name.c_str(), HumanBytes(r.bytes).c_str(), r.value, r.baseline,
                      r.value / r.baseline, r.cpu_us_per_mb, r.baseline_cpu_us_per_mb,
                      r.baseline_cpu_us_per_mb / r.cpu_us_per_mb, r.server_cpu_us_per_mb,
                      r.baseline_server_cpu_us_per_mb,
                      r.baseline_server_cpu_us_per_mb / r.server_cpu_us_per_mb);
        }
        continue;
      }
      const char* base = tls ? "plain" : "tcp";
      if (tls) std::printf("\nmutual TLS against plaintext gRPC (same run):\n");
      std::printf("%-20s %8s %10s %7s %7s %10s %10s %7s %9s %9s %9s\n", "op/transport", "payload",
                  "GB/s", base, "ratio", "p50 us", "p99 us", base, "cpu us/MB",
                  absl::StrCat(base, " cpu").c_str(), "cpu ratio");
      for (const Row& r : part) {
        std::printf("%-20s %8s %10.3f %7.3f %7.2f %10.1f %10.1f %7.1f %9.0f %9.0f %9.2f\n",
                    r.name.c_str(), HumanBytes(r.bytes).c_str(), r.value, r.baseline,
                    r.value / r.baseline, r.p50_us, r.p99_us, r.baseline_p50_us, r.cpu_us_per_mb,
                    r.baseline_cpu_us_per_mb, r.baseline_cpu_us_per_mb / r.cpu_us_per_mb);
      }
    }
  } else if (section == "sparse" && !rows.empty() && rows[0].unique_fraction < 0) {
    // The cold workload: M rows/s against ps-lite's (0: not measured).
    std::printf("%-26s %7s %10s %10s %7s %9s %9s\n", "op dist dim socket", "ids", "Mrows/s",
                "ps-lite", "ratio", "p50 us", "p99 us");
    for (const Row& r : rows) {
      const std::string base = r.baseline > 0 ? absl::StrFormat("%.2f", r.baseline) : "-";
      const std::string ratio =
          r.baseline > 0 ? absl::StrFormat("%.2f", r.value / r.baseline) : "-";
      std::printf("%-26s %7lld %10.2f %10s %7s %9.0f %9.0f\n", r.name.c_str(),
                  static_cast<long long>(r.ids), r.value, base.c_str(), ratio.c_str(), r.p50_us,
                  r.p99_us);
    }
  } else if (section == "sparse") {
    std::printf("%-22s %7s %8s %6s %11s %9s %9s %7s %9s %9s\n", "op dist dim", "ids", "values",
                "uniq", "rows/s", "GB/s", "dense", "ratio", "p50 us", "dense p50");
    for (const Row& r : rows) {
      std::printf("%-22s %7lld %8s %6.2f %11.0f %9.3f %9.3f %7.2f %9.0f %9.0f\n", r.name.c_str(),
                  static_cast<long long>(r.ids), HumanBytes(r.bytes).c_str(), r.unique_fraction,
                  r.rows_per_s, r.value, r.baseline, r.value / r.baseline, r.p50_us,
                  r.baseline_p50_us);
    }
  } else if (section == "elastic") {
    std::printf("%-16s %10s %10s %7s %9s\n", "event", "samples/s", "steady", "ratio", "pause ms");
    for (const Row& r : rows) {
      std::printf("%-16s %10.0f %10.0f %7.2f %9.0f\n", r.name.c_str(), r.value, r.baseline,
                  r.value / r.baseline, r.pause_ms);
    }
  } else if (section == "apply") {
    std::printf("%-16s %12s %10s %10s %7s\n", "apply", "elements", "GB/s", "axpy GB/s", "ratio");
    for (const Row& r : rows) {
      std::printf("%-16s %12lld %10.2f %10.2f %7.2f\n", r.name.c_str(),
                  static_cast<long long>(r.bytes), r.value, r.baseline, r.value / r.baseline);
    }
  } else {
    std::printf("%-46s %10s %7s %9s\n", "configuration", "samples/s", "ratio", "accuracy");
    for (const Row& r : rows) {
      std::printf(
          "%-46s %10.0f %7.2f %9.4f%s\n", r.name.c_str(), r.value, r.value / r.baseline, r.accuracy,
          r.ratio_se >= 0
              ? absl::StrFormat("  (rounds' ratios: standard error %.4f)", r.ratio_se).c_str()
              : "");
    }
  }
}

absl::StatusOr<TempDir> TempDir::Make(const std::string& prefix) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, ".XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make a temporary folder ", tmpl));
  }
  TempDir d;
  d.path = tmpl;
  return d;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path.empty()) std::filesystem::remove_all(path, ignored);
}

}  // namespace ps

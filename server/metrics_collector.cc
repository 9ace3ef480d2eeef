#include "server/metrics_collector.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/mode.h"
#include "common/version.h"

namespace ps {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

constexpr double kMicros = 1e-6;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

ClientMetric Value(MetricType type, double v, Labels labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) m.counter.value = v;
  else m.gauge.value = v;
  return m;
}

// A family of one unlabeled value.
MetricFamily Single(const char* name, const char* help, MetricType type, double v) {
  MetricFamily f = Family(name, help, type);
  f.metric.push_back(Value(type, v));
  return f;
}

MetricFamily SingleHistogram(const char* name, const char* help, const Histogram::Snapshot& h,
                             double scale) {
  MetricFamily f = Family(name, help, MetricType::Histogram);
  f.metric.push_back(HistogramMetric(h, scale));
  return f;
}

// The double that prints like `f` does (0.1f as 0.1, not 0.10000000149).
double ShortestDouble(float f) {
  double d = f;
  return absl::SimpleAtod(absl::StrCat(f), &d) ? d : static_cast<double>(f);
}

}  // namespace

ClientMetric HistogramMetric(const Histogram::Snapshot& h, double scale, Labels labels) {
  ClientMetric m;
  m.label = std::move(labels);
  m.histogram.sample_count = static_cast<uint64_t>(h.count);
  m.histogram.sample_sum = static_cast<double>(h.sum) * scale;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += static_cast<uint64_t>(h.counts[i]);
    ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < h.bounds.size() ? static_cast<double>(h.bounds[i]) * scale
                                        : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  return m;
}

std::vector<MetricFamily> ServerCollector::Collect() const {
  const ShardStats st = shard_->Stats();
  const ShardMetrics& sm = shard_->metrics();
  std::vector<MetricFamily> out;

  MetricFamily info = Family("ps_build_info", "The server's version, mode and shard; always 1.",
                             MetricType::Gauge);
  info.metric.push_back(Value(MetricType::Gauge, 1,
                              {{"version", Version()},
                               {"mode", ModeName(st.mode)},
                               {"shard", absl::StrCat(st.shard_id)},
                               {"num_shards", absl::StrCat(st.num_shards)}}));
  out.push_back(std::move(info));

  // RPCs, in the gRPC ecosystem's names.
  MetricFamily handled = Family("grpc_server_handled_total",
                                "RPCs completed on the server, by method and status code.",
                                MetricType::Counter);
  MetricFamily handling = Family("grpc_server_handling_seconds",
                                 "Time from an RPC's start to its status, by method.",
                                 MetricType::Histogram);
  const std::vector<RpcMetrics::Method>& methods = rpc_->methods();
  for (int i = 0; i < static_cast<int>(methods.size()); ++i) {
    const RpcMetrics::Method& m = methods[i];
    const Labels labels = {{"grpc_service", m.service},
                           {"grpc_method", m.name},
                           {"grpc_type", m.type}};
    const bool ours = absl::string_view(m.service) == "ps.v1.ParameterServer";
    bool any = false;
    for (int code = 0; code < RpcMetrics::kNumCodes; ++code) {
      const int64_t n = rpc_->handled(i, code);
      // OK exists from the start for our own methods, so rates have a series.
      if (n == 0 && !(ours && code == 0)) continue;
      any = any || n > 0;
      Labels with_code = labels;
      with_code.push_back(
          {"grpc_code", GrpcCodeName(code)});
      handled.metric.push_back(Value(MetricType::Counter, static_cast<double>(n), with_code));
    }
    if (any || ours) handling.metric.push_back(HistogramMetric(rpc_->handling(i), kMicros, labels));
  }
  out.push_back(std::move(handled));
  out.push_back(std::move(handling));
  out.push_back(Single("ps_server_received_bytes_total",
                       "Tensor bytes received: gradients, as they travelled (float32 or bf16).",
                       MetricType::Counter, static_cast<double>(sm.bytes_received.Get())));
  out.push_back(Single("ps_server_sent_bytes_total",
                       "Tensor bytes sent: weights, in the dtype each pull asked for.",
                       MetricType::Counter, static_cast<double>(sm.bytes_sent.Get())));

  // The model and its updates.
  out.push_back(Single("ps_server_model_version", "The shard's model version (updates applied).",
                       MetricType::Gauge, static_cast<double>(st.version)));
  out.push_back(Single("ps_server_model_elements", "Parameters (floats) this shard holds.",
                       MetricType::Gauge, static_cast<double>(st.num_elements)));
  out.push_back(Single("ps_server_learning_rate", "The optimizer's current learning rate.",
                       MetricType::Gauge, ShortestDouble(st.learning_rate)));
  MetricFamily pushes = Family("ps_server_pushes_total",
                               "Gradient pushes by outcome: applied (accepted into an update), "
                               "duplicate (a retry, not applied again), dropped (for a sync step "
                               "that closed without it).",
                               MetricType::Counter);
  pushes.metric.push_back(Value(MetricType::Counter, static_cast<double>(st.pushes_accepted),
                                {{"outcome", "applied"}}));
  pushes.metric.push_back(Value(MetricType::Counter, static_cast<double>(st.pushes_duplicate),
                                {{"outcome", "duplicate"}}));
  pushes.metric.push_back(Value(MetricType::Counter, static_cast<double>(st.pushes_dropped),
                                {{"outcome", "dropped"}}));
  out.push_back(std::move(pushes));
  out.push_back(Single("ps_server_pulls_total", "Pulls answered with weights.",
                       MetricType::Counter, static_cast<double>(st.pulls_served)));
  out.push_back(SingleHistogram(
      "ps_server_push_staleness",
      "Staleness of applied pushes in versions: the shard's version minus the one the gradient "
      "was computed on.",
      sm.staleness.Read(), 1.0));
  out.push_back(Single("ps_server_max_step_staleness",
                       "SSP: the largest staleness of an applied push, in steps.",
                       MetricType::Gauge, static_cast<double>(st.max_step_staleness)));
  out.push_back(Single("ps_server_pulls_held_total",
                       "SSP: pulls held for the slowest worker's step.", MetricType::Counter,
                       static_cast<double>(st.pulls_held)));

  // Time.
  out.push_back(SingleHistogram(
      "ps_server_sync_barrier_wait_seconds",
      "Sync: per step, from its first gradient to its update (waiting for the other workers).",
      sm.barrier_wait.Read(), kMicros));
  out.push_back(SingleHistogram("ps_server_push_duration_seconds",
                                "Shard::Push, from the call to its version.",
                                sm.push_latency.Read(), kMicros));
  out.push_back(SingleHistogram(
      "ps_server_pull_duration_seconds",
      "Shard::Pull, from the call to its weights (including waits for a version).",
      sm.pull_latency.Read(), kMicros));

  // Workers and calls.
  MetricFamily workers = Family(
      "ps_server_workers",
      "Workers seen and not dropped (live; with leases, those holding one) and dropped for "
      "silence.",
      MetricType::Gauge);
  // Without leases or a registry no worker is ever dropped: every one seen
  // is live.
  const size_t live = st.worker_timeout > absl::ZeroDuration() || st.worker_registry
                          ? st.live_workers.size()
                          : st.workers_seen.size();
  workers.metric.push_back(Value(MetricType::Gauge, static_cast<double>(live),
                                 {{"state", "live"}}));
  workers.metric.push_back(Value(MetricType::Gauge,
                                 static_cast<double>(st.dropped_workers.size()),
                                 {{"state", "dropped"}}));
  out.push_back(std::move(workers));
  if (coordinator_reachable_) {
    out.push_back(Single("ps_server_coordinator_reachable",
                         "1 while the server's registration and its watch on the workers reach "
                         "etcd (--coordinator), 0 while they do not: training goes on with the "
                         "last membership, and changes wait.",
                         MetricType::Gauge, coordinator_reachable_() ? 1 : 0));
  }
  out.push_back(Single("ps_server_workers_dropped_total",
                       "Workers dropped after --worker_timeout without a request.",
                       MetricType::Counter, static_cast<double>(sm.workers_dropped.Get())));
  // Embedding tables.
  MetricFamily rows = Family("ps_server_embedding_rows",
                             "Rows of each embedding table this shard holds.", MetricType::Gauge);
  MetricFamily memory = Family(
      "ps_server_embedding_memory_bytes",
      "Heap bytes of each embedding table's rows (values, optimizer state, id, LRU links) and "
      "index on this shard.",
      MetricType::Gauge);
  // With --table_memory_budget: the on-disk tier; with --table_admission:
  // the ids waiting for a row.
  MetricFamily disk_rows =
      Family("ps_server_embedding_disk_rows",
             "Rows of each embedding table in its on-disk tier on this shard (RocksDB's "
             "estimate; rows in memory may have an older copy there).",
             MetricType::Gauge);
  MetricFamily lookups =
      Family("ps_server_embedding_lookups_total",
             "Rows that pulls and pushes looked up, by where each was: memory, disk (read back "
             "from the tier), none (created: admitted) or not_admitted (a pull answered the "
             "initial value). The hot tier's hit rate is memory over memory + disk + none.",
             MetricType::Counter);
  MetricFamily evictions =
      Family("ps_server_embedding_tier_writes_total",
             "Rows written to the on-disk tier as they left memory, by result: ok, or failed (the "
             "row stays in memory past the budget; the log says why).",
             MetricType::Counter);
  MetricFamily read_errors =
      Family("ps_server_embedding_tier_read_errors_total",
             "Calls the on-disk tier's read error failed (the log says why).", MetricType::Counter);
  MetricFamily prefetched =
      Family("ps_server_embedding_prefetched_rows_total",
             "Rows read back from the on-disk tier by prefetches (PullRowsRequest.prefetch) "
             "before the pull that wants them.",
             MetricType::Counter);
  MetricFamily dropped = Family("ps_server_embedding_dropped_gradients_total",
                                "Row gradients dropped because their id was not admitted yet "
                                "(--table_admission).",
                                MetricType::Counter);
  MetricFamily waiting =
      Family("ps_server_embedding_admission_pending_ids",
             "Ids seen but not admitted yet (--table_admission=count:N only).", MetricType::Gauge);
  MetricFamily filter_bytes =
      Family("ps_server_embedding_admission_memory_bytes",
             "Heap bytes of each table's admission filter on this shard.", MetricType::Gauge);
  MetricFamily evicted = Family("ps_server_embedding_evictions_total",
                                "Rows removed from each table (memory and disk) by --table_ttl_* "
                                "(reason=ttl) or --table_evict_l2_below (reason=score).",
                                MetricType::Counter);
  bool tiered = false, admits = false;
  for (const TableUsage& t : st.tables) {
    rows.metric.push_back(Value(MetricType::Gauge, static_cast<double>(t.rows),
                                {{"table", t.name}}));
    memory.metric.push_back(Value(MetricType::Gauge, static_cast<double>(t.memory_bytes),
                                  {{"table", t.name}}));
    if (t.admits) {
      admits = true;
      dropped.metric.push_back(Value(
          MetricType::Counter, static_cast<double>(t.counters.dropped_grads), {{"table", t.name}}));
      if (t.admission_pending_ids >= 0) {
        waiting.metric.push_back(Value(
            MetricType::Gauge, static_cast<double>(t.admission_pending_ids), {{"table", t.name}}));
      }
      filter_bytes.metric.push_back(
          Value(MetricType::Gauge, static_cast<double>(t.admission_bytes), {{"table", t.name}}));
    }
    if (t.evicts) {
      for (const auto& [reason, n] :
           {std::pair<const char*, int64_t>{"ttl", t.counters.evicted_ttl},
            {"score", t.counters.evicted_score}}) {
        evicted.metric.push_back(Value(MetricType::Counter, static_cast<double>(n),
                                       {{"table", t.name}, {"reason", reason}}));
      }
    }
    if (!t.tiered && !t.admits) continue;
    for (const auto& [where, n] : {std::pair<const char*, int64_t>{"memory", t.counters.in_memory},
                                   {"disk", t.counters.from_tier},
                                   {"none", t.counters.created},
                                   {"not_admitted", t.counters.not_admitted}}) {
      lookups.metric.push_back(Value(MetricType::Counter, static_cast<double>(n),
                                     {{"table", t.name}, {"where", where}}));
    }
    if (!t.tiered) continue;
    tiered = true;
    disk_rows.metric.push_back(
        Value(MetricType::Gauge, static_cast<double>(t.tier_rows), {{"table", t.name}}));
    prefetched.metric.push_back(Value(
        MetricType::Counter, static_cast<double>(t.counters.prefetched), {{"table", t.name}}));
    evictions.metric.push_back(Value(MetricType::Counter, static_cast<double>(t.counters.written),
                                     {{"table", t.name}, {"result", "ok"}}));
    evictions.metric.push_back(Value(MetricType::Counter,
                                     static_cast<double>(t.counters.write_errors),
                                     {{"table", t.name}, {"result", "failed"}}));
    read_errors.metric.push_back(Value(
        MetricType::Counter, static_cast<double>(t.counters.read_errors), {{"table", t.name}}));
  }
  if (!st.tables.empty()) {  // a model without tables shows no empty families
    out.push_back(std::move(rows));
    out.push_back(std::move(memory));
  }
  if (tiered || admits) out.push_back(std::move(lookups));
  if (tiered) {
    out.push_back(std::move(disk_rows));
    out.push_back(std::move(evictions));
    out.push_back(std::move(read_errors));
    out.push_back(std::move(prefetched));
  }
  if (!evicted.metric.empty()) out.push_back(std::move(evicted));
  if (admits) {
    out.push_back(std::move(dropped));
    if (!waiting.metric.empty()) out.push_back(std::move(waiting));
    out.push_back(std::move(filter_bytes));
  }
  out.push_back(Single("ps_server_waiting_calls",
                       "Pulls, inits and rows calls waiting for a version or step.",
                       MetricType::Gauge, static_cast<double>(st.waiting_calls)));
  out.push_back(Single("ps_server_pending_pushes", "Pushes being received.", MetricType::Gauge,
                       static_cast<double>(st.pending_pushes)));

  if (checkpointer_ != nullptr) {
    const CheckpointMetrics& cm = checkpointer_->metrics();
    out.push_back(SingleHistogram("ps_server_checkpoint_duration_seconds",
                                  "Time to write one checkpoint (successful writes).",
                                  cm.write_duration.Read(), kMicros));
    out.push_back(Single("ps_server_checkpoint_failures_total", "Checkpoint writes that failed.",
                         MetricType::Counter, static_cast<double>(cm.writes_failed.Get())));
    out.push_back(Single(
        "ps_server_last_checkpoint_timestamp_seconds",
        "Unix time of the last successful checkpoint write by this process; 0 before the first.",
        MetricType::Gauge, static_cast<double>(cm.last_written_unix_micros.Get()) * kMicros));
  }

  out.push_back(Single("ps_server_incarnation_starts",
                       "Starts of this run: 1, plus one per restart from its checkpoints.",
                       MetricType::Gauge, static_cast<double>(st.incarnation.start)));
  out.push_back(Single("ps_server_start_time_seconds", "Unix time this server started.",
                       MetricType::Gauge, absl::ToDoubleSeconds(started_ - absl::UnixEpoch())));
  return out;
}

}  // namespace ps

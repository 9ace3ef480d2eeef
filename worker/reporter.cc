#include "worker/reporter.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ps {

absl::StatusOr<std::unique_ptr<Reporter>> Reporter::Create(const ReporterOptions& options) {
  std::unique_ptr<std::ofstream> file;
  if (!options.metrics_file.empty()) {
    file = std::make_unique<std::ofstream>(options.metrics_file, std::ios::trunc);
    if (!*file) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write --metrics_file=", options.metrics_file));
    }
  }
  std::unique_ptr<Reporter> r(new Reporter(options, std::move(file)));
  if (!options.metrics.listen.empty()) {
    ASSIGN_OR_RETURN(r->endpoint_,
                     MetricsEndpoint::Start(options.metrics, {r->metrics_->registry()}));
    r->Line(absl::StrCat("ps_worker: worker ", options.worker_id, " metrics on ",
                         r->endpoint_->tls() ? "https://" : "http://", r->endpoint_->address(),
                         "/metrics"));
  }
  return r;
}

std::unique_ptr<Reporter> Reporter::Silent() {
  return std::unique_ptr<Reporter>(new Reporter(ReporterOptions(), nullptr));
}

Reporter::Reporter(const ReporterOptions& options, std::unique_ptr<std::ofstream> file)
    : options_(options),
      file_(std::move(file)),
      own_metrics_(options.worker_id),
      metrics_(options.external_metrics != nullptr ? options.external_metrics : &own_metrics_) {}

void Reporter::Write(const std::string& text) {
  if (options_.log == nullptr) return;
  if (progress_.has_value()) *options_.log << progress_->Clear();
  *options_.log << text << std::flush;
}

void Reporter::Line(absl::string_view text) { Write(absl::StrCat(text, "\n")); }

std::function<void(absl::string_view)> Reporter::LogSink() const {
  std::ostream* const log = options_.log;
  if (log == nullptr) return [](absl::string_view) {};
  const char* const erase = options_.progress_line ? "\r\033[K" : "";
  return [log, erase](absl::string_view line) { *log << erase << line << std::endl; };
}

void Reporter::Start(const WorkloadPlan& plan, absl::string_view mode, int64_t version,
                     int64_t first_step, absl::Time now) {
  plan_ = plan;
  start_ = window_start_ = now;
  if (options_.progress_line && options_.log != nullptr) {
    progress_.emplace(first_step, plan.total_steps);
  }
  metrics_->SetMode(std::string(mode));
  metrics_->SetModelVersion(version);
}

void Reporter::Step(const StepReport& s, absl::Time now) {
  window_samples_ += s.samples;
  window_loss_ += s.loss;
  ++window_batches_;
  metrics_->RecordStep(s.compute, s.communication, s.samples, s.loss);
  metrics_->SetModelVersion(s.version);
  metrics_->SetRetries(s.retries);
  metrics_->SetRecoveries(s.recoveries);
  if (progress_.has_value()) {
    progress_->Step(s.step, s.samples, s.loss);
    if (const absl::Duration elapsed = now - start_; progress_->Due(elapsed)) {
      *options_.log << progress_->Draw(elapsed) << std::flush;
    }
  }
}

void Reporter::Point(int64_t step, int64_t epoch, const Evaluation* evaluation, absl::Time at,
                     absl::Time resume) {
  const double sps = window_samples_ / std::max(1e-9, absl::ToDoubleSeconds(at - window_start_));
  const double train_loss = window_batches_ > 0 ? window_loss_ / window_batches_ : 0;
  const bool epochs = plan_.steps_per_epoch > 0;
  if (evaluation != nullptr) {
    if (progress_.has_value()) progress_->ExcludeTime(resume - at);
    for (const EvalField& f : evaluation->fields) {
      metrics_->RecordEvaluation(f.key, f.help, f.value);
    }
    Line(absl::StrFormat("step %d %sloss %.4f %s samples/s %.0f", step,
                         epochs ? absl::StrFormat("epoch %d ", epoch) : "", train_loss,
                         evaluation->line, sps));
  } else if (plan_.log_loss_lines) {
    Line(absl::StrFormat("worker %d step %d loss %.4f samples/s %.0f", options_.worker_id, step,
                         train_loss, sps));
  }
  if (file_ != nullptr) {
    std::string line =
        absl::StrFormat("{\"worker_id\": %d, \"step\": %d", options_.worker_id, step);
    if (epochs) absl::StrAppendFormat(&line, ", \"epoch\": %d", epoch);
    absl::StrAppendFormat(&line,
                          ", \"train_loss\": %.6f, \"samples_per_sec\": %.1f, \"wall_s\": %.3f",
                          train_loss, sps, absl::ToDoubleSeconds(at - start_));
    if (evaluation != nullptr) {
      for (const EvalField& f : evaluation->fields) {
        absl::StrAppendFormat(&line, ", \"%s\": %.6f", f.key, f.value);
      }
    }
    *file_ << line << "}\n" << std::flush;
  }
  window_start_ = resume;
  window_samples_ = window_batches_ = 0;
  window_loss_ = 0;
}

void Reporter::EndSteps() {
  if (progress_.has_value()) *options_.log << progress_->End() << std::flush;
}

void Reporter::Done(const RunResult& r) {
  metrics_->SetModelVersion(r.final_version);
  std::string line = absl::StrFormat(
      "worker %d done: mode %s, steps %d, version %d, samples/s %.0f, wall_s %.1f",
      options_.worker_id, r.mode, r.steps, r.final_version, r.samples_per_sec, r.wall_s);
  if (r.steps_dropped > 0 || r.steps_skipped > 0) {
    absl::StrAppendFormat(&line, ", gradients dropped %d, steps skipped %d", r.steps_dropped,
                          r.steps_skipped);
  }
  if (r.evaluation.has_value()) absl::StrAppend(&line, ", final ", r.evaluation->summary);
  Line(line);
}

void Reporter::Linger() {
  if (endpoint_ == nullptr || options_.metrics_linger <= absl::ZeroDuration()) return;
  Line(absl::StrCat("ps_worker: serving /metrics for ",
                    absl::FormatDuration(options_.metrics_linger), " more"));
  absl::SleepFor(options_.metrics_linger);
}

}  // namespace ps

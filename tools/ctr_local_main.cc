// ctr_local: trains the CTR model (worker/ctr_model.h) in one process on the
// synthetic generator (worker/ctr_data.h) and prints, every --eval_every
// steps and at the end, the held-out AUC and log loss next to the best AUC
// the generator allows on the same held-out examples, and the throughput.
// A manual tool: no servers, one thread of math.
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "worker/ctr_data.h"
#include "worker/ctr_local_trainer.h"
#include "worker/ctr_metrics.h"

ABSL_FLAG(uint64_t, vocab, 1000000, "Ids per categorical feature (generator vocab_sizes).");
ABSL_FLAG(uint64_t, signal_vocab, 1000, "Generator signal_vocab_size (0: every id weighted).");
ABSL_FLAG(int64_t, num_examples, 1000000, "Training examples; steps past them wrap around.");
ABSL_FLAG(int64_t, steps, 4000, "Training steps.");
ABSL_FLAG(int, batch, 256, "Examples per step.");
ABSL_FLAG(int, dim, 16, "Embedding dimension.");
ABSL_FLAG(std::string, hidden, "64,32", "Hidden layer widths, comma-separated.");
ABSL_FLAG(double, lr, 0.05, "AdaGrad learning rate of the embedding rows.");
ABSL_FLAG(double, dense_lr, 1e-3, "Adam learning rate of the MLP.");
ABSL_FLAG(int, threads, 1, "OpenBLAS threads.");
ABSL_FLAG(int64_t, eval_every, 1000, "Steps between evaluations (0: only at the end).");
ABSL_FLAG(int, held_out, 50000, "Held-out examples evaluated.");
ABSL_FLAG(uint64_t, seed, 1, "Generator seed.");

namespace ps {
namespace {

// The flags, validated.
struct CtrLocalOptions {
  CtrGeneratorOptions data;
  CtrLocalTrainerOptions trainer;
  int64_t steps = 0;       // > 0
  int batch = 0;           // > 0
  int threads = 1;         // >= 1
  int64_t eval_every = 0;  // >= 0
  int held_out = 0;        // >= 2

  static absl::StatusOr<CtrLocalOptions> FromFlags() {
    CtrLocalOptions o;
    o.data.seed = absl::GetFlag(FLAGS_seed);
    o.data.vocab_sizes = {absl::GetFlag(FLAGS_vocab)};
    o.data.signal_vocab_size = absl::GetFlag(FLAGS_signal_vocab);
    o.data.num_examples = absl::GetFlag(FLAGS_num_examples);
    if (absl::Status s = o.data.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--vocab, --signal_vocab or --num_examples: ", s.message()));
    }
    o.steps = absl::GetFlag(FLAGS_steps);
    o.batch = absl::GetFlag(FLAGS_batch);
    o.threads = absl::GetFlag(FLAGS_threads);
    o.eval_every = absl::GetFlag(FLAGS_eval_every);
    o.held_out = absl::GetFlag(FLAGS_held_out);
    if (o.steps < 1) return absl::InvalidArgumentError("--steps must be >= 1");
    if (o.batch < 1) return absl::InvalidArgumentError("--batch must be >= 1");
    if (o.threads < 1) return absl::InvalidArgumentError("--threads must be >= 1");
    if (o.eval_every < 0) return absl::InvalidArgumentError("--eval_every must be >= 0");
    if (o.held_out < 2) return absl::InvalidArgumentError("--held_out must be >= 2");
    o.trainer.model.dim = absl::GetFlag(FLAGS_dim);
    o.trainer.model.hidden.clear();
    for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_hidden), ',', absl::SkipEmpty())) {
      int width = 0;
      if (!absl::SimpleAtoi(w, &width)) {
        return absl::InvalidArgumentError(absl::StrCat("--hidden: '", w, "' is not an integer"));
      }
      o.trainer.model.hidden.push_back(width);
    }
    if (absl::Status s = o.trainer.model.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--dim or --hidden: ", s.message()));
    }
    o.trainer.table.optimizer.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
    if (absl::Status s = o.trainer.table.optimizer.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--lr: ", s.message()));
    }
    o.trainer.dense.learning_rate = absl::GetFlag(FLAGS_dense_lr);
    if (absl::Status s = ValidateOptimizerOptions(o.trainer.dense); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--dense_lr: ", s.message()));
    }
    return o;
  }
};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

absl::Status Run(const CtrLocalOptions& o) {
  openblas_set_num_threads(o.threads);
  auto generator_or = CtrGenerator::Create(o.data);
  if (!generator_or.ok()) return generator_or.status();
  const CtrGenerator& generator = **generator_or;
  auto trainer_or = CtrLocalTrainer::Create(o.trainer);
  if (!trainer_or.ok()) return trainer_or.status();
  CtrLocalTrainer& trainer = **trainer_or;

  std::vector<CtrExample> held_out(o.held_out);
  std::vector<float> labels(o.held_out);
  std::vector<double> best(o.held_out);
  for (int j = 0; j < o.held_out; ++j) {
    held_out[j] = generator.HeldOutExample(j);
    labels[j] = held_out[j].label;
    best[j] = generator.BestProbability(held_out[j]);
  }
  auto best_auc = Auc(best, labels);
  if (!best_auc.ok()) return best_auc.status();
  auto best_loss = LogLoss(best, labels);
  std::printf("vocab %llu, signal_vocab %llu, held-out %d: best AUC %.4f, best log loss %.4f\n",
              static_cast<unsigned long long>(o.data.vocab_sizes[0]),
              static_cast<unsigned long long>(o.data.signal_vocab_size), o.held_out, *best_auc,
              *best_loss);

  using Clock = std::chrono::steady_clock;
  Clock::duration generate{}, train{};
  std::vector<CtrExample> batch(o.batch);
  int64_t next = 0;
  double loss_sum = 0;
  int64_t loss_steps = 0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    const auto t0 = Clock::now();
    for (CtrExample& e : batch) {
      e = generator.Example(next);
      next = next + 1 == o.data.num_examples ? 0 : next + 1;
    }
    const auto t1 = Clock::now();
    auto loss = trainer.Step(batch);
    if (!loss.ok()) return loss.status();
    train += Clock::now() - t1;
    generate += t1 - t0;
    loss_sum += *loss;
    ++loss_steps;
    if (step == o.steps || (o.eval_every > 0 && step % o.eval_every == 0)) {
      std::vector<float> probs;
      if (absl::Status s = trainer.Predict(held_out, &probs); !s.ok()) return s;
      auto auc = Auc(probs, labels);
      auto log_loss = LogLoss(probs, labels);
      if (!auc.ok()) return auc.status();
      if (!log_loss.ok()) return log_loss.status();
      const double examples = static_cast<double>(step) * o.batch;
      std::printf(
          "step %lld examples %.0f train_loss %.4f held-out AUC %.4f (gap %.4f) log loss %.4f "
          "rows %zu | train %.0f ex/s, generate %.0f ex/s\n",
          static_cast<long long>(step), examples, loss_sum / loss_steps, *auc, *best_auc - *auc,
          *log_loss, trainer.table().size(), examples / Seconds(train),
          examples / Seconds(generate));
      std::fflush(stdout);
      loss_sum = 0;
      loss_steps = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ps::ParseCommandLine(argc, argv, "Trains the CTR model standalone on synthetic data.");
  auto options = ps::CtrLocalOptions::FromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "ctr_local: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  absl::Status status = ps::Run(*options);
  if (!status.ok()) {
    std::fprintf(stderr, "ctr_local: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

// Sync mode equals single-process SGD. W=4 workers with batch b train for 20
// steps against S=2 real gRPC shards, over each transport, and the result is
// checked two ways:
//
// (a) Bit for bit against the same arithmetic done in one process: at each
//     step, each worker's sub-batch gradient from its own Mlp on a one-thread
//     CPU backend (as the workers compute it), then the shard's
//     Optimizer::ApplyMean over the W gradients in worker-id order (the order
//     the sync policy releases them in). Every GEMM has the shape and thread
//     count it has in the distributed run, and the update is the server's own
//     elementwise code, so both compute the same bits on any CPU. Any
//     difference is a bug of the distributed path: a lost, duplicated, stale
//     or reordered gradient, a wrong divisor, a wire or partition error.
//
// (b) Against true single-process SGD with batch W*b (RunWorker without
//     servers), which is what sync mode means, within a tolerance derived
//     from float32 rounding (see BoundStep): after every step on the
//     trajectory of (a), which (a) shows is the sync run's, and at the end on
//     the sync run's weights. This checks what (a) cannot: that W sub-batch
//     means of b examples are the batch mean of W*b examples (the data
//     partition, the loss's 1/rows scaling, the number of steps).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/optimizer.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"
#include "worker/compute/backend.h"
#include "worker/mlp/data_order.h"
#include "worker/mlp/dataset.h"
#include "worker/mlp/model.h"
#include "worker/mlp/workload.h"
#include "worker/run_loop.h"

namespace ps {
namespace {

constexpr int kWorkers = 4;
constexpr int kShards = 2;
constexpr int kBatch = 16;
constexpr int kBigBatch = kWorkers * kBatch;
constexpr int kSteps = 20;
constexpr float kLr = 0.1f;
constexpr uint64_t kSeed = 42;
// The workers' backend: one OpenBLAS thread.
const BackendOptions kCpu1 = {"cpu", 1};

const std::shared_ptr<const FashionMnist>& SharedData() {
  static const auto* data = [] {
    auto d = LoadFashionMnist(kDefaultDatasetDir);
    if (!d.ok()) {
      ADD_FAILURE() << d.status();
      return new std::shared_ptr<const FashionMnist>(std::make_shared<FashionMnist>());
    }
    return new std::shared_ptr<const FashionMnist>(
        std::make_shared<const FashionMnist>(*std::move(d)));
  }();
  return *data;
}

const FashionMnist& Data() { return *SharedData(); }

// One worker of `num_workers` with batch `batch` trains the MLP for kSteps
// steps through ps_worker's run loop: against the servers of `client`, or,
// when it is null, alone with `standalone`.
absl::StatusOr<RunResult> Train(int worker_id, int num_workers, int batch,
                                const ClientOptions* client, const OptimizerOptions& standalone) {
  MlpOptions m;
  m.worker_id = worker_id;
  m.num_workers = num_workers;
  m.batch_size = batch;
  m.max_steps = kSteps;
  m.seed = kSeed;
  m.backend = kCpu1;
  ASSIGN_OR_RETURN(std::unique_ptr<MlpWorkload> workload, MlpWorkload::Create(m, SharedData()));
  RunOptions r;
  r.worker_id = worker_id;
  r.num_workers = num_workers;
  r.log_every = 0;
  LocalStoreOptions local;
  local.dense = standalone;
  return RunWorker(r, workload.get(), client, local);
}

// The layer widths of the model the trainer builds.
std::vector<int> Dims(const Dataset& train) {
  std::vector<int> dims = {train.features};
  for (int h : MlpOptions().hidden) dims.push_back(h);
  dims.push_back(train.classes);
  return dims;
}

double MaxAbs(absl::Span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

double MaxAbs(const TensorList& a) {
  double m = 0;
  for (const auto& t : a) m = std::max(m, MaxAbs(t));
  return m;
}

double MaxAbsDiff(const TensorList& a, const TensorList& b) {
  double m = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    for (size_t i = 0; i < a[t].size(); ++i) m = std::max(m, std::fabs(double(a[t][i]) - b[t][i]));
  }
  return m;
}

// Worker `worker`'s batch (of `workers` workers with `batch` examples each)
// at step `step` of the first epoch, assembled as the trainer does.
struct Batch {
  int rows = 0;
  std::vector<int64_t> examples;
  std::vector<float> x, y;
};

Batch MakeBatch(const Dataset& d, const std::vector<int64_t>& perm, int workers, int worker,
                int batch, int64_t step) {
  Batch b;
  b.rows = batch;
  for (int i = 0; i < batch; ++i) {
    const int64_t e = BatchExample(perm, workers, worker, batch, step, i);
    b.examples.push_back(e);
    b.x.insert(b.x.end(), d.image(e), d.image(e) + d.features);
    b.y.push_back(d.labels[e]);
  }
  return b;
}

// What Mlp::TrainStep computes inside but does not return, redone with the
// same backend calls on the same shapes, hence the same kernels and bits. For
// each layer l: its input, its pre-activation z = input * W + bias, and the
// gradient of the batch's mean loss with respect to z, before (`delta_unmasked`)
// and after (`delta`) the ReLU mask z > 0 (the same for the last layer, which
// has no ReLU). The deltas carry the loss's 1/rows.
struct Layer {
  std::vector<float> input, pre, delta_unmasked, delta;
};

absl::StatusOr<std::vector<Layer>> Inspect(ComputeBackend* be, const std::vector<int>& dims,
                                           const TensorList& w, const Batch& batch) {
  const int layers = static_cast<int>(dims.size()) - 1;
  const int rows = batch.rows;
  auto upload = [be](const std::vector<float>& v) -> absl::StatusOr<std::unique_ptr<DeviceBuffer>> {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> b, be->Allocate(v.size()));
    RETURN_IF_ERROR(be->CopyToDevice(v, b.get()));
    return b;
  };
  auto download = [be](const DeviceBuffer& b, size_t n, std::vector<float>* v) {
    v->resize(n);
    return be->CopyToHost(b, absl::MakeSpan(*v));
  };
  std::vector<Layer> out(layers);
  std::vector<std::unique_ptr<DeviceBuffer>> acts(layers + 1), weights(layers), biases(layers);
  ASSIGN_OR_RETURN(acts[0], upload(batch.x));
  for (int l = 0; l < layers; ++l) {
    const int in = dims[l], n = dims[l + 1];
    ASSIGN_OR_RETURN(weights[l], upload(w[2 * l]));
    ASSIGN_OR_RETURN(biases[l], upload(w[2 * l + 1]));
    ASSIGN_OR_RETURN(acts[l + 1], be->Allocate(size_t(rows) * n));
    RETURN_IF_ERROR(be->Gemm(false, false, rows, n, in, 1.0f, *acts[l], *weights[l], 0.0f,
                             acts[l + 1].get()));
    RETURN_IF_ERROR(be->AddBias(rows, n, *biases[l], acts[l + 1].get()));
    RETURN_IF_ERROR(download(*acts[l], size_t(rows) * in, &out[l].input));
    RETURN_IF_ERROR(download(*acts[l + 1], size_t(rows) * n, &out[l].pre));
    if (l + 1 < layers) RETURN_IF_ERROR(be->Relu(rows * n, acts[l + 1].get()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> labels, upload(batch.y));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> delta, be->Allocate(size_t(rows) * dims.back()));
  RETURN_IF_ERROR(be->SoftmaxCrossEntropy(rows, dims.back(), *acts[layers], *labels, 1.0f / rows,
                                          delta.get())
                      .status());
  RETURN_IF_ERROR(download(*delta, size_t(rows) * dims.back(), &out[layers - 1].delta));
  out[layers - 1].delta_unmasked = out[layers - 1].delta;
  for (int l = layers - 1; l > 0; --l) {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> below, be->Allocate(size_t(rows) * dims[l]));
    RETURN_IF_ERROR(be->Gemm(false, true, rows, dims[l], dims[l + 1], 1.0f, *delta, *weights[l],
                             0.0f, below.get()));
    RETURN_IF_ERROR(download(*below, size_t(rows) * dims[l], &out[l - 1].delta_unmasked));
    RETURN_IF_ERROR(be->ReluBackward(rows * dims[l], *acts[l], below.get()));
    RETURN_IF_ERROR(download(*below, size_t(rows) * dims[l], &out[l - 1].delta));
    delta = std::move(below);
  }
  return out;
}

// How far apart check (b) lets the two runs end, built step by step.
//
// Both runs compute the same real-number SGD trajectory; they differ only in
// float32 rounding. Run (b) computes a weight gradient dW_l = input_l^T delta_l
// as one GEMM sum over the B = W*b examples of the step, with delta carrying
// the batch mean's 1/B. The sync run sums the same B products as W GEMMs of b
// (each scaled by 1/b), adds the W results in worker order and multiplies by
// 1/W (exact: W is a power of two). Its forward GEMMs have b rows instead of
// B, for which OpenBLAS may pick other kernels (it picks by shape and by CPU),
// so even the pre-activations may differ in their last bits.
//
// Smooth part. With u = 2^-24 and gamma_n = n*u / (1 - n*u), a float32
// evaluation of a sum of products is within gamma_n * (the same sum over
// absolute values) of the exact value, in any order, where n is the number of
// roundings along the longest path of the computation (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., sections 3.1 and 3.5). Two
// evaluations are thus within 2 * gamma_n * that magnitude of each other.
// Each gradient entry here is the end of a chain of sums: forward through
// every layer (the fan-ins), the softmax's sum over classes, back through the
// layers above (their fan-outs), then over the B examples; n is the total.
// For the magnitude of dW_l[i][j] we take sum_r |input_l[r][i]| * |delta_l[r][j]|
// <= max|input_l| * max_j sum_r |delta_l[r][j]| (for a bias, the second
// factor alone) from the activations and deltas as computed. That is first
// order (products of two errors are dropped) and assumes the forward pass
// does not cancel badly, so that the computed magnitudes stand in for the
// magnitudes of the terms; the worst-case factor n, where rounding errors add
// up like n*u instead of growing like sqrt(n)*u as random-signed errors do,
// leaves room for that. A step moves the weights by lr times the gradient, and the update
// w - lr*g rounds once more (u*|w| per run). Over the steps the differences
// add up: we assume that 20 steps of SGD at this rate do not amplify a
// difference (the step's Jacobian I - lr*H has norm near 1).
//
// Kink part. The smooth part assumes both runs put every example on the same
// side of every ReLU. A pre-activation within rounding of 0 may land on
// either side, and that is not a small effect: one run then back-propagates
// that example's delta for the unit and the other drops it, changing column j
// of dW_l by input_l[r] * delta_unmasked[r][j], and the deltas of the layers
// below by delta_unmasked[r][j] * W_l[:, j] (and so on down). This is what
// gave 2.8e-5 on an AVX-512 CPU: with seed 42, at step 14 one unit of the
// second hidden layer is 1.1e-7 from its kink for one example, and AVX-512's
// kernels put it on the other side (OpenBLAS's Nehalem, Core2 and Barcelona
// kernels do the same). A worst-case allowance for crossings would be as large
// as a bug, so the test looks for the real ones: it redoes both runs' forward
// passes with the same backend calls (the same bits), compares the signs of
// their pre-activations, and adds each crossing's effect. Such an allowance
// only makes sense while the runs differ by rounding alone (two runs that a
// bug drove apart differ in many signs), which is why the runs are compared
// after every step, against the bound up to that step.
struct Bound {
  int chain = 0;             // n above
  double smooth = 0;         // accumulated smooth part
  double kinks = 0;          // accumulated kink part
  int crossings = 0;         // pre-activations on different sides of 0
  double total() const { return smooth + kinks; }
};

// Adds one step to `bound`. `batch` is run (b)'s pass at its weights `w`;
// `parts[w]` is the sync run's pass for worker w's sub-batch, whose row i is
// row kWorkers * i + w of `batch`.
void BoundStep(const std::vector<int>& dims, const TensorList& w, const std::vector<Layer>& batch,
               const std::vector<std::vector<Layer>>& parts, Bound* bound) {
  const double u = std::ldexp(1.0, -24);
  const double gamma = bound->chain * u / (1 - bound->chain * u);
  const int layers = static_cast<int>(dims.size()) - 1;
  double magnitude = 0;
  for (int l = 0; l < layers; ++l) {
    const int n = dims[l + 1];
    std::vector<double> column(n, 0.0);  // sum_r |delta_l[r][j]|
    for (size_t k = 0; k < batch[l].delta.size(); ++k) {
      column[k % n] += std::fabs(batch[l].delta[k]);
    }
    magnitude = std::max(magnitude, std::max(1.0, MaxAbs(batch[l].input)) *
                                        *std::max_element(column.begin(), column.end()));
  }
  bound->smooth += kLr * 2 * gamma * magnitude + 2 * u * MaxAbs(w);

  for (int l = 0; l + 1 < layers; ++l) {
    const int n = dims[l + 1];
    for (int part = 0; part < kWorkers; ++part) {
      const std::vector<float>& z = parts[part][l].pre;
      for (size_t k = 0; k < z.size(); ++k) {
        const int r = static_cast<int>(k / n) * kWorkers + part, j = static_cast<int>(k % n);
        const size_t rk = size_t(r) * n + j;
        if ((z[k] > 0) == (batch[l].pre[rk] > 0)) continue;
        ++bound->crossings;
        // The change of the deltas at the pre-activations of layer m (for
        // example r), bounded entry by entry, and its effect on layer m's
        // weight and bias gradients, from layer l down to the first.
        std::vector<double> change(n, 0.0);
        change[j] = std::fabs(batch[l].delta_unmasked[rk]);
        double effect = 0;
        for (int m = l;; --m) {
          const int in = dims[m], out = dims[m + 1];
          const double largest = *std::max_element(change.begin(), change.end());
          const double input =
              MaxAbs(absl::MakeConstSpan(batch[m].input).subspan(size_t(r) * in, in));
          effect = std::max(effect, largest * std::max(1.0, input));
          if (m == 0) break;
          std::vector<double> below(in, 0.0);
          for (int a = 0; a < in; ++a) {
            for (int c = 0; c < out; ++c) {
              below[a] += change[c] * std::fabs(w[2 * m][size_t(a) * out + c]);
            }
          }
          change = std::move(below);
        }
        bound->kinks += kLr * effect;
      }
    }
  }
}

// The references both transports are compared with.
struct References {
  TensorList init;
  TensorList server_order;  // (a)
  TensorList batch;         // (b): RunWorker with batch W*b, no servers
  Bound bound;              // for (b)
  // (b) after every step, (a)'s weights against the batch run's: the first
  // step (1-based) where they differ by more than the bound so far, or 0.
  int first_step_over_bound = 0;
  double diff_there = 0, bound_there = 0;
};

absl::StatusOr<References> ComputeReferences(const FashionMnist& data) {
  const Dataset& train = data.train;
  const std::vector<int> dims = Dims(train);
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend, CreateBackend(kCpu1));
  std::vector<std::unique_ptr<Mlp>> workers;  // one model per worker, as in the sync run
  for (int w = 0; w < kWorkers; ++w) {
    ASSIGN_OR_RETURN(std::unique_ptr<Mlp> m, Mlp::Create(backend.get(), dims, kBatch));
    workers.push_back(std::move(m));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Mlp> big, Mlp::Create(backend.get(), dims, kBigBatch));

  References refs;
  refs.init = big->InitialValues(kSeed);
  // One optimizer per tensor for each run. ApplyMean is elementwise, so the
  // shards' flat slices and these tensors get the same bits.
  std::vector<std::unique_ptr<Optimizer>> server_opt, batch_opt;
  for (const std::vector<float>& t : refs.init) {
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> a, CreateOptimizer({"sgd", kLr}, t.size()));
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> b, CreateOptimizer({"sgd", kLr}, t.size()));
    server_opt.push_back(std::move(a));
    batch_opt.push_back(std::move(b));
  }
  TensorList server = refs.init, batch = refs.init;  // each run's weights
  refs.bound.chain = kBigBatch + dims.back();
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    refs.bound.chain += dims[l] + (l > 0 ? dims[l + 1] : 0);  // fan-in, and fan-out going back
  }

  const std::vector<int64_t> perm = EpochPermutation(train.size, kSeed, 0, /*shuffle=*/true);
  if (StepsPerEpoch(train.size, kWorkers, kBatch) < kSteps) {
    return absl::InternalError("the test assumes its steps fit in one epoch");
  }
  for (int t = 0; t < kSteps; ++t) {
    const Batch whole = MakeBatch(train, perm, 1, 0, kBigBatch, t);
    std::vector<Batch> sub;
    for (int w = 0; w < kWorkers; ++w) {
      sub.push_back(MakeBatch(train, perm, kWorkers, w, kBatch, t));
      for (int i = 0; i < kBatch; ++i) {
        if (sub[w].examples[i] != whole.examples[kWorkers * i + w]) {
          return absl::InternalError("worker batches are not interleaved as BoundStep assumes");
        }
      }
    }
    // Check (b)'s bound, from both runs' passes at their current weights;
    // not extended once the runs parted (the test fails then anyway).
    if (refs.first_step_over_bound == 0) {
      ASSIGN_OR_RETURN(std::vector<Layer> whole_pass, Inspect(backend.get(), dims, batch, whole));
      std::vector<std::vector<Layer>> sub_passes;
      for (int w = 0; w < kWorkers; ++w) {
        ASSIGN_OR_RETURN(std::vector<Layer> p, Inspect(backend.get(), dims, server, sub[w]));
        sub_passes.push_back(std::move(p));
      }
      BoundStep(dims, batch, whole_pass, sub_passes, &refs.bound);
    }

    // (a): each worker's gradient on the weights every worker pulled, then
    // the shard's mean of the W gradients in worker order.
    std::vector<TensorList> grads(kWorkers);
    for (int w = 0; w < kWorkers; ++w) {
      RETURN_IF_ERROR(workers[w]->SetWeights(server));
      RETURN_IF_ERROR(
          workers[w]->TrainStep(sub[w].x.data(), sub[w].y.data(), kBatch, &grads[w]).status());
    }
    for (size_t k = 0; k < server.size(); ++k) {
      std::vector<const float*> in_worker_order;
      for (int w = 0; w < kWorkers; ++w) in_worker_order.push_back(grads[w][k].data());
      server_opt[k]->ApplyMean(/*step=*/t + 1, /*lr_scale=*/1.0, in_worker_order, 0, server[k].size(),
                               server[k].data());
    }

    // (b), step by step as LocalParamStore does it, to follow its weights.
    TensorList g;
    RETURN_IF_ERROR(big->SetWeights(batch));
    RETURN_IF_ERROR(big->TrainStep(whole.x.data(), whole.y.data(), kBigBatch, &g).status());
    for (size_t k = 0; k < batch.size(); ++k) {
      RETURN_IF_ERROR(ApplyGradient(batch_opt[k].get(), /*step=*/t + 1, g[k],
                                    absl::MakeSpan(batch[k])));
    }

    const double diff = MaxAbsDiff(server, batch);
    if (diff > refs.bound.total() && refs.first_step_over_bound == 0) {
      refs.first_step_over_bound = t + 1;
      refs.diff_there = diff;
      refs.bound_there = refs.bound.total();
    }
  }
  refs.server_order = std::move(server);

  // The true batch-W*b run is the trainer's own; the loop above must have
  // followed it exactly (same code, shapes and thread count), or its bound
  // would be about another run.
  ASSIGN_OR_RETURN(RunResult single, Train(0, 1, kBigBatch, nullptr, OptimizerOptions{"sgd", kLr}));
  if (single.steps != kSteps) return absl::InternalError("the single-process run stopped early");
  if (single.weights != batch) {
    return absl::InternalError(absl::StrCat(
        "RunWorker's batch run differs from the test's replica of it by ",
        MaxAbsDiff(single.weights, batch)));
  }
  refs.batch = std::move(single.weights);
  return refs;
}

const absl::StatusOr<References>& Refs() {
  static const auto* refs = new absl::StatusOr<References>(ComputeReferences(Data()));
  return *refs;
}

class SyncEquivalence : public ::testing::TestWithParam<ClientOptions::Transport> {};

TEST_P(SyncEquivalence, FourWorkersTwoShardsMatchSingleProcessSgd) {
  const FashionMnist& data = Data();
  ASSERT_GT(data.train.size, 0);
  const absl::StatusOr<References>& refs = Refs();
  ASSERT_TRUE(refs.ok()) << refs.status();

  TestCluster cluster(kShards, kWorkers, Mode::kSync, kLr);
  std::vector<absl::StatusOr<RunResult>> results(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions co = cluster.ClientOptionsFor(w, kWorkers, GetParam());
      results[w] = Train(w, kWorkers, kBatch, &co, OptimizerOptions{});
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w].status();
    EXPECT_EQ(results[w]->steps, kSteps);
    EXPECT_EQ(results[w]->final_version, kSteps);
  }
  for (int w = 1; w < kWorkers; ++w) {
    EXPECT_EQ(MaxAbsDiff(results[w]->weights, results[0]->weights), 0.0) << "worker " << w;
  }
  const TensorList& sync = results[0]->weights;

  // (a) Bit for bit.
  const double exact_diff = MaxAbsDiff(sync, refs->server_order);
  EXPECT_EQ(exact_diff, 0.0) << "sync weights differ from the server's arithmetic done in one "
                                "process: the distributed path lost or changed something";
  EXPECT_TRUE(sync == refs->server_order);  // also fails on NaNs, which MaxAbsDiff skips

  // (b) Within the rounding bound of true batch-W*b SGD, after every step and
  // at the end. The bound must stay small next to what training did, or it
  // could hide a bug: losing one worker's gradient at a single step changes
  // the result by 7% of the update; a wrong divisor, or a step more or less,
  // by 30-60%; losing a worker's gradient at every step, by more than 100%.
  const double update = MaxAbsDiff(refs->batch, refs->init);
  const Bound& bound = refs->bound;
  const double diff = MaxAbsDiff(sync, refs->batch);
  std::cout << absl::StrFormat(
                   "max |sync - single process| = %.3g (%.2g of the largest update %.3g); "
                   "bound %.3g = %.3g rounding + %.3g for %d ReLU kink crossings; "
                   "bit-for-bit reference: %g",
                   diff, diff / update, update, bound.total(), bound.smooth, bound.kinks,
                   bound.crossings, exact_diff)
            << std::endl;
  EXPECT_EQ(refs->first_step_over_bound, 0)
      << "after step " << refs->first_step_over_bound << " the sync trajectory differs from "
      << "single-process SGD by " << refs->diff_there << ", more than the rounding bound "
      << refs->bound_there;
  EXPECT_LE(diff, bound.total()) << "sync weights differ from single-process SGD by more than "
                                    "float32 rounding explains";
  EXPECT_LT(bound.total(), 0.05 * update) << "the rounding bound is too loose to catch a bug";
  // Training really moved the weights, so the comparisons mean something.
  EXPECT_GT(update, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Transports, SyncEquivalence, AllTransports(), TransportName);

}  // namespace
}  // namespace ps

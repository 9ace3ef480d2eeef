#include "worker/mlp/flags.h"

#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "worker/mlp/dataset.h"

ABSL_FLAG(std::string, hidden, "512,256", "Hidden layer widths of the mlp, comma-separated.");
ABSL_FLAG(std::string, dataset_dir, ps::kDefaultDatasetDir,
          "Folder with the Fashion-MNIST IDX files (gzip or plain), as installed by Debian's "
          "dataset-fashion-mnist package.");
ABSL_FLAG(bool, shuffle, true, "Reshuffle the training set every epoch.");

namespace ps {

absl::StatusOr<MlpOptions> MlpOptionsFromFlags(const WorkerConfig& config) {
  MlpOptions o;
  o.worker_id = config.run.worker_id;
  o.num_workers = config.run.num_workers;
  o.hidden.clear();
  if (config.model == "mlp") {
    ASSIGN_OR_RETURN(o.hidden, ParsePositiveIntList("hidden", absl::GetFlag(FLAGS_hidden)));
    if (o.hidden.empty()) {
      return absl::InvalidArgumentError("--model=mlp needs at least one --hidden width");
    }
  }
  o.batch_size = config.batch_size;
  o.epochs = config.epochs;
  o.max_steps = config.max_steps;
  o.seed = config.seed;
  o.shuffle = absl::GetFlag(FLAGS_shuffle);
  o.backend = config.backend;
  return o;
}

absl::StatusOr<std::unique_ptr<Workload>> MlpWorkloadFromFlags(const WorkerConfig& config) {
  ASSIGN_OR_RETURN(const MlpOptions options, MlpOptionsFromFlags(config));
  ASSIGN_OR_RETURN(FashionMnist data, LoadFashionMnist(absl::GetFlag(FLAGS_dataset_dir)));
  ASSIGN_OR_RETURN(
      std::unique_ptr<MlpWorkload> w,
      MlpWorkload::Create(options, std::make_shared<const FashionMnist>(std::move(data))));
  return std::unique_ptr<Workload>(std::move(w));
}

}  // namespace ps

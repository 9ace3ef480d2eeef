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

absl::StatusOr<MlpOptions> MlpOptionsFromFlags(const SharedWorkloadFlags& shared,
                                               const BackendOptions& backend) {
  MlpOptions o;
  o.worker_id = shared.worker_id;
  o.num_workers = shared.num_workers;
  o.hidden.clear();
  if (shared.model == "mlp") {
    ASSIGN_OR_RETURN(o.hidden, ParsePositiveIntList("hidden", absl::GetFlag(FLAGS_hidden)));
    if (o.hidden.empty()) {
      return absl::InvalidArgumentError("--model=mlp needs at least one --hidden width");
    }
  }
  o.batch_size = shared.batch_size;
  o.epochs = shared.epochs;
  o.max_steps = shared.max_steps;
  o.seed = shared.seed;
  o.shuffle = absl::GetFlag(FLAGS_shuffle);
  o.backend = backend;
  return o;
}

absl::StatusOr<std::unique_ptr<Workload>> MlpWorkloadFromFlags(const SharedWorkloadFlags& shared,
                                                               const BackendOptions& backend) {
  ASSIGN_OR_RETURN(const MlpOptions options, MlpOptionsFromFlags(shared, backend));
  ASSIGN_OR_RETURN(FashionMnist data, LoadFashionMnist(absl::GetFlag(FLAGS_dataset_dir)));
  ASSIGN_OR_RETURN(
      std::unique_ptr<MlpWorkload> w,
      MlpWorkload::Create(options, std::make_shared<const FashionMnist>(std::move(data))));
  return std::unique_ptr<Workload>(std::move(w));
}

}  // namespace ps

// Dataset: an in-memory labelled image set read from IDX files (the MNIST
// family's format), gzip-compressed or not.
//
// Pixels are scaled to [0, 1] and standardized with the training set's
// Fashion-MNIST mean and standard deviation; labels are class ids stored as
// floats (what ComputeBackend::SoftmaxCrossEntropy takes). Immutable after
// loading, so one Dataset may be shared by many threads.
#ifndef PS_WORKER_MLP_DATASET_H_
#define PS_WORKER_MLP_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ps {

struct Dataset {
  int64_t size = 0;            // number of examples
  int features = 0;            // floats per example (rows * cols of an image)
  int classes = 10;
  std::vector<float> images;   // size * features, example-major
  std::vector<float> labels;   // size class ids

  const float* image(int64_t i) const { return images.data() + i * features; }
};

struct FashionMnist {
  Dataset train;  // 60,000 examples
  Dataset test;   // 10,000 examples
};

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr char kDefaultDatasetDir[] = "/usr/share/datasets/fashion-mnist";

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`.
// NOT_FOUND naming the missing file and the package that installs it;
// INVALID_ARGUMENT for malformed files.
absl::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir);

// Reads one pair of IDX files (exposed for tests).
absl::StatusOr<Dataset> LoadIdxPair(const std::string& images_path,
                                    const std::string& labels_path);

}  // namespace ps

#endif  // PS_WORKER_MLP_DATASET_H_

#include "worker/mlp/dataset.h"

#include <unistd.h>
#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {
namespace {

// Mean and standard deviation of Fashion-MNIST training pixels in [0, 1].
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;

// Reads a whole file through zlib, which also reads uncompressed files.
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  int err = 0;
  const char* msg = gzerror(f, &err);
  const bool failed = n < 0 || (err != Z_OK && err != Z_STREAM_END);
  const std::string why = failed ? msg : "";
  gzclose(f);
  if (failed) return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  return out;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

// Picks "name.gz" or "name" in dir.
absl::StatusOr<std::string> Find(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {absl::StrCat(dir, "/", name, ".gz"),
                                       absl::StrCat(dir, "/", name)}) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(
      "Fashion-MNIST file ", name, ".gz not found in ", dir,
      ". Install Debian's dataset-fashion-mnist package (apt-get install dataset-fashion-mnist, "
      "or run deploy/setup_debian.sh), or point --dataset_dir at a folder holding the IDX files."));
}

}  // namespace

absl::StatusOr<Dataset> LoadIdxPair(const std::string& images_path,
                                    const std::string& labels_path) {
  ASSIGN_OR_RETURN(std::string img, ReadMaybeGzip(images_path));
  ASSIGN_OR_RETURN(std::string lab, ReadMaybeGzip(labels_path));
  if (img.size() < 16 || BigEndian32(img, 0) != 0x00000803) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": not an IDX3 unsigned-byte image file"));
  }
  if (lab.size() < 8 || BigEndian32(lab, 0) != 0x00000801) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": not an IDX1 unsigned-byte label file"));
  }
  const int64_t n = BigEndian32(img, 4);
  const int64_t rows = BigEndian32(img, 8), cols = BigEndian32(img, 12);
  if (rows <= 0 || cols <= 0 || rows * cols > (1 << 20) ||
      static_cast<int64_t>(img.size()) != 16 + n * rows * cols) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": header says ", n, " images of ", rows, "x", cols,
                     " but the file holds ", img.size(), " bytes"));
  }
  if (BigEndian32(lab, 4) != n || static_cast<int64_t>(lab.size()) != 8 + n) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": expected ", n, " labels to match ", images_path));
  }
  Dataset d;
  d.size = n;
  d.features = static_cast<int>(rows * cols);
  d.images.resize(n * d.features);
  for (size_t i = 0; i < d.images.size(); ++i) {
    d.images[i] = (float(uint8_t(img[16 + i])) / 255.0f - kMean) / kStd;
  }
  d.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int y = uint8_t(lab[8 + i]);
    if (y >= d.classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(labels_path, ": label ", y, " of example ", i, " is not in [0, 10)"));
    }
    d.labels[i] = static_cast<float>(y);
  }
  return d;
}

absl::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir) {
  FashionMnist out;
  ASSIGN_OR_RETURN(std::string train_img, Find(dir, "train-images-idx3-ubyte"));
  ASSIGN_OR_RETURN(std::string train_lab, Find(dir, "train-labels-idx1-ubyte"));
  ASSIGN_OR_RETURN(std::string test_img, Find(dir, "t10k-images-idx3-ubyte"));
  ASSIGN_OR_RETURN(std::string test_lab, Find(dir, "t10k-labels-idx1-ubyte"));
  ASSIGN_OR_RETURN(out.train, LoadIdxPair(train_img, train_lab));
  ASSIGN_OR_RETURN(out.test, LoadIdxPair(test_img, test_lab));
  if (out.train.features != out.test.features) {
    return absl::InvalidArgumentError("train and test images differ in size");
  }
  return out;
}

}  // namespace ps

// CUDA implementation of ComputeBackend; see cuda_backend.h.
#include "worker/compute/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/compute/cuda_kernels.h"

namespace ps {
namespace {

// Staged copies move at most kPieceBytes at a time, and staging buffers grow
// to at most kMaxStagingBytes; larger copies go through piece by piece.
constexpr size_t kPieceBytes = size_t{4} << 20;
constexpr size_t kMinStagingBytes = size_t{1} << 20;
constexpr size_t kMaxStagingBytes = size_t{64} << 20;

// The next size of a staging buffer that holds `capacity` bytes and would
// need `needed`: at least double, within the bounds above.
size_t GrownCapacity(size_t capacity, size_t needed) {
  return std::min(kMaxStagingBytes, std::max({needed, 2 * capacity, kMinStagingBytes}));
}

absl::Status Check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  // Reported here: the runtime must not report it again at the next launch
  // check (cudaGetLastError). Errors that break the context persist anyway.
  cudaGetLastError();
  const std::string message =
      absl::StrCat(call, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  return e == cudaErrorMemoryAllocation ? absl::ResourceExhaustedError(message)
                                        : absl::InternalError(message);
}

absl::Status Check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(call, " failed: ", cublasGetStatusName(s), " (",
                                           cublasGetStatusString(s), ")");
  return s == CUBLAS_STATUS_ALLOC_FAILED ? absl::ResourceExhaustedError(message)
                                         : absl::InternalError(message);
}

// The status of a CUDA runtime or cuBLAS call, naming the call.
#define CUDA_CHECK(call) Check((call), #call)

// Destructors cannot return an error; they print it.
void Report(const absl::Status& s) {
  if (!s.ok()) std::fprintf(stderr, "cuda backend: %s\n", std::string(s.message()).c_str());
}

struct CudaFree {
  void operator()(void* p) const { Report(CUDA_CHECK(cudaFree(p))); }
};
struct CudaFreeHost {
  void operator()(void* p) const { Report(CUDA_CHECK(cudaFreeHost(p))); }
};
template <typename T>
using DevicePtr = std::unique_ptr<T, CudaFree>;
template <typename T>
using PinnedPtr = std::unique_ptr<T, CudaFreeHost>;

template <typename T>
absl::StatusOr<DevicePtr<T>> DeviceAlloc(size_t count) {
  void* p = nullptr;
  RETURN_IF_ERROR(CUDA_CHECK(cudaMalloc(&p, count * sizeof(T))));
  return DevicePtr<T>(static_cast<T*>(p));
}

template <typename T>
absl::StatusOr<PinnedPtr<T>> PinnedAlloc(size_t count) {
  void* p = nullptr;
  RETURN_IF_ERROR(CUDA_CHECK(cudaHostAlloc(&p, count * sizeof(T), cudaHostAllocDefault)));
  return PinnedPtr<T>(static_cast<T*>(p));
}

class CudaBuffer final : public DeviceBuffer {
 public:
  // `stream`: where the ops that use the buffer run.
  CudaBuffer(DevicePtr<float> data, size_t n, cudaStream_t stream)
      : data_(std::move(data)), n_(n), stream_(stream) {}
  // Waits for the ops that may still use the memory.
  ~CudaBuffer() override { Report(CUDA_CHECK(cudaStreamSynchronize(stream_))); }

  size_t size() const override { return n_; }
  float* data() const { return data_.get(); }

 private:
  const DevicePtr<float> data_;
  const size_t n_;
  const cudaStream_t stream_;
};

const float* D(const DeviceBuffer& b) { return static_cast<const CudaBuffer&>(b).data(); }
float* D(DeviceBuffer* b) { return static_cast<CudaBuffer*>(b)->data(); }

// Pinned host memory that copies pass through. The first `used` bytes belong
// to copies that may still be in flight.
struct Staging {
  PinnedPtr<char> data;
  size_t capacity = 0;  // bytes
  size_t used = 0;

  // Makes the buffer at least `bytes` long, dropping its contents.
  // REQUIRES: no copy in flight uses it.
  absl::Status Grow(size_t bytes) {
    if (bytes <= capacity) return absl::OkStatus();
    data.reset();
    capacity = 0;
    ASSIGN_OR_RETURN(data, PinnedAlloc<char>(bytes));
    capacity = bytes;
    return absl::OkStatus();
  }
};

class CudaBackend final : public ComputeBackend {
 public:
  static absl::StatusOr<std::unique_ptr<ComputeBackend>> Create(const BackendOptions& options) {
    std::unique_ptr<CudaBackend> backend(new CudaBackend(options.gpu));
    RETURN_IF_ERROR(backend->Init(options.tf32));
    return std::unique_ptr<ComputeBackend>(std::move(backend));
  }

  ~CudaBackend() override {
    if (stream_ != nullptr) Report(CUDA_CHECK(cudaStreamSynchronize(stream_)));
    if (cublas_ != nullptr) Report(CUDA_CHECK(cublasDestroy(cublas_)));
    if (uploaded_ != nullptr) Report(CUDA_CHECK(cudaEventDestroy(uploaded_)));
    if (downloaded_ != nullptr) Report(CUDA_CHECK(cudaEventDestroy(downloaded_)));
    if (stream_ != nullptr) Report(CUDA_CHECK(cudaStreamDestroy(stream_)));
  }

  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  std::string description() const override { return description_; }

  absl::StatusOr<bool> ShouldHoldDataset(size_t bytes) override {
    size_t free = 0, total = 0;
    RETURN_IF_ERROR(CUDA_CHECK(cudaMemGetInfo(&free, &total)));
    // Half of the free memory stays for cuBLAS, the model and other users.
    return bytes <= free / 2;
  }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(size_t n) override {
    DevicePtr<float> data;
    if (n > 0) {
      ASSIGN_OR_RETURN(data, DeviceAlloc<float>(n));
      RETURN_IF_ERROR(CUDA_CHECK(cudaMemsetAsync(data.get(), 0, n * sizeof(float), stream_)));
    }
    return std::unique_ptr<DeviceBuffer>(new CudaBuffer(std::move(data), n, stream_));
  }

  absl::Status FinishCopiesToHost() override {
    // downloaded_ was recorded right after the last started copy: ops called
    // since then keep running.
    const absl::Status landed = CUDA_CHECK(cudaEventSynchronize(downloaded_));
    if (landed.ok()) {
      for (const PendingCopy& c : pending_) {
        std::memcpy(c.dst.data(), c.staged, c.dst.size() * sizeof(float));
      }
    }
    pending_.clear();
    download_.used = 0;
    return landed;
  }

  absl::Status Synchronize() override { return CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  // A started copy to the host, in download staging until FinishCopiesToHost.
  struct PendingCopy {
    const char* staged;
    absl::Span<float> dst;
  };

  explicit CudaBackend(int gpu) : gpu_(gpu) {}

  absl::Status Init(bool tf32) {
    RETURN_IF_ERROR(CUDA_CHECK(cudaSetDevice(gpu_)));
    cudaDeviceProp prop;
    RETURN_IF_ERROR(CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu_)));
    description_ = absl::StrFormat("cuda:%d (%s, sm_%d%d, %.1f GiB, tf32 %s)", gpu_, prop.name,
                                   prop.major, prop.minor, prop.totalGlobalMem / double(1 << 30),
                                   tf32 ? "on" : "off");
    // The kernels are built for sm_80 and sm_90 (which run on 8.x and 9.0)
    // and as compute_90 PTX (which newer GPUs compile); older GPUs have none.
    if (prop.major < 8) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "CUDA device %d (%s) is sm_%d%d; this build's kernels need sm_80 or newer", gpu_,
          prop.name, prop.major, prop.minor));
    }
    RETURN_IF_ERROR(CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    RETURN_IF_ERROR(CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming)));
    RETURN_IF_ERROR(CUDA_CHECK(cudaEventCreateWithFlags(&downloaded_, cudaEventDisableTiming)));
    RETURN_IF_ERROR(CUDA_CHECK(cublasCreate(&cublas_)));
    RETURN_IF_ERROR(CUDA_CHECK(cublasSetStream(cublas_, stream_)));
    RETURN_IF_ERROR(CUDA_CHECK(
        cublasSetMathMode(cublas_, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH)));
    ASSIGN_OR_RETURN(softmax_partials_, DeviceAlloc<cuda::SoftmaxSums>(cuda::kSoftmaxMaxBlocks));
    ASSIGN_OR_RETURN(softmax_sums_, DeviceAlloc<cuda::SoftmaxSums>(1));
    ASSIGN_OR_RETURN(softmax_result_, PinnedAlloc<cuda::SoftmaxSums>(1));
    return absl::OkStatus();
  }

  // Copies `bytes` from host `src` to device `dst` through upload staging;
  // src may be reused on return.
  absl::Status Upload(const void* src, size_t bytes, void* dst) {
    for (size_t offset = 0; offset < bytes; offset += kPieceBytes) {
      const size_t n = std::min(kPieceBytes, bytes - offset);
      ASSIGN_OR_RETURN(char* staged, StageUpload(n));
      std::memcpy(staged, static_cast<const char*>(src) + offset, n);
      RETURN_IF_ERROR(CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + offset, staged, n,
                                                 cudaMemcpyHostToDevice, stream_)));
      RETURN_IF_ERROR(CUDA_CHECK(cudaEventRecord(uploaded_, stream_)));
    }
    return absl::OkStatus();
  }

  // `bytes` (<= kPieceBytes) of upload staging that no copy in flight uses.
  absl::StatusOr<char*> StageUpload(size_t bytes) {
    if (upload_.used + bytes > upload_.capacity) {
      // Start over at the beginning once every upload from there has left.
      // If some had not yet, the buffer is too small for the uploads in
      // flight: grow it.
      bool grow = bytes > upload_.capacity;
      const cudaError_t left = cudaEventQuery(uploaded_);
      if (left == cudaErrorNotReady) {
        cudaGetLastError();  // not an error, so that no launch check reports it
        RETURN_IF_ERROR(CUDA_CHECK(cudaEventSynchronize(uploaded_)));
        grow = true;
      } else {
        RETURN_IF_ERROR(Check(left, "cudaEventQuery(uploaded_)"));
      }
      if (grow) RETURN_IF_ERROR(upload_.Grow(GrownCapacity(upload_.capacity, bytes)));
      upload_.used = 0;
    }
    char* staged = upload_.data.get() + upload_.used;
    upload_.used += bytes;
    return staged;
  }

  // `bytes` (<= kPieceBytes) of download staging that no copy in flight uses.
  absl::StatusOr<char*> StageDownload(size_t bytes) {
    if (download_.used + bytes > download_.capacity) {
      // The staged copies must land before the buffer is reused; growing it
      // to hold them all spares the next rounds of copies this wait.
      const size_t wanted = GrownCapacity(download_.capacity, download_.used + bytes);
      RETURN_IF_ERROR(FinishCopiesToHost());
      RETURN_IF_ERROR(download_.Grow(wanted));
    }
    char* staged = download_.data.get() + download_.used;
    download_.used += bytes;
    return staged;
  }

  absl::Status DoCopyToDevice(absl::Span<const float> src, DeviceBuffer* dst) override {
    return Upload(src.data(), src.size() * sizeof(float), D(dst));
  }

  absl::Status DoStartCopyToHost(const DeviceBuffer& src, absl::Span<float> dst) override {
    constexpr size_t kPieceFloats = kPieceBytes / sizeof(float);
    for (size_t offset = 0; offset < dst.size(); offset += kPieceFloats) {
      const size_t n = std::min(kPieceFloats, dst.size() - offset);
      ASSIGN_OR_RETURN(char* staged, StageDownload(n * sizeof(float)));
      RETURN_IF_ERROR(CUDA_CHECK(cudaMemcpyAsync(staged, D(src) + offset, n * sizeof(float),
                                                 cudaMemcpyDeviceToHost, stream_)));
      pending_.push_back(PendingCopy{staged, dst.subspan(offset, n)});
      RETURN_IF_ERROR(CUDA_CHECK(cudaEventRecord(downloaded_, stream_)));
    }
    return absl::OkStatus();
  }

  absl::Status DoGemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                      const DeviceBuffer& a, const DeviceBuffer& b, float beta,
                      DeviceBuffer* c) override {
    // cuBLAS is column-major, where a row-major matrix reads as its
    // transpose: C^T [n,m] = op(B)^T op(A)^T, so the operands swap places.
    return CUDA_CHECK(cublasSgemm(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, D(b),
                                  trans_b ? k : n, D(a), trans_a ? m : k, &beta, D(c), n));
  }

  absl::Status DoAddBias(int rows, int cols, const DeviceBuffer& bias, DeviceBuffer* x) override {
    return CUDA_CHECK(cuda::AddBias(stream_, rows, cols, D(bias), D(x)));
  }

  absl::Status DoRelu(int n, DeviceBuffer* x) override {
    return CUDA_CHECK(cuda::Relu(stream_, n, D(x)));
  }

  absl::Status DoReluBackward(int n, const DeviceBuffer& y, DeviceBuffer* dx) override {
    return CUDA_CHECK(cuda::ReluBackward(stream_, n, D(y), D(dx)));
  }

  absl::Status DoColumnSums(int rows, int cols, const DeviceBuffer& x,
                            DeviceBuffer* out) override {
    return CUDA_CHECK(cuda::ColumnSums(stream_, rows, cols, D(x), D(out)));
  }

  absl::Status DoGatherRows(const DeviceBuffer& table, int cols, absl::Span<const int64_t> rows,
                            DeviceBuffer* dst) override {
    if (gather_index_capacity_ < rows.size()) {
      // Earlier gathers may still read the old index buffer.
      RETURN_IF_ERROR(Synchronize());
      gather_index_.reset();
      gather_index_capacity_ = 0;
      ASSIGN_OR_RETURN(gather_index_, DeviceAlloc<int64_t>(rows.size()));
      gather_index_capacity_ = rows.size();
    }
    RETURN_IF_ERROR(Upload(rows.data(), rows.size() * sizeof(int64_t), gather_index_.get()));
    return CUDA_CHECK(cuda::GatherRows(stream_, static_cast<int64_t>(rows.size()), cols,
                                       gather_index_.get(), D(table), D(dst)));
  }

  absl::StatusOr<LossSums> DoSoftmaxCrossEntropy(int rows, int classes,
                                                 const DeviceBuffer& logits,
                                                 const DeviceBuffer& labels, float grad_scale,
                                                 DeviceBuffer* grad) override {
    RETURN_IF_ERROR(CUDA_CHECK(cuda::SoftmaxCrossEntropy(
        stream_, rows, classes, D(logits), D(labels), grad_scale,
        grad == nullptr ? nullptr : D(grad), softmax_partials_.get(), softmax_sums_.get())));
    RETURN_IF_ERROR(CUDA_CHECK(cudaMemcpyAsync(softmax_result_.get(), softmax_sums_.get(),
                                               sizeof(cuda::SoftmaxSums), cudaMemcpyDeviceToHost,
                                               stream_)));
    RETURN_IF_ERROR(Synchronize());
    const cuda::SoftmaxSums sums = *softmax_result_;
    if (sums.bad_row >= 0) {
      float label = 0;
      RETURN_IF_ERROR(CUDA_CHECK(cudaMemcpy(&label, D(labels) + sums.bad_row, sizeof(float),
                                            cudaMemcpyDeviceToHost)));
      return BadLabelError(sums.bad_row, label, classes);
    }
    return LossSums{sums.loss_sum, sums.correct};
  }

  const int gpu_;
  std::string description_;  // set by Init
  // Created by Init; destroyed by the destructor.
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaEvent_t uploaded_ = nullptr;    // recorded after each staged upload
  cudaEvent_t downloaded_ = nullptr;  // recorded after each staged download

  Staging upload_, download_;
  std::vector<PendingCopy> pending_;  // started copies to the host, in order
  DevicePtr<int64_t> gather_index_;   // GatherRows' indices on the device
  size_t gather_index_capacity_ = 0;
  DevicePtr<cuda::SoftmaxSums> softmax_partials_;  // kSoftmaxMaxBlocks entries
  DevicePtr<cuda::SoftmaxSums> softmax_sums_;
  PinnedPtr<cuda::SoftmaxSums> softmax_result_;
};

}  // namespace

absl::StatusOr<CudaDevices> FindCudaDevices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary) {
    cudaGetLastError();  // an answer here, not an error for later checks
    return CudaDevices{0, absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e))};
  }
  RETURN_IF_ERROR(Check(e, "cudaGetDeviceCount"));
  return CudaDevices{count, count == 0 ? "the CUDA runtime sees no device" : ""};
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(const BackendOptions& options) {
  return CudaBackend::Create(options);
}

}  // namespace ps

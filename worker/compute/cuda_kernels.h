// The CUDA backend's kernels (cuda_kernels.cu, compiled by nvcc into a static
// library; see worker/BUILD).
//
// Plain launchers on raw device pointers, so that the backend class
// (cuda_backend.cc) builds with the host compiler alone and nvcc never sees
// Abseil. Each enqueues its kernels on `stream` and returns the launch's
// error (cudaGetLastError); a fault while a kernel runs surfaces at the next
// synchronizing call. Row-major float32 matrices, as in backend.h.
// REQUIRES: every size and count positive, every pointer to device memory of
// at least the size the shapes imply.
#ifndef PS_WORKER_COMPUTE_CUDA_KERNELS_H_
#define PS_WORKER_COMPUTE_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ps {
namespace cuda {

// x[r, c] += bias[c] for x [rows, cols].
cudaError_t AddBias(cudaStream_t stream, int rows, int cols, const float* bias, float* x);
// x[i] = x[i] < 0 ? 0 : x[i] for i < n.
cudaError_t Relu(cudaStream_t stream, int n, float* x);
// dx[i] = y[i] > 0 ? dx[i] : 0 for i < n.
cudaError_t ReluBackward(cudaStream_t stream, int n, const float* y, float* dx);
// out[c] = sum over r of x[r, c] for x [rows, cols]; rows may be 0.
cudaError_t ColumnSums(cudaStream_t stream, int rows, int cols, const float* x, float* out);
// dst[i, :] = table[index[i], :] for i < rows, rows of `cols` elements.
// REQUIRES: every index is a row of the table.
cudaError_t GatherRows(cudaStream_t stream, int64_t rows, int cols, const int64_t* index,
                       const float* table, float* dst);

// The sums SoftmaxCrossEntropy reduces on the device.
struct SoftmaxSums {
  double loss_sum;    // over rows with a valid label
  long long correct;  // rows whose first maximal logit is at the label
  int bad_row;        // first row whose label is not an integer in [0, classes); -1 if none
};
// Blocks of the first pass, and so the entries of its scratch array.
constexpr int kSoftmaxMaxBlocks = 1024;

// For logits [rows, classes] and labels (class ids as floats): writes the
// sums to *sums and, if grad != nullptr, grad = (softmax - onehot(label)) *
// grad_scale for each valid row. Reduces in a fixed order: the same inputs
// give the same sums. `partials` is scratch of kSoftmaxMaxBlocks entries.
cudaError_t SoftmaxCrossEntropy(cudaStream_t stream, int rows, int classes, const float* logits,
                                const float* labels, float grad_scale, float* grad,
                                SoftmaxSums* partials, SoftmaxSums* sums);

}  // namespace cuda
}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CUDA_KERNELS_H_

// Kernels of the CUDA backend. Element-wise kernels use grid-stride loops;
// reductions run in a fixed order, so results do not vary from run to run.
#include <climits>

#include "worker/compute/cuda_kernels.h"

namespace ps {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // grid-stride loops cover larger arrays
constexpr int kWarp = 32;
constexpr unsigned kAllLanes = 0xffffffffu;

int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ int64_t FirstIndex() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ int64_t Stride() { return int64_t{gridDim.x} * blockDim.x; }

__global__ void AddBiasKernel(int64_t n, int cols, const float* bias, float* x) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) x[i] += bias[i % cols];
}

__global__ void ReluKernel(int64_t n, float* x) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const float v = x[i];
    x[i] = v < 0.0f ? 0.0f : v;  // as std::max(v, 0.0f): NaN stays NaN
  }
}

__global__ void ReluBackwardKernel(int64_t n, const float* y, float* dx) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) dx[i] = y[i] > 0.0f ? dx[i] : 0.0f;
}

// A block sums a tile of kColumnTile columns: each of its kRowLanes rows of
// threads takes every kRowLanes-th row, then one row of threads adds those
// partial sums.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 8;

__global__ void ColumnSumsKernel(int rows, int cols, const float* x, float* out) {
  __shared__ float partial[kRowLanes][kColumnTile];
  const int c = blockIdx.x * kColumnTile + threadIdx.x;
  float sum = 0.0f;
  if (c < cols) {
    for (int r = threadIdx.y; r < rows; r += kRowLanes) sum += x[int64_t{r} * cols + c];
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int i = 0; i < kRowLanes; ++i) total += partial[i][threadIdx.x];
    out[c] = total;
  }
}

__global__ void GatherRowsKernel(int64_t n, int cols, const int64_t* index, const float* table,
                                 float* dst) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t r = i / cols;
    dst[i] = table[index[r] * cols + (i - r * cols)];
  }
}

// Softmax cross-entropy, first pass: one warp per row, kRowsPerBlock rows
// per block at a time; each block leaves the sums of its rows in
// partials[blockIdx.x]. The arithmetic follows the CPU backend: max and exp
// sums in double, the first maximal logit as the prediction.
constexpr int kRowsPerBlock = kThreads / kWarp;

__global__ void SoftmaxRowsKernel(int rows, int classes, const float* logits, const float* labels,
                                  float grad_scale, float* grad, SoftmaxSums* partials) {
  __shared__ double warp_loss[kRowsPerBlock];
  __shared__ long long warp_correct[kRowsPerBlock];
  __shared__ int warp_bad[kRowsPerBlock];
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  double loss = 0;
  long long correct = 0;
  int bad = INT_MAX;
  // The loop bound is the same for every lane of a warp, so all 32 lanes
  // reach each shuffle.
  for (int r = blockIdx.x * kRowsPerBlock + warp; r < rows; r += gridDim.x * kRowsPerBlock) {
    const float* z = logits + int64_t{r} * classes;
    // Largest logit and its first index; arg == INT_MAX: this lane saw none.
    float zmax = 0.0f;
    int arg = INT_MAX;
    for (int c = lane; c < classes; c += kWarp) {
      if (arg == INT_MAX || z[c] > zmax) {
        zmax = z[c];
        arg = c;
      }
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(kAllLanes, zmax, offset);
      const int other_arg = __shfl_xor_sync(kAllLanes, arg, offset);
      if (other_arg != INT_MAX &&
          (arg == INT_MAX || other > zmax || (other == zmax && other_arg < arg))) {
        zmax = other;
        arg = other_arg;
      }
    }
    double denom = 0;
    for (int c = lane; c < classes; c += kWarp) denom += exp(double{z[c]} - zmax);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      denom += __shfl_xor_sync(kAllLanes, denom, offset);
    }
    const float label = labels[r];
    const bool valid = label >= 0.0f && label < classes && label == floorf(label);
    const int y = valid ? static_cast<int>(label) : -1;
    if (grad != nullptr) {
      float* g = grad + int64_t{r} * classes;
      for (int c = lane; c < classes; c += kWarp) {
        const float p = static_cast<float>(exp(double{z[c]} - zmax) / denom);
        g[c] = (p - (c == y ? 1.0f : 0.0f)) * grad_scale;
      }
    }
    if (lane == 0) {
      if (valid) {
        loss += log(denom) - (double{z[y]} - zmax);
        if (arg == y) ++correct;
      } else if (bad == INT_MAX) {
        bad = r;  // a warp's rows come in increasing order
      }
    }
  }
  if (lane == 0) {
    warp_loss[warp] = loss;
    warp_correct[warp] = correct;
    warp_bad[warp] = bad;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    SoftmaxSums sums{0, 0, INT_MAX};
    for (int w = 0; w < kRowsPerBlock; ++w) {
      sums.loss_sum += warp_loss[w];
      sums.correct += warp_correct[w];
      sums.bad_row = min(sums.bad_row, warp_bad[w]);
    }
    partials[blockIdx.x] = sums;
  }
}

// Second pass, one warp: adds the blocks' partial sums.
__global__ void SoftmaxFinishKernel(int blocks, const SoftmaxSums* partials, SoftmaxSums* sums) {
  double loss = 0;
  long long correct = 0;
  int bad = INT_MAX;
  for (int b = threadIdx.x; b < blocks; b += kWarp) {
    loss += partials[b].loss_sum;
    correct += partials[b].correct;
    bad = min(bad, partials[b].bad_row);
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    loss += __shfl_xor_sync(kAllLanes, loss, offset);
    correct += __shfl_xor_sync(kAllLanes, correct, offset);
    bad = min(bad, __shfl_xor_sync(kAllLanes, bad, offset));
  }
  if (threadIdx.x == 0) *sums = SoftmaxSums{loss, correct, bad == INT_MAX ? -1 : bad};
}

}  // namespace

cudaError_t AddBias(cudaStream_t stream, int rows, int cols, const float* bias, float* x) {
  const int64_t n = int64_t{rows} * cols;
  AddBiasKernel<<<Blocks(n), kThreads, 0, stream>>>(n, cols, bias, x);
  return cudaGetLastError();
}

cudaError_t Relu(cudaStream_t stream, int n, float* x) {
  ReluKernel<<<Blocks(n), kThreads, 0, stream>>>(n, x);
  return cudaGetLastError();
}

cudaError_t ReluBackward(cudaStream_t stream, int n, const float* y, float* dx) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(n, y, dx);
  return cudaGetLastError();
}

cudaError_t ColumnSums(cudaStream_t stream, int rows, int cols, const float* x, float* out) {
  const dim3 block(kColumnTile, kRowLanes);
  const unsigned tiles = static_cast<unsigned>((int64_t{cols} + kColumnTile - 1) / kColumnTile);
  ColumnSumsKernel<<<tiles, block, 0, stream>>>(rows, cols, x, out);
  return cudaGetLastError();
}

cudaError_t GatherRows(cudaStream_t stream, int64_t rows, int cols, const int64_t* index,
                       const float* table, float* dst) {
  const int64_t n = rows * cols;
  GatherRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(n, cols, index, table, dst);
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropy(cudaStream_t stream, int rows, int classes, const float* logits,
                                const float* labels, float grad_scale, float* grad,
                                SoftmaxSums* partials, SoftmaxSums* sums) {
  const int64_t needed = (int64_t{rows} + kRowsPerBlock - 1) / kRowsPerBlock;
  const int blocks = static_cast<int>(needed < kSoftmaxMaxBlocks ? needed : kSoftmaxMaxBlocks);
  SoftmaxRowsKernel<<<blocks, kThreads, 0, stream>>>(rows, classes, logits, labels, grad_scale,
                                                     grad, partials);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  SoftmaxFinishKernel<<<1, kWarp, 0, stream>>>(blocks, partials, sums);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ps

// Deterministic column reductions (nvcc only): out[o][col] = sum over rows of a value that a
// loader computes for (row, col). Used by sum_rows and by layer-norm backward (dweight and
// dbias in one pass).
//
// Stage 1 gives each block 32 columns (one per lane, so every row read is coalesced) and one
// chunk of rows; 8 row lanes accumulate strided rows, then lane 0 of each column adds the 8
// lanes in order. Stage 2 adds the per-chunk partials in chunk order. The plan depends only
// on (rows, cols), so the order of additions, and therefore the result, is reproducible.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"

namespace ddpb::gpu {

constexpr int kColumnTile = 32;     // columns per block
constexpr int kColumnRowLanes = 8;  // rows in flight per block
constexpr int kMaxOutputs = 2;

struct ColumnOutputs {
  float* ptr[kMaxOutputs];
};

struct ColumnReducePlan {
  int64_t tiles;           // blocks along the columns
  int64_t chunks;          // blocks along the rows
  int64_t rows_per_chunk;  // rows summed by one block
};

inline ColumnReducePlan plan_column_reduce(int64_t rows, int64_t cols) {
  ColumnReducePlan plan;
  plan.tiles = std::max<int64_t>(1, (cols + kColumnTile - 1) / kColumnTile);
  // About 1024 blocks fill a large GPU several times over; a chunk keeps at least 64 rows so
  // that stage 2 stays small.
  const int64_t max_chunks = std::max<int64_t>(1, 1024 / plan.tiles);
  plan.chunks = std::clamp<int64_t>((rows + 63) / 64, 1, max_chunks);
  plan.rows_per_chunk = std::max<int64_t>(1, (rows + plan.chunks - 1) / plan.chunks);
  plan.chunks = std::max<int64_t>(1, (rows + plan.rows_per_chunk - 1) / plan.rows_per_chunk);
  return plan;
}

// Scratch (floats) for a reduction with `outputs` outputs: none when one chunk suffices.
inline int64_t column_reduce_scratch_floats(int64_t rows, int64_t cols, int outputs) {
  const ColumnReducePlan plan = plan_column_reduce(rows, cols);
  return plan.chunks > 1 ? outputs * plan.chunks * cols : 0;
}

// Loader: __device__ void operator()(int64_t row, int64_t col, float* acc) const, adding its
// kOut values for (row, col) into acc[0..kOut).
template <int kOut, typename Loader>
__global__ void column_partial_kernel(Loader load, int64_t rows, int64_t cols,
                                      int64_t rows_per_chunk, ColumnOutputs outs) {
  __shared__ float lanes[kOut][kColumnRowLanes][kColumnTile + 1];  // +1: no bank conflicts
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t row_end = min(rows, row_begin + rows_per_chunk);
  float acc[kOut];
  for (int o = 0; o < kOut; ++o) acc[o] = 0.0f;
  if (col < cols) {
    for (int64_t r = row_begin + threadIdx.y; r < row_end; r += kColumnRowLanes) {
      load(r, col, acc);
    }
  }
  for (int o = 0; o < kOut; ++o) lanes[o][threadIdx.y][threadIdx.x] = acc[o];
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
  for (int o = 0; o < kOut; ++o) {
    float s = 0.0f;
    for (int y = 0; y < kColumnRowLanes; ++y) s += lanes[o][y][threadIdx.x];
    outs.ptr[o][static_cast<int64_t>(blockIdx.y) * cols + col] = s;
  }
}

template <int kOut>
__global__ void column_finish_kernel(const float* partial, int64_t chunks, int64_t cols,
                                     ColumnOutputs outs) {
  const int64_t col = global_thread_index();
  if (col >= cols) return;
  for (int o = 0; o < kOut; ++o) {
    const float* p = partial + o * chunks * cols + col;
    float s = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) s += p[c * cols];
    outs.ptr[o][col] = s;
  }
}

// outs.ptr[o] receives [cols] floats. `scratch` holds column_reduce_scratch_floats(rows,
// cols, kOut) floats (may be null when that is 0).
template <int kOut, typename Loader>
void launch_column_reduce(const Loader& load, int64_t rows, int64_t cols, ColumnOutputs outs,
                          float* scratch, cudaStream_t stream) {
  static_assert(kOut >= 1 && kOut <= kMaxOutputs);
  DDPB_CHECK(rows >= 0 && cols >= 0) << "column reduction over [" << rows << ", " << cols << "]";
  if (cols == 0) return;
  const ColumnReducePlan plan = plan_column_reduce(rows, cols);
  DDPB_CHECK(plan.tiles <= INT32_MAX && plan.chunks <= 65535)
      << "column reduction over [" << rows << ", " << cols << "] exceeds the grid";
  const dim3 grid(static_cast<unsigned>(plan.tiles), static_cast<unsigned>(plan.chunks));
  const dim3 block(kColumnTile, kColumnRowLanes);
  if (plan.chunks == 1) {
    column_partial_kernel<kOut>
        <<<grid, block, 0, stream>>>(load, rows, cols, plan.rows_per_chunk, outs);
    CUDA_LAUNCH_CHECK() << "column_partial_kernel";
    return;
  }
  DDPB_CHECK(scratch != nullptr) << "column reduction over [" << rows << ", " << cols
                                 << "] needs scratch";
  ColumnOutputs partial_outs{};
  for (int o = 0; o < kOut; ++o) partial_outs.ptr[o] = scratch + o * plan.chunks * cols;
  column_partial_kernel<kOut>
      <<<grid, block, 0, stream>>>(load, rows, cols, plan.rows_per_chunk, partial_outs);
  CUDA_LAUNCH_CHECK() << "column_partial_kernel";
  const int threads = kElementwiseBlock;
  const int64_t blocks = (cols + threads - 1) / threads;
  column_finish_kernel<kOut>
      <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(scratch, plan.chunks, cols, outs);
  CUDA_LAUNCH_CHECK() << "column_finish_kernel";
}

}  // namespace ddpb::gpu

#include "impl_ddp/powersgd_hook.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"

namespace ddpb::ddp {

bool powersgd_should_compress(int64_t rows, int64_t cols, int64_t r, double min_compression_rate) {
  const double compressed = static_cast<double>((rows + cols) * r);
  const double whole = static_cast<double>(rows * cols);
  // A rate below 1 never makes P and Q larger than the matrix (issue 25, P1).
  return compressed * std::max(min_compression_rate, 1.0) < whole &&
         compressed * min_compression_rate < whole;
}

// One compressed gradient: `in` is its view of the input (the bucket, or with error
// feedback the bucket plus the error), `out` its view of the bucket, P and Q views of the
// bucket's P and Q buffers (one AllReduce each for the whole bucket).
struct PowerSgdHook::Matrix {
  size_t k = 0;  // position in the bucket
  Tensor in, out, p, q;
};

struct PowerSgdHook::BucketState {
  std::vector<Matrix> matrices;
  std::vector<size_t> uncompressed;  // positions in the bucket, AllReduced side by side
  Tensor uncompressed_memory, p_memory, q_memory;
  bool q_kept = false;  // warm start: Q holds the last iteration's
  // Error feedback: `input` holds the error between iterations; the bucket is added to it,
  // and what the ranks agree on is taken out of it again, which leaves the next error.
  // Without error feedback `input` is the bucket itself.
  Tensor input;
  std::vector<int64_t> offsets;  // offsets[k]: where parameter k starts in the bucket
  // Positions of this iteration's collectives in the bucket's record (-1: none).
  int uncompressed_at = -1, p_at = -1, q_at = -1;
};

void validate_powersgd_options(const PowerSgdOptions& options) {
  DDPB_USAGE_CHECK(options.rank >= 1) << "--powersgd-rank must be at least 1, not " << options.rank;
  DDPB_USAGE_CHECK(options.start_iter >= 0)
      << "--powersgd-start-iter must not be negative, not " << options.start_iter;
  // As PyTorch: state kept per bucket needs the buckets' final layout, which DDP fixes
  // after its first iteration (the rebuild in the observed order).
  DDPB_USAGE_CHECK(options.start_iter > 1 || (!options.error_feedback && !options.warm_start))
      << "--powersgd-start-iter must be at least 2 with error feedback or warm start (DDP "
         "rebuilds its buckets after the first iteration), not "
      << options.start_iter;
  DDPB_USAGE_CHECK(options.min_compression_rate >= 0)
      << "--powersgd-min-compression-rate must not be negative";
  DDPB_USAGE_CHECK(options.epsilon >= 0) << "--powersgd-epsilon must not be negative";
}

PowerSgdHook::PowerSgdHook(PowerSgdOptions options, std::shared_ptr<comm::ProcessGroup> pg,
                           std::function<double()> now_ms)
    : BucketCommHook(std::move(pg), std::move(now_ms)), options_(options) {
  validate_powersgd_options(options_);
}

PowerSgdHook::~PowerSgdHook() = default;

void PowerSgdHook::buckets_rebuilt() {
  states_.clear();
}

PowerSgdHook::BucketState& PowerSgdHook::state_for(HookBucket& b) {
  if (b.index >= states_.size()) states_.resize(b.index + 1);
  if (states_[b.index]) return *states_[b.index];
  auto s = std::make_unique<BucketState>();
  const Device device = b.buffer.device();
  int64_t p_total = 0, q_total = 0, u_total = 0, offset = 0;
  struct Plan {
    size_t k;
    int64_t offset, rows, cols, r;
  };
  std::vector<Plan> plans;
  for (size_t k = 0; k < b.views.size(); ++k) {
    const Tensor& v = b.views[k];
    const int64_t rows = v.dim() == 0 ? 1 : v.size(0);
    const int64_t cols = rows == 0 ? 0 : v.numel() / rows;
    const int64_t r = std::min({rows, cols, options_.rank});
    if (r > 0 && powersgd_should_compress(rows, cols, r, options_.min_compression_rate)) {
      plans.push_back({k, offset, rows, cols, r});
      p_total += rows * r;
      q_total += cols * r;
    } else {
      s->uncompressed.push_back(k);
      u_total += v.numel();
    }
    s->offsets.push_back(offset);
    offset += v.numel();
  }
  s->input = b.buffer;
  if (options_.error_feedback) {
    s->input = Tensor::zeros(b.buffer.shape(), DType::F32, device);
  }
  if (u_total > 0) s->uncompressed_memory = Tensor::empty({u_total}, DType::F32, device);
  if (p_total > 0) {
    s->p_memory = Tensor::empty({p_total}, DType::F32, device);
    s->q_memory = Tensor::empty({q_total}, DType::F32, device);
  }
  int64_t p_at = 0, q_at = 0;
  for (const Plan& pl : plans) {
    s->matrices.push_back({pl.k, s->input.flat_view(pl.offset, {pl.rows, pl.cols}),
                           b.buffer.flat_view(pl.offset, {pl.rows, pl.cols}),
                           s->p_memory.flat_view(p_at, {pl.rows, pl.r}),
                           s->q_memory.flat_view(q_at, {pl.cols, pl.r})});
    p_at += pl.rows * pl.r;
    q_at += pl.cols * pl.r;
  }
  states_[b.index] = std::move(s);
  return *states_[b.index];
}

// A random Q, the same on every rank: each draw is its own stream of the counter-based
// generator, so the values depend only on the seed and how many draws came before.
void PowerSgdHook::draw_q(const HookBucket& b, const Matrix& m) {
  constexpr uint64_t kPowerSgdStreams = uint64_t{0x50535344} << 32;  // "PSSD"
  const uint64_t stream = kPowerSgdStreams | static_cast<uint64_t>(draws_++);
  std::vector<float> values(static_cast<size_t>(m.q.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(rng_normal(options_.seed, stream, i));
  Tensor host = Tensor::from_floats(values, m.q.shape());
  ops::copy(host.to(m.q.device()), m.q);
  if (options_.keep_random_q)
    drawn_q_.emplace_back(fmt::format("iter{}.{}", iteration_, b.names[m.k]), host);
}

void PowerSgdHook::prepare_q(HookBucket& b, BucketState& s) {
  const bool draw = !options_.warm_start || !s.q_kept;
  for (const Matrix& m : s.matrices) {
    if (draw) draw_q(b, m);
    ops::orthogonalize_columns(m.q, static_cast<float>(options_.epsilon));
  }
  s.q_kept = true;
}

void PowerSgdHook::launch(HookBucket& b) {
  if (!compressing()) {
    issue(b, "allreduce", b.buffer);  // averaged at copy-in, as allreduce_hook
    return;
  }
  BucketState& s = state_for(b);
  if (options_.error_feedback) {
    compute(b, "powersgd.error_feedback", [&] { ops::axpy(1.0f, b.buffer, s.input); });
  }
  compute(b, "powersgd.compute_p", [&] {
    prepare_q(b, s);
    for (const Matrix& m : s.matrices) ops::gemm(m.in, false, m.q, false, m.p);
    int64_t at = 0;
    for (size_t k : s.uncompressed) {
      const Tensor& v = b.views[k];
      ops::copy(s.input.flat_view(s.offsets[k], v.shape()),
                s.uncompressed_memory.flat_view(at, v.shape()));
      at += v.numel();
    }
  });
  const auto next = [&] { return static_cast<int>(b.record.collectives.size()); };
  s.uncompressed_at = s.p_at = s.q_at = -1;
  if (s.uncompressed_memory.defined()) {
    s.uncompressed_at = next();
    issue(b, "uncompressed", s.uncompressed_memory);
  }
  if (!s.matrices.empty()) {
    s.p_at = next();
    issue(b, "P", s.p_memory);
  }
}

void PowerSgdHook::advance(HookBucket& b) {
  if (!compressing()) return;
  BucketState& s = *states_.at(b.index);
  const float inv_world = 1.0f / static_cast<float>(pg().size());
  if (s.uncompressed_at >= 0) {
    wait(b, static_cast<size_t>(s.uncompressed_at));
    compute(b, "powersgd.unpack", [&] {
      ops::scale(s.uncompressed_memory, inv_world);
      int64_t at = 0;
      for (size_t k : s.uncompressed) {
        const Tensor& v = b.views[k];
        ops::copy(s.uncompressed_memory.flat_view(at, v.shape()), v);
        at += v.numel();
      }
    });
  }
  if (s.p_at < 0) return;
  wait(b, static_cast<size_t>(s.p_at));
  compute(b, "powersgd.compute_q", [&] {
    for (const Matrix& m : s.matrices) {
      // P was summed, not averaged: orthogonalisation removes the scale.
      ops::orthogonalize_columns(m.p, static_cast<float>(options_.epsilon));
      ops::gemm(m.in, true, m.p, false, m.q);
    }
  });
  s.q_at = static_cast<int>(b.record.collectives.size());
  issue(b, "Q", s.q_memory);
}

void PowerSgdHook::finish(HookBucket& b) {
  if (!compressing()) {
    wait_all(b);
    return;
  }
  BucketState& s = *states_.at(b.index);
  if (s.q_at >= 0) {
    wait(b, static_cast<size_t>(s.q_at));
    compute(b, "powersgd.decompress", [&] {
      ops::scale(s.q_memory, 1.0f / static_cast<float>(pg().size()));
      for (const Matrix& m : s.matrices) {
        // The new error first (input - P Q^T, in place), then the bucket (P Q^T).
        if (options_.error_feedback) ops::gemm(m.p, false, m.q, true, m.in, -1.0f, 1.0f);
        ops::gemm(m.p, false, m.q, true, m.out);
      }
    });
  }
  if (options_.error_feedback) {
    compute(b, "powersgd.error_feedback", [&] {
      for (size_t k : s.uncompressed) {  // input - the average, as PyTorch
        const Tensor& v = b.views[k];
        ops::axpy(-1.0f, v, s.input.flat_view(s.offsets[k], v.shape()));
      }
    });
  }
  if (!options_.warm_start) s.q_kept = false;
}

}  // namespace ddpb::ddp

// Deterministic synthetic datasets.
//
// A sample is a pure function of (seed, index): it is computed on demand from the
// counter-based generator in core/rng.h, never stored, and identical on every rank, thread,
// device and platform. Any rank can therefore produce any sample, the order of fill() calls
// does not matter, and a run can be replayed from a dump of the indices alone.
//
// Every dataset carries a learnable signal, so that the training loss visibly falls and a
// broken gradient path shows up as a flat loss curve.
//
// Threads: fill() and the accessors are const and thread-safe (the data loader calls them
// from its own thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ddpb {

class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  // Shape and dtype of one sample's input.
  virtual Shape x_shape() const = 0;
  virtual DType x_dtype() const = 0;
  // Shape of one sample's target; {} for a scalar class label. Targets are always i32.
  virtual Shape y_shape() const = 0;
  // Writes sample `index` (0 <= index < size()): shape_numel(x_shape()) elements of
  // x_dtype() to `x` and shape_numel(y_shape()) i32 values to `y`.
  virtual void fill(int64_t index, void* x, int32_t* y) const = 0;
};

struct Batch {
  Tensor x;  // [B, ...x_shape], x_dtype
  Tensor y;  // [B, ...y_shape], i32
};

// Allocates a batch of the samples `indices` (in that order) in host memory: page-locked
// (Tensor::empty_pinned) when `pinned`, otherwise on cpu:0. Throws Error when `indices`
// is empty or an index is outside [0, dataset.size()).
Batch make_batch(const Dataset& dataset, const std::vector<int64_t>& indices, bool pinned = false);

// Fills a preallocated host batch (any CPU device, or pinned): `out.x` must be
// [indices.size(), ...x_shape] of x_dtype and `out.y` [indices.size(), ...y_shape] of i32.
void fill_batch(const Dataset& dataset, const std::vector<int64_t>& indices, const Batch& out);

// Classification of Gaussian clusters.
// label = uniform in [0, classes); x = mean[label] + N(0, 1) noise, f32 [features].
// The class means are fixed by the seed, with entries N(0, 1) * kClassSeparation /
// sqrt(2 * features): two means are then kClassSeparation noise standard deviations apart
// on average for any feature count, which a linear layer separates well but not trivially.
class ClassificationDataset final : public Dataset {
 public:
  static constexpr double kClassSeparation = 4.0;

  // Throws UsageError unless size >= 1, features >= 1 and classes >= 2.
  ClassificationDataset(int64_t size, int features, int classes, uint64_t seed);

  int64_t size() const override { return size_; }
  Shape x_shape() const override { return {features_}; }
  DType x_dtype() const override { return DType::F32; }
  Shape y_shape() const override { return {}; }
  void fill(int64_t index, void* x, int32_t* y) const override;

  int features() const { return features_; }
  int classes() const { return classes_; }
  // The label of sample `index` (what fill() writes to y).
  int32_t label(int64_t index) const;
  // The mean of class c: features() floats.
  const float* class_mean(int c) const;

 private:
  int64_t size_;
  int features_;
  int classes_;
  uint64_t seed_;
  std::vector<float> means_;  // [classes, features]
};

// Images for the `resnet` workloads: each class has a colour (a mean per channel, drawn as
// ClassificationDataset's class means with one feature per channel), and an image is its
// class's colour plus N(0, 1) noise on every pixel. x f32 [channels, size, size], y scalar. A
// network that averages over the image (ResNet's global pooling) separates the classes well;
// the noise keeps every pixel's own value uninformative.
class ImageDataset final : public Dataset {
 public:
  // Throws UsageError unless size >= 1, channels >= 1, image_size >= 1 and classes >= 2.
  ImageDataset(int64_t size, int channels, int image_size, int classes, uint64_t seed);

  int64_t size() const override { return colours_.size(); }
  Shape x_shape() const override { return {channels_, image_size_, image_size_}; }
  DType x_dtype() const override { return DType::F32; }
  Shape y_shape() const override { return {}; }
  void fill(int64_t index, void* x, int32_t* y) const override;

 private:
  ClassificationDataset colours_;  // labels and per-class colours
  int channels_;
  int image_size_;
  uint64_t seed_;
};

// Token sequences from a fixed random Markov chain (language modelling, `gpt` workload).
// Each token v has kNumSuccessors successors drawn from the seed (repeats allowed), taken
// with probabilities kSuccessorProbs; a sequence starts at a uniform random token.
// x = tokens[0 .. T-1] and y = tokens[1 .. T], both i32 [T]. The best achievable loss is
// the chain's entropy (about 1.13 nats per token, against ln(vocab) for a blind guess).
class MarkovTokenDataset final : public Dataset {
 public:
  static constexpr int kNumSuccessors = 4;
  static constexpr double kSuccessorProbs[kNumSuccessors] = {0.55, 0.25, 0.12, 0.08};

  // Throws UsageError unless size >= 1, seq_len >= 1 and vocab >= 2.
  MarkovTokenDataset(int64_t size, int seq_len, int vocab, uint64_t seed);

  int64_t size() const override { return size_; }
  Shape x_shape() const override { return {seq_len_}; }
  DType x_dtype() const override { return DType::I32; }
  Shape y_shape() const override { return {seq_len_}; }
  void fill(int64_t index, void* x, int32_t* y) const override;

  int seq_len() const { return seq_len_; }
  int vocab() const { return vocab_; }
  // The kNumSuccessors successors of `token`, in the order of kSuccessorProbs.
  const int32_t* successors(int32_t token) const;

 private:
  int64_t size_;
  int seq_len_;
  int vocab_;
  uint64_t seed_;
  std::vector<int32_t> successors_;  // [vocab, kNumSuccessors]
};

// Bags of ids for the communication-bound `embed` workload (a large embedding table whose
// gradient is mostly sparse). The class is drawn first; each id is, with probability
// kSignalFraction, a uniform id among those with id % classes == class, otherwise a
// uniform id in [0, vocab). x i32 [ids_per_sample], y scalar.
class BagOfIdsDataset final : public Dataset {
 public:
  static constexpr double kSignalFraction = 0.75;

  // Throws UsageError unless size >= 1, ids_per_sample >= 1, classes >= 2 and
  // vocab >= classes (every class needs at least one id of its own).
  BagOfIdsDataset(int64_t size, int ids_per_sample, int vocab, int classes, uint64_t seed);

  int64_t size() const override { return size_; }
  Shape x_shape() const override { return {ids_per_sample_}; }
  DType x_dtype() const override { return DType::I32; }
  Shape y_shape() const override { return {}; }
  void fill(int64_t index, void* x, int32_t* y) const override;

  int ids_per_sample() const { return ids_per_sample_; }
  int vocab() const { return vocab_; }
  int classes() const { return classes_; }

 private:
  int64_t size_;
  int ids_per_sample_;
  int vocab_;
  int classes_;
  uint64_t seed_;
};

}  // namespace ddpb

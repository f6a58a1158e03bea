// The synthetic datasets, one per workload family: deterministic (Note [Samples are functions
// of (seed, epoch, index)], in data/dataset.h; they ignore the epoch), and each with a learnable
// signal, so that the training loss visibly falls and a broken gradient path shows up as a flat
// loss curve.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ddpb {

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
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override;

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
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override;

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
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override;

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
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override;

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

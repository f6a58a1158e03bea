#include "data/synthetic.h"

#include <cmath>

#include "core/check.h"
#include "core/rng.h"

namespace ddpb {
namespace {

// rng streams: one per kind of draw, so that, e.g., the class means never share random
// numbers with the per-sample noise. The values are arbitrary but fixed forever: changing
// one changes every dataset.
constexpr uint64_t kClassMeanStream = 0xC1A5'0001ull;
constexpr uint64_t kClassLabelStream = 0xC1A5'0002ull;
constexpr uint64_t kClassNoiseStream = 0xC1A5'0003ull;
constexpr uint64_t kMarkovSuccessorStream = 0x3A2C'0001ull;
constexpr uint64_t kMarkovStartStream = 0x3A2C'0002ull;
constexpr uint64_t kMarkovStepStream = 0x3A2C'0003ull;
constexpr uint64_t kBagLabelStream = 0xBA60'0001ull;
constexpr uint64_t kBagIdStream = 0xBA60'0002ull;
constexpr uint64_t kImageNoiseStream = 0x1A6E'0001ull;

// A stream private to one sample: the draws of sample i are rng(seed, sample_stream, k)
// for k = 0, 1, ..., which keeps (sample, position) pairs from ever colliding.
uint64_t sample_stream(uint64_t seed, uint64_t kind, int64_t index) {
  return rng_bits(seed, kind, static_cast<uint64_t>(index));
}

void check_index(const char* dataset, int64_t index, int64_t size) {
  DDPB_CHECK(index >= 0 && index < size)
      << dataset << ": sample index " << index << " is outside [0, " << size << ")";
}

}  // namespace

ClassificationDataset::ClassificationDataset(int64_t size, int features, int classes, uint64_t seed)
    : size_(size), features_(features), classes_(classes), seed_(seed) {
  DDPB_USAGE_CHECK(size >= 1 && features >= 1 && classes >= 2)
      << "ClassificationDataset: need size >= 1, features >= 1 and classes >= 2, got size " << size
      << ", features " << features << ", classes " << classes;
  const double scale = kClassSeparation / std::sqrt(2.0 * features);
  means_.resize(static_cast<size_t>(classes) * static_cast<size_t>(features));
  for (size_t i = 0; i < means_.size(); ++i) {
    means_[i] = static_cast<float>(scale * rng_normal(seed_, kClassMeanStream, i));
  }
}

const float* ClassificationDataset::class_mean(int c) const {
  DDPB_CHECK(c >= 0 && c < classes_)
      << "ClassificationDataset: class " << c << " is outside [0, " << classes_ << ")";
  return means_.data() + static_cast<size_t>(c) * static_cast<size_t>(features_);
}

int32_t ClassificationDataset::label(int64_t index) const {
  check_index("ClassificationDataset", index, size_);
  return static_cast<int32_t>(rng_below(seed_, kClassLabelStream, static_cast<uint64_t>(index),
                                        static_cast<uint64_t>(classes_)));
}

void ClassificationDataset::fill(int64_t index, int64_t /*epoch*/, void* x, int32_t* y) const {
  const int32_t label = this->label(index);
  const float* mean = class_mean(label);
  const uint64_t stream = sample_stream(seed_, kClassNoiseStream, index);
  auto* out = static_cast<float*>(x);
  // The cheap normal: this loop runs for every feature of every sample on the loader thread.
  const uint64_t key = rng_bits(seed_, stream, 0);
  for (int j = 0; j < features_; ++j)
    out[j] = mean[j] + rng_normal_fast(key, static_cast<uint64_t>(j));
  *y = label;
}

// ---- ImageDataset ----------------------------------------------------------------------

ImageDataset::ImageDataset(int64_t size, int channels, int image_size, int classes, uint64_t seed)
    : colours_(size, channels, classes, seed),
      channels_(channels),
      image_size_(image_size),
      seed_(seed) {
  DDPB_USAGE_CHECK(image_size >= 1) << "ImageDataset: image size " << image_size;
}

void ImageDataset::fill(int64_t index, int64_t /*epoch*/, void* x, int32_t* y) const {
  *y = colours_.label(index);
  const float* mean = colours_.class_mean(*y);
  const uint64_t key = rng_bits(seed_, sample_stream(seed_, kImageNoiseStream, index), 0);
  const int64_t plane = int64_t{image_size_} * image_size_;
  auto* out = static_cast<float*>(x);
  for (int64_t ch = 0; ch < channels_; ++ch) {
    for (int64_t j = 0; j < plane; ++j) {
      const int64_t at = ch * plane + j;
      out[at] = mean[ch] + rng_normal_fast(key, static_cast<uint64_t>(at));
    }
  }
}

// ---- MarkovTokenDataset ---------------------------------------------------------------

MarkovTokenDataset::MarkovTokenDataset(int64_t size, int seq_len, int vocab, uint64_t seed)
    : size_(size), seq_len_(seq_len), vocab_(vocab), seed_(seed) {
  DDPB_USAGE_CHECK(size >= 1 && seq_len >= 1 && vocab >= 2)
      << "MarkovTokenDataset: need size >= 1, seq_len >= 1 and vocab >= 2, got size " << size
      << ", seq_len " << seq_len << ", vocab " << vocab;
  successors_.resize(static_cast<size_t>(vocab) * kNumSuccessors);
  for (size_t i = 0; i < successors_.size(); ++i) {
    successors_[i] = static_cast<int32_t>(
        rng_below(seed_, kMarkovSuccessorStream, i, static_cast<uint64_t>(vocab)));
  }
}

const int32_t* MarkovTokenDataset::successors(int32_t token) const {
  DDPB_CHECK(token >= 0 && token < vocab_)
      << "MarkovTokenDataset: token " << token << " is outside [0, " << vocab_ << ")";
  return successors_.data() + static_cast<size_t>(token) * kNumSuccessors;
}

void MarkovTokenDataset::fill(int64_t index, int64_t /*epoch*/, void* x, int32_t* y) const {
  check_index("MarkovTokenDataset", index, size_);
  auto* xs = static_cast<int32_t*>(x);
  const uint64_t stream = sample_stream(seed_, kMarkovStepStream, index);
  auto token = static_cast<int32_t>(rng_below(
      seed_, kMarkovStartStream, static_cast<uint64_t>(index), static_cast<uint64_t>(vocab_)));
  for (int t = 0; t < seq_len_; ++t) {
    xs[t] = token;
    const double u = rng_uniform(seed_, stream, static_cast<uint64_t>(t));
    // Walk the cumulative distribution; the last successor also absorbs rounding.
    int k = 0;
    double cumulative = kSuccessorProbs[0];
    while (k + 1 < kNumSuccessors && u >= cumulative) cumulative += kSuccessorProbs[++k];
    token = successors_[static_cast<size_t>(token) * kNumSuccessors + static_cast<size_t>(k)];
    y[t] = token;
  }
}

// ---- BagOfIdsDataset ------------------------------------------------------------------

BagOfIdsDataset::BagOfIdsDataset(int64_t size, int ids_per_sample, int vocab, int classes,
                                 uint64_t seed)
    : size_(size), ids_per_sample_(ids_per_sample), vocab_(vocab), classes_(classes), seed_(seed) {
  DDPB_USAGE_CHECK(size >= 1 && ids_per_sample >= 1 && classes >= 2 && vocab >= classes)
      << "BagOfIdsDataset: need size >= 1, ids_per_sample >= 1, classes >= 2 and "
      << "vocab >= classes, got size " << size << ", ids_per_sample " << ids_per_sample
      << ", vocab " << vocab << ", classes " << classes;
}

void BagOfIdsDataset::fill(int64_t index, int64_t /*epoch*/, void* x, int32_t* y) const {
  check_index("BagOfIdsDataset", index, size_);
  const auto label = static_cast<int32_t>(rng_below(
      seed_, kBagLabelStream, static_cast<uint64_t>(index), static_cast<uint64_t>(classes_)));
  // Ids congruent to the label modulo classes: label, label + classes, ... < vocab.
  const auto own_ids = static_cast<uint64_t>((vocab_ - 1 - label) / classes_ + 1);
  const uint64_t stream = sample_stream(seed_, kBagIdStream, index);
  auto* ids = static_cast<int32_t*>(x);
  for (int j = 0; j < ids_per_sample_; ++j) {
    const auto k = static_cast<uint64_t>(j);
    if (rng_uniform(seed_, stream, 2 * k) < kSignalFraction) {
      ids[j] =
          label + classes_ * static_cast<int32_t>(rng_below(seed_, stream, 2 * k + 1, own_ids));
    } else {
      ids[j] =
          static_cast<int32_t>(rng_below(seed_, stream, 2 * k + 1, static_cast<uint64_t>(vocab_)));
    }
  }
  *y = label;
}

}  // namespace ddpb

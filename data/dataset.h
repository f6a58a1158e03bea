// Datasets: what one sample is (the Dataset interface), batches of samples in host memory,
// and the errors of a sample that cannot be read.
//
// Note [Samples are functions of (seed, epoch, index)]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A sample is a pure function of the dataset's seed, the epoch and its index: the synthetic
// datasets compute it on demand from the counter-based generator in core/rng.h; the datasets
// on disk (token shards, image folders) read it, and draw their augmentations (crop, flip)
// from (seed, epoch, index) too. Any rank, any worker thread, in any order, therefore makes the
// same sample: a batch depends on (seed, epoch, rank, step) alone, never on how many workers
// the loader has or on timing, and a run can be replayed from a dump of the indices.
//
// Threads: fill() and the accessors are const and thread-safe (the loader's workers call them
// at once).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ddpb {

// What a dataset on disk reads, for the start-up lines and the record (summary.loader): its
// files in reading order (token shards, or an image folder's class folders) with how much each
// holds, and what a folder held that is not read.
struct DataFile {
  std::string path;
  int64_t count = 0;    // tokens of a shard, images of a class folder
  int64_t samples = 0;  // the samples it gives (Note [Token windows]; one per image)
};
struct DataFiles {
  std::string unit;                        // what `count` counts: "tokens" or "images"
  std::vector<DataFile> files;             // read, in order
  std::optional<std::string> split;        // "train" or "val" (data/token_shards.h), when chosen
  std::vector<std::string> left_out;       // files of the folder not read (the other split)
  std::optional<int64_t> meta_vocab_size;  // nanoGPT's meta.pkl beside the shards
};

// The lines `run` and `data bench` print about `files`: the totals, the split and meta.pkl's
// vocabulary (the rest of a line the caller starts), then a line for each of the first
// kMaxListedFiles files with their counts, a count of the rest, and what was left out.
inline constexpr size_t kMaxListedFiles = 8;
std::string describe_data_files(const DataFiles& files);

class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  // Shape and dtype of one sample's input.
  virtual Shape x_shape() const = 0;
  virtual DType x_dtype() const = 0;
  // Shape of one sample's target; {} for a scalar class label. Targets are always i32.
  virtual Shape y_shape() const = 0;
  // Writes sample `index` (0 <= index < size()) as seen in `epoch` (Note [Samples are
  // functions of (seed, epoch, index)]): shape_numel(x_shape()) elements of x_dtype() to `x`
  // and shape_numel(y_shape()) i32 values to `y`. Throws BadSampleError when the sample's file
  // cannot be read or decoded (the loader may skip it: LoaderOptions::on_bad_sample).
  virtual void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const = 0;
  // What the samples come from, for the record ("synthetic", "tokens", "imagefolder").
  virtual std::string source() const { return "synthetic"; }
  // The bytes read from disk to make sample `index` (0 for synthetic data).
  virtual int64_t sample_bytes(int64_t /*index*/) const { return 0; }
  // The files read (empty for synthetic data).
  virtual DataFiles data_files() const { return {}; }
};

// A sample that cannot be read: a corrupt or truncated file, named with the reason. Found while
// training, so a run-time error (exit 1), not a usage error: the flags were fine, and the run
// may have trained for hours before reaching the file (--on-bad-sample skip goes on instead).
class BadSampleError : public Error {
 public:
  using Error::Error;
};

struct Batch {
  Tensor x;  // [B, ...x_shape], x_dtype
  Tensor y;  // [B, ...y_shape], i32
};

// Allocates a batch of the samples `indices` (in that order) in host memory: page-locked
// (Tensor::empty_pinned) when `pinned`, otherwise on cpu:0. Throws Error when `indices`
// is empty or an index is outside [0, dataset.size()).
Batch make_batch(const Dataset& dataset, const std::vector<int64_t>& indices, int64_t epoch = 0,
                 bool pinned = false);

// Fills a preallocated host batch (any CPU device, or pinned) with the samples `indices` as
// seen in `epoch`: `out.x` must be [indices.size(), ...x_shape] of x_dtype and `out.y`
// [indices.size(), ...y_shape] of i32.
void fill_batch(const Dataset& dataset, const std::vector<int64_t>& indices, int64_t epoch,
                const Batch& out);

}  // namespace ddpb

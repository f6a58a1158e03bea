#include "data/dataset.h"

#include <fmt/core.h>

#include <cmath>

#include "base/printable.h"
#include "core/check.h"
#include "core/progress.h"
#include "core/rng.h"

namespace ddpb {

Dataset::~Dataset() = default;

std::string describe_data_files(const DataFiles& d) {
  int64_t count = 0, samples = 0;
  for (const DataFile& f : d.files) count += f.count, samples += f.samples;
  const char* what = d.unit == "images" ? "class folder(s)" : "file(s)";
  std::string text =
      fmt::format("{} {}, {} {}, {} samples", d.files.size(), what, count, d.unit, samples);
  if (d.split) text += ", split " + *d.split;
  if (d.meta_vocab_size) text += fmt::format(", meta.pkl vocab_size {}", *d.meta_vocab_size);
  text += "\n";
  for (size_t i = 0; i < d.files.size() && i < kMaxListedFiles; ++i) {
    const DataFile& f = d.files[i];
    // A file's name can hold anything a terminal obeys: escaped (issue 48, P21).
    text += fmt::format("  {}: {} {}, {} samples\n", printable(f.path), f.count, d.unit, f.samples);
  }
  if (d.files.size() > kMaxListedFiles) {
    int64_t rest = 0;
    for (size_t i = kMaxListedFiles; i < d.files.size(); ++i) rest += d.files[i].count;
    text += fmt::format("  ... and {} more {}, {} {}\n", d.files.size() - kMaxListedFiles, what,
                        rest, d.unit);
  }
  if (!d.left_out.empty()) {
    text += "  left out (not the split read; --data-split chooses):";
    for (size_t i = 0; i < d.left_out.size() && i < kMaxListedFiles; ++i)
      text += " " + printable(d.left_out[i]);
    if (d.left_out.size() > kMaxListedFiles)
      text += fmt::format(" and {} more", d.left_out.size() - kMaxListedFiles);
    text += "\n";
  }
  return text;
}

void fill_batch(const Dataset& dataset, const std::vector<int64_t>& indices, int64_t epoch,
                const Batch& out) {
  const auto batch = static_cast<int64_t>(indices.size());
  Shape x_shape = dataset.x_shape();
  Shape y_shape = dataset.y_shape();
  x_shape.insert(x_shape.begin(), batch);
  y_shape.insert(y_shape.begin(), batch);
  DDPB_CHECK(out.x.defined() && out.y.defined()) << "fill_batch: undefined output tensors";
  DDPB_CHECK(out.x.device().is_cpu() && out.y.device().is_cpu())
      << "fill_batch: outputs must be in host memory, got " << out.x.describe() << " and "
      << out.y.describe();
  DDPB_CHECK(out.x.shape() == x_shape && out.x.dtype() == dataset.x_dtype())
      << "fill_batch: x is " << out.x.describe() << ", expected " << dtype_name(dataset.x_dtype())
      << shape_str(x_shape);
  DDPB_CHECK(out.y.shape() == y_shape && out.y.dtype() == DType::I32)
      << "fill_batch: y is " << out.y.describe() << ", expected i32" << shape_str(y_shape);
  const int64_t n = dataset.size();
  for (int64_t idx : indices) {
    DDPB_CHECK(idx >= 0 && idx < n)
        << "fill_batch: sample index " << idx << " is outside [0, " << n << ")";
  }
  const size_t x_bytes =
      static_cast<size_t>(shape_numel(dataset.x_shape())) * dtype_size(dataset.x_dtype());
  const int64_t y_count = shape_numel(dataset.y_shape());
  auto* x = static_cast<char*>(out.x.raw_data());
  int32_t* y = out.y.data<int32_t>();
  for (int64_t i = 0; i < batch; ++i) {
    dataset.fill(indices[static_cast<size_t>(i)], epoch, x + static_cast<size_t>(i) * x_bytes,
                 y + i * y_count);
    progress::note_op();  // a sample is progress too (Note [Step watchdog])
  }
}

Batch make_batch(const Dataset& dataset, const std::vector<int64_t>& indices, int64_t epoch,
                 bool pinned) {
  DDPB_CHECK(!indices.empty()) << "make_batch: no sample indices";
  Shape x_shape = dataset.x_shape();
  Shape y_shape = dataset.y_shape();
  x_shape.insert(x_shape.begin(), static_cast<int64_t>(indices.size()));
  y_shape.insert(y_shape.begin(), static_cast<int64_t>(indices.size()));
  Batch b;
  if (pinned) {
    b.x = Tensor::empty_pinned(x_shape, dataset.x_dtype());
    b.y = Tensor::empty_pinned(y_shape, DType::I32);
  } else {
    b.x = Tensor::empty(x_shape, dataset.x_dtype(), Device::cpu());
    b.y = Tensor::empty(y_shape, DType::I32, Device::cpu());
  }
  fill_batch(dataset, indices, epoch, b);
  return b;
}

}  // namespace ddpb

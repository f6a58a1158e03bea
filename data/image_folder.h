// Image folders for the ResNet workloads: torchvision's ImageFolder layout (root/<class>/...,
// one folder per class, classes numbered in sorted name order, the files of a class found by a
// sorted walk of its folder), JPEGs decoded with libjpeg-turbo at the smallest scale the crop
// allows (Note [Decode-time downscaling]) and transformed as ImageNet training is
// (data/transforms.h). Sample i is the i-th file of that order, as in torchvision, so that a
// ddpbench run and a PyTorch job given the same sampler read the same images.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ddpb {

struct ImageFile {
  std::string path;
  int32_t label = 0;
  int64_t bytes = 0;  // its size when scanned
};

// The classes (sorted folder names) and files of an ImageFolder root. Throws UsageError naming
// the folder: no class folder, a class folder without a JPEG, or an image in a format other
// than JPEG (ddpbench decodes JPEG only; convert with any tool, e.g. `mogrify -format jpg`).
struct ImageFolderIndex {
  std::vector<std::string> classes;
  std::vector<ImageFile> files;
  // Symbolic links back to a folder above them, not walked (issue 48, P13).
  std::vector<std::string> skipped_loops;
};
ImageFolderIndex scan_image_folder(const std::string& root);

class ImageFolderDataset final : public Dataset {
 public:
  // `out`: the side of the square output (the workload's image size); `max_classes`: the
  // model's classes (a folder with more is refused). `raw_bytes`: x is u8 [3, out, out],
  // normalized on the device (--normalize-on-device), else normalized f32.
  ImageFolderDataset(const std::string& root, int out, int max_classes, uint64_t seed,
                     bool raw_bytes);

  int64_t size() const override { return static_cast<int64_t>(index_.files.size()); }
  Shape x_shape() const override { return {3, out_, out_}; }
  DType x_dtype() const override { return raw_bytes_ ? DType::U8 : DType::F32; }
  Shape y_shape() const override { return {}; }
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override;
  std::string source() const override { return "imagefolder"; }
  int64_t sample_bytes(int64_t index) const override {
    return index_.files[static_cast<size_t>(index)].bytes;
  }
  // One entry per class folder, with its images.
  DataFiles data_files() const override;

  const ImageFolderIndex& index() const { return index_; }

 private:
  std::string root_;
  ImageFolderIndex index_;
  int out_;
  uint64_t seed_;
  bool raw_bytes_;
};

}  // namespace ddpb

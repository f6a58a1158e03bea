#include "data/image_folder.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/input_file.h"
#include "base/printable.h"
#include "core/check.h"
#include "core/rng.h"
#include "data/jpeg.h"
#include "data/transforms.h"

namespace ddpb {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxImageBytes = size_t{64} << 20;
constexpr uint64_t kAugmentStream = 0x1A6E'A060ull;  // the crop and flip draws

std::string lower_extension(const fs::path& p) {
  std::string e = p.extension().string();
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

bool is_jpeg(const std::string& ext) {
  return ext == ".jpg" || ext == ".jpeg";
}

// torchvision's IMG_EXTENSIONS that are not JPEG.
bool is_other_image(const std::string& ext) {
  for (const char* e : {".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}) {
    if (ext == e) return true;
  }
  return false;
}

// Every folder under `dir` (itself included, symbolic links followed), as os.walk finds them,
// except a link back to a folder above it (the same device and inode as one on its path),
// which is listed in `loops` instead: two such links in a class folder once made the walk
// exponential, and it never ended (issue 48, P13). A link to a folder elsewhere is walked,
// as torchvision's os.walk(followlinks=True) walks it.
using FolderId = std::pair<dev_t, ino_t>;
void folders_under(const fs::path& dir, std::vector<std::string>& out, std::vector<FolderId>& above,
                   std::vector<std::string>& loops) {
  struct stat st {};
  DDPB_USAGE_CHECK(::stat(dir.c_str(), &st) == 0)
      << "cannot read " << dir.string() << ": " << std::strerror(errno);
  const FolderId id{st.st_dev, st.st_ino};
  if (std::find(above.begin(), above.end(), id) != above.end()) {
    loops.push_back(dir.string());
    return;
  }
  above.push_back(id);
  out.push_back(dir.string());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec)) folders_under(e.path(), out, above, loops);
  }
  DDPB_USAGE_CHECK(!ec) << "cannot list " << dir.string() << ": " << ec.message();
  above.pop_back();
}

// The JPEGs under `dir` in the order of torchvision's make_dataset: `sorted(os.walk(dir))`
// (the folders as path strings, in code-point order, which is UTF-8's byte order), and each
// folder's file names sorted.
void walk_sorted(const fs::path& dir, int32_t label, std::vector<ImageFile>& out,
                 std::vector<std::string>& loops) {
  std::vector<std::string> folders;
  std::vector<FolderId> above;
  folders_under(dir, folders, above, loops);
  std::sort(folders.begin(), folders.end());
  for (const std::string& folder : folders) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      if (!e.is_directory(ec)) names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const fs::path f = fs::path(folder) / name;
      const std::string ext = lower_extension(f);
      DDPB_USAGE_CHECK(!is_other_image(ext))
          << f.string() << ": ddpbench decodes JPEG only (convert the folder's images to JPEG)";
      if (!is_jpeg(ext)) continue;
      std::error_code size_ec;
      const auto bytes = fs::file_size(f, size_ec);
      out.push_back({f.string(), label, size_ec ? 0 : static_cast<int64_t>(bytes)});
    }
  }
}

}  // namespace

ImageFolderIndex scan_image_folder(const std::string& root) {
  std::error_code ec;
  DDPB_USAGE_CHECK(fs::is_directory(root, ec)) << root << ": not a folder";
  ImageFolderIndex index;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (e.is_directory(ec)) index.classes.push_back(e.path().filename().string());
  }
  DDPB_USAGE_CHECK(!ec) << "cannot list " << root << ": " << ec.message();
  DDPB_USAGE_CHECK(!index.classes.empty())
      << root << ": no class folder (an image folder holds one folder of JPEGs per class)";
  std::sort(index.classes.begin(), index.classes.end());
  for (size_t c = 0; c < index.classes.size(); ++c) {
    const size_t before = index.files.size();
    walk_sorted(fs::path(root) / index.classes[c], static_cast<int32_t>(c), index.files,
                index.skipped_loops);
    DDPB_USAGE_CHECK(index.files.size() > before)
        << (fs::path(root) / index.classes[c]).string() << ": a class folder with no JPEG image";
  }
  return index;
}

ImageFolderDataset::ImageFolderDataset(const std::string& root, int out, int max_classes,
                                       uint64_t seed, bool raw_bytes)
    : root_(root), index_(scan_image_folder(root)), out_(out), seed_(seed), raw_bytes_(raw_bytes) {
  DDPB_USAGE_CHECK(out >= 1) << "image folder: the output size must be positive";
  DDPB_USAGE_CHECK(static_cast<int>(index_.classes.size()) <= max_classes)
      << root << ": " << index_.classes.size() << " classes, but the model classifies "
      << max_classes;
  if (!index_.skipped_loops.empty()) {
    std::fprintf(stderr,
                 "ddpbench: %s: did not walk %zu symbolic link(s) back to a folder above them, "
                 "such as %s\n",
                 printable(root).c_str(), index_.skipped_loops.size(),
                 printable(index_.skipped_loops.front()).c_str());
  }
}

DataFiles ImageFolderDataset::data_files() const {
  DataFiles d;
  d.unit = "images";
  for (const std::string& name : index_.classes)
    d.files.push_back({(fs::path(root_) / name).string(), 0, 0});
  for (const ImageFile& f : index_.files) {
    DataFile& c = d.files[static_cast<size_t>(f.label)];
    ++c.count, ++c.samples;
  }
  return d;
}

void ImageFolderDataset::fill(int64_t index, int64_t epoch, void* x, int32_t* y) const {
  DDPB_CHECK(index >= 0 && index < size())
      << "ImageFolderDataset: sample " << index << " is outside [0, " << size() << ")";
  const ImageFile& file = index_.files[static_cast<size_t>(index)];
  std::string bytes;
  try {
    bytes = read_input_file(file.path, kMaxImageBytes);
  } catch (const InputFileError& e) {
    throw BadSampleError(e.what());
  }
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const JpegSize full = jpeg_size(data, bytes.size(), file.path);
  // The augmentation draws of (seed, epoch, index).
  const uint64_t key = rng_bits(seed_ + static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ull,
                                kAugmentStream, static_cast<uint64_t>(index));
  const auto draw = [&](int k) {
    return rng_uniform(key, kAugmentStream, static_cast<uint64_t>(k));
  };
  const CropBox box = random_resized_crop_box(full.width, full.height, draw);
  const bool flip = draw(100) < 0.5;
  const JpegScale scale = jpeg_scale_for(box.width, box.height, out_, out_);
  const RgbImage image = decode_jpeg(data, bytes.size(), scale, file.path);
  crop_resize_normalize(image, full.width, full.height, box, out_, flip,
                        raw_bytes_ ? nullptr : static_cast<float*>(x),
                        raw_bytes_ ? static_cast<uint8_t*>(x) : nullptr);
  *y = file.label;
}

}  // namespace ddpb

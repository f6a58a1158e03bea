// Image folders (data/image_folder.h): torchvision's ImageFolder order, the bad folders and
// files named, the JPEG decode with decode-time downscaling, and the transform held against
// torchvision's own resized crop (PIL), element for element within rounding.
#include "data/image_folder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../util/error_of.h"
#include "../util/temp_dir.h"
#include "core/check.h"
#include "data/jpeg.h"
#include "data/make_data.h"
#include "data/transforms.h"

namespace ddpb {
namespace {

using testing::error_of;

namespace fs = std::filesystem;
using testing::TempDir;

// A w x h JPEG of smooth gradients and a little grain (real photographs' mix), at `path`.
void write_jpeg(const std::string& path, int w, int h, int seed = 0) {
  RgbImage img;
  img.width = w, img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>((x * 255) / w);
      p[1] = static_cast<uint8_t>((y * 255) / h);
      p[2] =
          static_cast<uint8_t>(128 + 60 * std::sin(0.05 * (x + y + seed)) + ((x * 7 + y * 13) % 9));
    }
  }
  const std::vector<uint8_t> bytes = encode_jpeg(img, 90);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// torchvision: classes are the sorted folder names; a class's files are sorted(os.walk()),
// folders by path (so "sub" < "sub-x" < "sub/deep"), names sorted in each.
TEST(ImageFolder, ClassesAreSortedFoldersAndFilesAreSortedWalks) {
  TempDir dir("imagefolder_order");
  for (const char* d : {"b", "a", "a/sub", "a/sub/deep", "a/sub-x"})
    fs::create_directories(dir / d);
  for (const char* f :
       {"b/x.jpg", "a/z.jpg", "a/m.JPEG", "a/sub/y.jpeg", "a/sub/deep/k.jpg", "a/sub-x/j.jpg"})
    write_jpeg(dir / f, 40, 30);
  std::ofstream(dir / "a/notes.txt") << "not an image";
  const ImageFolderIndex index = scan_image_folder(dir.str());
  EXPECT_EQ(index.classes, (std::vector<std::string>{"a", "b"}));
  std::vector<std::string> names;
  for (const ImageFile& f : index.files) names.push_back(fs::relative(f.path, dir.path()).string());
  EXPECT_EQ(names, (std::vector<std::string>{"a/m.JPEG", "a/z.jpg", "a/sub/y.jpeg", "a/sub-x/j.jpg",
                                             "a/sub/deep/k.jpg", "b/x.jpg"}));
  EXPECT_EQ(index.files.back().label, 1);
  EXPECT_GT(index.files.front().bytes, 0);
}

// Issue 48, P12: CMYK JPEGs (ImageNet has a few dozen) were refused as corrupt; torchvision reads
// them through Pillow. They decode as Pillow decodes them (Note [CMYK JPEGs]).
TEST(ImageFolder, CmykJpegsDecodeAsPillowDoes) {
  const auto bytes = [](const std::string& name) {
    std::ifstream in(std::string(DDPB_DATA_FIXTURES) + "/" + name, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  };
  const std::vector<uint8_t> jpeg = bytes("cmyk_adobe.jpg"), pillow = bytes("cmyk_adobe.pil.rgb");
  ASSERT_EQ(pillow.size(), 12u * 10 * 3);
  const RgbImage img = decode_jpeg(jpeg.data(), jpeg.size(), {1, 1}, "cmyk_adobe.jpg");
  ASSERT_EQ(img.width, 12);
  ASSERT_EQ(img.height, 10);
  EXPECT_EQ(img.rgb, pillow);
}

// Issue 48, P13: links back to a folder above made the walk exponential; they are skipped and
// listed, while a link to a folder elsewhere is walked as os.walk(followlinks=True) walks it.
TEST(ImageFolder, SymbolicLinkLoopsAreSkippedAndNamed) {
  TempDir dir("imagefolder_loops"), elsewhere("imagefolder_elsewhere");
  fs::create_directories(dir / "cat/x");
  write_jpeg(dir / "cat/x/1.jpg", 40, 30);
  write_jpeg(elsewhere / "2.jpg", 40, 30);
  fs::create_directory_symlink("..", dir / "cat/x/up");
  fs::create_directory_symlink(elsewhere.path(), dir / "cat/x/other");
  fs::create_directories(dir / "dog");
  write_jpeg(dir / "dog/3.jpg", 40, 30);
  fs::create_directory_symlink("../dog", dir / "dog/self");  // dog/self is dog itself
  const ImageFolderIndex index = scan_image_folder(dir.str());
  const auto below = [&](const std::string& path) { return path.substr(dir.str().size() + 1); };
  std::vector<std::string> names, loops;
  for (const ImageFile& f : index.files) names.push_back(below(f.path));
  for (const std::string& l : index.skipped_loops) loops.push_back(below(l));
  std::sort(loops.begin(), loops.end());
  EXPECT_EQ(names, (std::vector<std::string>{"cat/x/1.jpg", "cat/x/other/2.jpg", "dog/3.jpg"}));
  EXPECT_EQ(loops, (std::vector<std::string>{"cat/x/up", "dog/self"}));
}

// Issue 26: an empty folder, a class folder without images, an image that is not a JPEG, and
// more classes than the model has are named.
TEST(ImageFolder, BadFoldersAreNamed) {
  TempDir dir("imagefolder_bad");
  EXPECT_NE(error_of<UsageError>([&] { scan_image_folder(dir.str()); }).find("no class folder"),
            std::string::npos);
  fs::create_directories(dir / "cat");
  fs::create_directories(dir / "dog");
  write_jpeg(dir / "cat/1.jpg", 40, 30);
  EXPECT_NE(error_of<UsageError>([&] {
              scan_image_folder(dir.str());
            }).find(dir / "dog" + ": a class folder with no JPEG image"),
            std::string::npos);
  std::ofstream(dir / "dog/1.png") << "png";
  EXPECT_NE(error_of<UsageError>([&] {
              scan_image_folder(dir.str());
            }).find(dir / "dog/1.png" + ": ddpbench decodes JPEG only"),
            std::string::npos);
  fs::remove(dir / "dog/1.png");
  write_jpeg(dir / "dog/1.jpg", 40, 30);
  EXPECT_NE(error_of<UsageError>([&] {
              ImageFolderDataset(dir.str(), 32, 1, 0, false);
            }).find("2 classes, but the model classifies 1"),
            std::string::npos);
}

// What a run reads from an image folder (the record's summary.loader.files): one entry per
// class folder, in class order, with its images.
TEST(ImageFolder, DataFilesAreTheClassFoldersWithTheirImages) {
  TempDir dir("imagefolder_files");
  for (const char* f : {"cat/1.jpg", "cat/2.jpg", "cat/deep/3.jpg", "ant/1.jpg"}) {
    fs::create_directories(fs::path(dir / f).parent_path());
    write_jpeg(dir / f, 40, 30);
  }
  const DataFiles d = ImageFolderDataset(dir.str(), 32, 10, 0, false).data_files();
  EXPECT_EQ(d.unit, "images");
  ASSERT_EQ(d.files.size(), 2u);
  EXPECT_EQ(d.files[0].path, dir / "ant");
  EXPECT_EQ(d.files[0].count, 1);
  EXPECT_EQ(d.files[1].path, dir / "cat");
  EXPECT_EQ(d.files[1].count, 3);
  EXPECT_EQ(d.files[1].samples, 3);
  EXPECT_FALSE(d.split);
  EXPECT_NE(describe_data_files(d).find("2 class folder(s), 4 images, 4 samples\n"),
            std::string::npos)
      << describe_data_files(d);
}

// A corrupt or truncated JPEG is a BadSampleError naming the file (the loader fails or skips).
TEST(ImageFolder, CorruptAndTruncatedJpegsAreNamed) {
  TempDir dir("imagefolder_corrupt");
  fs::create_directories(dir / "c");
  write_jpeg(dir / "c/0.jpg", 200, 150);
  std::ofstream(dir / "c/1.jpg") << "this is not a JPEG at all";
  const std::string whole = testing::read_file_bytes(dir / "c/0.jpg");
  std::ofstream(dir / "c/2.jpg", std::ios::binary) << whole.substr(0, whole.size() / 2);
  ImageFolderDataset d(dir.str(), 32, 10, 0, false);
  std::vector<float> x(3 * 32 * 32);
  int32_t y = -1;
  EXPECT_NO_THROW(d.fill(0, 0, x.data(), &y));
  for (int64_t i : {1, 2}) {
    try {
      d.fill(i, 0, x.data(), &y);
      ADD_FAILURE() << "sample " << i << " decoded";
    } catch (const BadSampleError& e) {
      EXPECT_NE(std::string(e.what()).find(d.index().files[static_cast<size_t>(i)].path),
                std::string::npos)
          << e.what();
    }
  }
}

// Note [Decode-time downscaling]: the smallest libjpeg-turbo scale keeping the crop at least
// the output's size on both sides.
TEST(Jpeg, DecodeScaleIsTheSmallestThatKeepsTheCropsPixels) {
  const auto scale = [](int cw, int ch, int out) {
    const JpegScale s = jpeg_scale_for(cw, ch, out, out);
    return static_cast<double>(s.num) / s.denom;
  };
  EXPECT_EQ(scale(2000, 1800, 224), 1.0 / 8);  // 250 x 225 at 1/8
  EXPECT_EQ(scale(500, 400, 224), 5.0 / 8);    // 312 x 250 at 5/8; 1/2 gives 200 rows
  EXPECT_EQ(scale(224, 224, 224), 1.0);
  EXPECT_EQ(scale(100, 80, 224), 1.0);  // smaller than the output: upsampled
  TempDir dir("jpeg_scale");
  write_jpeg(dir / "a.jpg", 800, 600);
  const std::string bytes = testing::read_file_bytes(dir / "a.jpg");
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const RgbImage quarter = decode_jpeg(p, bytes.size(), {1, 4}, "a.jpg");
  EXPECT_EQ(quarter.width, 200);
  EXPECT_EQ(quarter.height, 150);
}

TEST(Transforms, CropBoxesFollowTorchvisionsRules) {
  int fallbacks = 0;
  for (int s = 0; s < 2000; ++s) {
    std::mt19937_64 gen(static_cast<uint64_t>(s));
    auto draw = [&](int) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; };
    const CropBox b = random_resized_crop_box(500, 375, draw);
    ASSERT_GT(b.width, 0);
    ASSERT_GT(b.height, 0);
    ASSERT_LE(b.left + b.width, 500);
    ASSERT_LE(b.top + b.height, 375);
    const double area = static_cast<double>(b.width) * b.height / (500.0 * 375.0);
    EXPECT_GE(area, 0.075);
    fallbacks += b.width == 500 && b.height == 375;
  }
  // One try fits about 3 times in 4, so 10 all miss about once in a million.
  EXPECT_LT(fallbacks, 5) << "the 10 tries fit far more often than they fall back";
  // A panorama no try can fit (ratio far above 4/3): the centre crop at 4/3.
  const CropBox wide = random_resized_crop_box(1000, 100, [](int) { return 0.999; });
  EXPECT_EQ(wide.height, 100);
  EXPECT_EQ(wide.width, 133);
  EXPECT_EQ(wide.left, (1000 - 133) / 2);
}

// The same sample is the same crop in any worker and order, another epoch another crop.
TEST(ImageFolder, SamplesAreFunctionsOfSeedEpochAndIndex) {
  TempDir dir("imagefolder_det");
  ImageDataSpec spec;
  spec.out = dir / "d";
  spec.classes = 2, spec.images_per_class = 3, spec.min_side = 64, spec.max_side = 96;
  make_image_data(spec);
  ImageFolderDataset d(spec.out, 32, 10, 7, false);
  EXPECT_EQ(d.size(), 6);
  std::vector<float> a(3 * 32 * 32), b(a.size()), c(a.size());
  int32_t ya = -1, yb = -1;
  d.fill(4, 1, a.data(), &ya);
  d.fill(4, 1, b.data(), &yb);
  d.fill(4, 2, c.data(), &yb);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(ya, 1);
  ImageFolderDataset bytes(spec.out, 32, 10, 7, true);
  EXPECT_EQ(bytes.x_dtype(), DType::U8);
  std::vector<uint8_t> u(a.size());
  bytes.fill(4, 1, u.data(), &ya);
  for (size_t i = 0; i < u.size(); i += 97) {
    const size_t ch = i / (32 * 32);
    EXPECT_NEAR((u[i] / 255.0 - kImageNetMean[ch]) / kImageNetStd[ch], a[i], 0.01) << i;
  }
}

// Issue 26: the transform is torchvision's: the same crop of the same JPEG, resized by
// ddpbench and by torchvision (PIL's bilinear), normalized, agrees to within rounding.
TEST(Transforms, ResizedCropEqualsTorchvisionsWithinRounding) {
  TempDir dir("crop_vs_torchvision");
  write_jpeg(dir / "a.jpg", 480, 360, 3);
  const std::string bytes = testing::read_file_bytes(dir / "a.jpg");
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const RgbImage full = decode_jpeg(p, bytes.size(), {1, 1}, "a.jpg");
  struct Case {
    CropBox box;
    int out;
    bool flip;
  } cases[] = {{{20, 40, 300, 400}, 224, false},
               {{0, 0, 360, 480}, 224, true},
               {{100, 200, 90, 120}, 224, false},
               {{10, 10, 200, 150}, 64, true}};
  for (const Case& c : cases) {
    std::vector<float> ours(3 * static_cast<size_t>(c.out) * c.out);
    crop_resize_normalize(full, full.width, full.height, c.box, c.out, c.flip, ours.data(),
                          nullptr);
    const std::string out = dir / "torch.f32";
    const std::string cmd = std::string(DDPB_TEST_PYTHON) + " " + DDPB_CROP_SCRIPT + " " +
                            (dir / "a.jpg") + " " + std::to_string(c.box.top) + " " +
                            std::to_string(c.box.left) + " " + std::to_string(c.box.height) + " " +
                            std::to_string(c.box.width) + " " + std::to_string(c.out) + " " +
                            (c.flip ? "1" : "0") + " " + out + " 2>&1";
    const int status = std::system(cmd.c_str());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "no torchvision";
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
    const std::string raw = testing::read_file_bytes(out);
    ASSERT_EQ(raw.size(), ours.size() * 4);
    const auto* theirs = reinterpret_cast<const float*>(raw.data());
    double worst = 0, sum = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(ours[i] - theirs[i])));
      sum += std::fabs(static_cast<double>(ours[i] - theirs[i]));
    }
    // One 8-bit step is 1 / (255 * 0.224) = 0.0175 after normalization; PIL rounds to 8 bits
    // between its two passes, ddpbench keeps floats.
    EXPECT_LT(worst, 3 * 0.0176) << "box " << c.box.left << "," << c.box.top;
    EXPECT_LT(sum / ours.size(), 0.0176) << "box " << c.box.left << "," << c.box.top;
  }
}

}  // namespace
}  // namespace ddpb

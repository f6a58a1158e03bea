#include "data/make_data.h"

#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/atomic_file.h"
#include "core/check.h"
#include "core/rng.h"
#include "data/jpeg.h"
#include "data/synthetic.h"
#include "data/token_shards.h"

namespace ddpb {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kImageStream = 0x1A6E'0DA7ull;

// The output folder: created, its parent must exist, and it must not hold files already.
// Note [A dataset appears whole]
// A `data make` that fails half-way (a full disk, an error) once left a partial dataset at
// --out, which --data then accepted (issue 48, P27). The files are written into a staging
// folder, ".partial-<pid>-<n>", and appear at OUT only once every file is there: where OUT
// exists (an empty folder, perhaps a mount point or a link to one) the staging folder is made
// inside it and its entries move up at the end; where OUT does not exist, the staging folder
// is made beside it and renamed to OUT. Both stay on OUT's file system. A failure removes the
// staging folder and leaves OUT as it was. (A process killed outright leaves the staging
// folder, whose name says what it is.)
class StagedFolder {
 public:
  explicit StagedFolder(const std::string& out) : out_(out) {
    DDPB_USAGE_CHECK(!out.empty()) << "data make: give --out DIR";
    std::error_code ec;
    const fs::path target = fs::weakly_canonical(fs::absolute(out), ec);
    DDPB_USAGE_CHECK(!ec && target.has_parent_path() && fs::is_directory(target.parent_path()))
        << "--out " << out << ": the folder " << fs::absolute(out).parent_path().string()
        << " does not exist";
    inside_ = fs::exists(target, ec);
    DDPB_USAGE_CHECK(!inside_ || (fs::is_directory(target, ec) && fs::is_empty(target, ec)))
        << "--out " << out << " is not empty";
    static int made = 0;
    const std::string name =
        ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(made++);
    staging_ = inside_ ? target / name : target.parent_path() / (target.filename().string() + name);
    target_ = target;
    // mkdir, not mkdtemp: the dataset gets the mode any folder made here gets (the umask's).
    DDPB_USAGE_CHECK(::mkdir(staging_.c_str(), 0777) == 0)
        << "--out " << out << ": cannot make " << staging_.string() << ": " << std::strerror(errno);
  }
  ~StagedFolder() {
    if (staging_.empty()) return;
    std::error_code ignored;
    fs::remove_all(staging_, ignored);
  }
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  std::string path() const { return staging_.string(); }
  // Every file is written: they appear at OUT.
  void commit() {
    std::error_code ec;
    if (inside_) {
      for (const auto& e : fs::directory_iterator(staging_, ec)) {
        fs::rename(e.path(), target_ / e.path().filename(), ec);
        if (ec) break;
      }
      if (!ec) fs::remove(staging_, ec);
    } else {
      fs::rename(staging_, target_, ec);
    }
    DDPB_CHECK(!ec) << "data make: cannot move the dataset from " << staging_.string() << " to "
                    << out_ << ": " << ec.message();
    staging_.clear();
  }

 private:
  std::string out_;
  fs::path target_, staging_;
  bool inside_ = false;  // OUT exists: the staging folder is inside it
};

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  try {
    write_file_atomic(path.string(),
                      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                      "image");
  } catch (const WriteFileError& e) {
    throw Error(e.what());
  }
}

// One image of class `c`: a smooth two-wave field in the class's colour, a few shapes, and
// per-pixel grain (so that JPEG keeps some high frequencies, as in photographs).
RgbImage class_image(const ImageDataSpec& spec, int c, int i) {
  const uint64_t key = rng_bits(spec.seed, kImageStream, static_cast<uint64_t>(c) * 1000003 + i);
  const auto u = [&](int k) { return rng_uniform(key, kImageStream, static_cast<uint64_t>(k)); };
  RgbImage img;
  img.width = spec.min_side + static_cast<int>(u(0) * (spec.max_side - spec.min_side + 1));
  img.height = spec.min_side + static_cast<int>(u(1) * (spec.max_side - spec.min_side + 1));
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  const double hue = 2 * M_PI * c / std::max(1, spec.classes);
  const double base[3] = {128 + 80 * std::cos(hue), 128 + 80 * std::cos(hue + 2.1),
                          128 + 80 * std::cos(hue + 4.2)};
  const double fx = 0.01 + 0.05 * ((c * 7) % 11) / 11.0 + 0.01 * u(2);
  const double fy = 0.01 + 0.05 * ((c * 3) % 7) / 7.0 + 0.01 * u(3);
  const double cx = u(4) * img.width, cy = u(5) * img.height, radius = 30 + u(6) * 90;
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      const double wave = 40 * std::sin(fx * x + 6 * u(7)) * std::cos(fy * y + 6 * u(8));
      const bool disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) < radius * radius;
      const uint64_t pixel_key =
          rng_bits(key, kImageStream, static_cast<uint64_t>(y) * img.width + x);
      for (int ch = 0; ch < 3; ++ch) {
        const double grain = 48 * (((pixel_key >> (16 * ch)) & 0xFFFF) / 65535.0 - 0.5);
        double v = base[ch] + wave + grain + (disc ? 60 * std::cos(hue + ch) : 0);
        img.rgb[(static_cast<size_t>(y) * img.width + x) * 3 + ch] =
            static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return img;
}

}  // namespace

std::string make_token_data(const TokenDataSpec& spec) {
  DDPB_USAGE_CHECK(spec.tokens >= 2 && spec.shards >= 1 && spec.vocab >= 2 && spec.vocab <= 65536)
      << "data make tokens: need --tokens >= 2, --shards >= 1 and --vocab from 2 to 65536";
  DDPB_USAGE_CHECK(spec.llmc || spec.shards == 1)
      << "data make tokens: nanoGPT's format is one train.bin (--shards 1)";
  StagedFolder out(spec.out);  // Note [A dataset appears whole]
  // One long walk of the chain, cut into shards.
  const MarkovTokenDataset chain(1, 1, spec.vocab, spec.seed);
  std::vector<uint16_t> walk(static_cast<size_t>(spec.tokens));
  int32_t t = static_cast<int32_t>(
      rng_below(spec.seed, kImageStream, 0, static_cast<uint64_t>(spec.vocab)));
  for (int64_t i = 0; i < spec.tokens; ++i) {
    walk[static_cast<size_t>(i)] = static_cast<uint16_t>(t);
    const double p = rng_uniform(spec.seed, kImageStream + 1, static_cast<uint64_t>(i));
    int k = 0;
    for (double acc = MarkovTokenDataset::kSuccessorProbs[0];
         k + 1 < MarkovTokenDataset::kNumSuccessors && p >= acc;
         acc += MarkovTokenDataset::kSuccessorProbs[++k]) {
    }
    t = chain.successors(t)[k];
  }
  const int64_t per = spec.tokens / spec.shards;
  for (int s = 0; s < spec.shards; ++s) {
    const int64_t first = s * per, last = s + 1 == spec.shards ? spec.tokens : first + per;
    const std::vector<uint16_t> part(walk.begin() + first, walk.begin() + last);
    const std::string name = spec.llmc ? fmt::format("shard_{:06d}.bin", s) : "train.bin";
    write_token_shard((fs::path(out.path()) / name).string(), part, spec.llmc);
  }
  out.commit();
  return fmt::format("{} tokens (vocabulary {}) in {} {} shard(s) in {}", spec.tokens, spec.vocab,
                     spec.shards, spec.llmc ? "llm.c" : "nanoGPT", spec.out);
}

std::string make_image_data(const ImageDataSpec& spec) {
  DDPB_USAGE_CHECK(spec.classes >= 1 && spec.images_per_class >= 1 && spec.min_side >= 8 &&
                   spec.max_side >= spec.min_side && spec.max_side <= 8192 && spec.quality >= 1 &&
                   spec.quality <= 100)
      << "data make imagefolder: need --classes >= 1, --images-per-class >= 1, sides from 8 to "
         "8192 (min <= max) and --quality from 1 to 100";
  StagedFolder out(spec.out);  // Note [A dataset appears whole]
  int64_t bytes = 0;
  for (int c = 0; c < spec.classes; ++c) {
    const fs::path dir = fs::path(out.path()) / fmt::format("class_{:03d}", c);
    fs::create_directory(dir);
    for (int i = 0; i < spec.images_per_class; ++i) {
      const std::vector<uint8_t> jpeg = encode_jpeg(class_image(spec, c, i), spec.quality);
      bytes += static_cast<int64_t>(jpeg.size());
      write_bytes(dir / fmt::format("img_{:05d}.jpg", i), jpeg);
    }
  }
  out.commit();
  const int64_t n = static_cast<int64_t>(spec.classes) * spec.images_per_class;
  return fmt::format("{} JPEGs in {} classes, {:.0f} KB each on average, in {}", n, spec.classes,
                     bytes / 1e3 / n, spec.out);
}

}  // namespace ddpb

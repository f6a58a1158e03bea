#include "data/jpeg.h"

#include <turbojpeg.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/check.h"
#include "data/dataset.h"

namespace ddpb {
namespace {

// One TurboJPEG handle per thread and direction: handles are not thread-safe, and making one
// per image would cost more than a small decode.
struct Handle {
  explicit Handle(tjhandle h) : h(h) {}
  ~Handle() {
    if (h) tjDestroy(h);
  }
  tjhandle h;
};

tjhandle decompressor() {
  thread_local Handle handle(tjInitDecompress());
  DDPB_CHECK(handle.h != nullptr) << "libjpeg-turbo: cannot create a decompressor";
  return handle.h;
}

tjhandle compressor() {
  thread_local Handle handle(tjInitCompress());
  DDPB_CHECK(handle.h != nullptr) << "libjpeg-turbo: cannot create a compressor";
  return handle.h;
}

[[noreturn]] void bad(const std::string& name, tjhandle h, const char* what) {
  throw BadSampleError(name + ": " + what + " (libjpeg-turbo: " + tjGetErrorStr2(h) + ")");
}

}  // namespace

JpegSize jpeg_size(const uint8_t* data, size_t size, const std::string& name) {
  tjhandle h = decompressor();
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  if (size == 0 || tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &w, &ht, &subsamp,
                                       &colorspace) != 0) {
    if (size == 0) throw BadSampleError(name + ": not a JPEG (an empty file)");
    bad(name, h, "not a readable JPEG");
  }
  return {w, ht};
}

JpegScale jpeg_scale_for(int crop_w, int crop_h, int out_w, int out_h) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  JpegScale best{1, 1};
  for (int i = 0; i < count; ++i) {
    const JpegScale s{factors[i].num, factors[i].denom};
    if (s.num * best.denom >= best.num * s.denom) continue;  // not smaller than the best
    // The crop at this scale, rounded down as the crop's pixels are: at least the output.
    if (crop_w * s.num / s.denom >= out_w && crop_h * s.num / s.denom >= out_h) best = s;
  }
  return best;
}

// Note [CMYK JPEGs]
// ImageNet holds a few dozen CMYK JPEGs (Photoshop's, with an Adobe marker, some YCCK-coded);
// libjpeg-turbo will not turn them into RGB, and torchvision reads them through Pillow. So
// they decode to CMYK (libjpeg turns YCCK into CMYK) and become RGB as Pillow makes them:
// its JPEG reader takes the samples as Adobe's inverted CMYK ("CMYK;I"), and its conversion
// to RGB is, with k' = 255 - K, R = k' - C·k'/255 (rounded as its MULDIV255), likewise G and B.
namespace {

void cmyk_to_rgb_as_pillow(const std::vector<uint8_t>& cmyk, std::vector<uint8_t>& rgb) {
  const auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (size_t p = 0, n = cmyk.size() / 4; p < n; ++p) {
    const int nk = cmyk[4 * p + 3];  // 255 - (255 - raw K): the inverted sample is k' itself
    for (int c = 0; c < 3; ++c) {
      const int ink = 255 - cmyk[4 * p + static_cast<size_t>(c)];
      rgb[3 * p + static_cast<size_t>(c)] =
          static_cast<uint8_t>(std::clamp(nk - muldiv255(ink, nk), 0, 255));
    }
  }
}

}  // namespace

RgbImage decode_jpeg(const uint8_t* data, size_t size, JpegScale scale, const std::string& name) {
  const JpegSize full = jpeg_size(data, size, name);
  RgbImage img;
  img.width = scale.apply(full.width);
  img.height = scale.apply(full.height);
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  tjhandle h = decompressor();
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &w, &ht, &subsamp, &colorspace);
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;  // Note [CMYK JPEGs]
  std::vector<uint8_t> four;
  if (cmyk) four.resize(static_cast<size_t>(img.width) * img.height * 4);
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), cmyk ? four.data() : img.rgb.data(),
                    img.width, img.width * (cmyk ? 4 : 3), img.height, cmyk ? TJPF_CMYK : TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0) {
    bad(name, h,
        tjGetErrorCode(h) == TJERR_WARNING ? "a truncated or damaged JPEG" : "a corrupt JPEG");
  }
  if (cmyk) cmyk_to_rgb_as_pillow(four, img.rgb);
  return img;
}

std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality) {
  tjhandle h = compressor();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (tjCompress2(h, image.rgb.data(), image.width, image.width * 3, image.height, TJPF_RGB, &out,
                  &size, TJSAMP_420, quality, TJFLAG_ACCURATEDCT) != 0) {
    const std::string why = tjGetErrorStr2(h);
    tjFree(out);
    DDPB_FAIL() << "libjpeg-turbo cannot encode a " << image.width << "x" << image.height
                << " image: " << why;
  }
  std::vector<uint8_t> bytes(out, out + size);
  tjFree(out);
  return bytes;
}

}  // namespace ddpb

#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace ddpb {
namespace {

// One output pixel's taps along one axis: source pixels [first, first + weights.size()).
struct Taps {
  int first = 0;
  std::vector<float> weights;
};

// PIL's bilinear resampling coefficients (ImagingResample's precompute_coeffs): the triangle
// filter, widened by the scale when shrinking so that every source pixel contributes
// (antialiasing), over the source interval [lo, hi) mapped onto `out` pixels.
std::vector<Taps> bilinear_taps(double lo, double hi, int source, int out) {
  const double scale = (hi - lo) / out;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;  // the triangle's support is 1
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int i = 0; i < out; ++i) {
    const double center = lo + (i + 0.5) * scale;
    const int first = std::max(0, static_cast<int>(std::floor(center - support)));
    const int last = std::min(source, static_cast<int>(std::ceil(center + support)));
    Taps& t = taps[static_cast<size_t>(i)];
    t.first = first;
    double total = 0;
    for (int j = first; j < last; ++j) {
      const double d = std::fabs((j + 0.5 - center) / filter_scale);
      const double w = d < 1.0 ? 1.0 - d : 0.0;
      t.weights.push_back(static_cast<float>(w));
      total += w;
    }
    if (total <= 0) {  // a sliver of the image: the nearest pixel
      t.first = std::clamp(static_cast<int>(center), 0, source - 1);
      t.weights.assign(1, 1.0f);
      total = 1;
    }
    for (float& w : t.weights) w = static_cast<float>(w / total);
  }
  return taps;
}

}  // namespace

void crop_resize_normalize(const RgbImage& image, int full_w, int full_h, const CropBox& box,
                           int out, bool flip, float* out_f32, uint8_t* out_u8) {
  DDPB_CHECK((out_f32 == nullptr) != (out_u8 == nullptr)) << "one output, f32 or u8";
  const double sx = static_cast<double>(image.width) / full_w;
  const double sy = static_cast<double>(image.height) / full_h;
  const auto cols = bilinear_taps(box.left * sx, (box.left + box.width) * sx, image.width, out);
  const auto rows = bilinear_taps(box.top * sy, (box.top + box.height) * sy, image.height, out);
  int row_lo = image.height, row_hi = 0;
  for (const Taps& t : rows) {
    row_lo = std::min(row_lo, t.first);
    row_hi = std::max(row_hi, t.first + static_cast<int>(t.weights.size()));
  }
  // Horizontal pass over the source rows the vertical pass reads: [row_lo, row_hi) x out x 3.
  std::vector<float> across(static_cast<size_t>(row_hi - row_lo) * out * 3, 0.0f);
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = image.rgb.data() + static_cast<size_t>(y) * image.width * 3;
    float* dst = across.data() + static_cast<size_t>(y - row_lo) * out * 3;
    for (int x = 0; x < out; ++x) {
      const Taps& t = cols[static_cast<size_t>(x)];
      float r = 0, g = 0, b = 0;
      const uint8_t* p = src + static_cast<size_t>(t.first) * 3;
      for (float w : t.weights) {
        r += w * p[0], g += w * p[1], b += w * p[2];
        p += 3;
      }
      dst[3 * x] = r, dst[3 * x + 1] = g, dst[3 * x + 2] = b;
    }
  }
  // Vertical pass, the flip and the layout: CHW, normalized or as bytes.
  const size_t plane = static_cast<size_t>(out) * out;
  for (int y = 0; y < out; ++y) {
    const Taps& t = rows[static_cast<size_t>(y)];
    for (int x = 0; x < out; ++x) {
      float c[3] = {0, 0, 0};
      const float* p = across.data() + (static_cast<size_t>(t.first - row_lo) * out + x) * 3;
      for (float w : t.weights) {
        c[0] += w * p[0], c[1] += w * p[1], c[2] += w * p[2];
        p += static_cast<size_t>(out) * 3;
      }
      const size_t at = static_cast<size_t>(y) * out + (flip ? out - 1 - x : x);
      for (int ch = 0; ch < 3; ++ch) {
        const float v = std::clamp(c[ch], 0.0f, 255.0f);
        if (out_f32) {
          out_f32[ch * plane + at] = (v / 255.0f - kImageNetMean[ch]) / kImageNetStd[ch];
        } else {
          out_u8[ch * plane + at] = static_cast<uint8_t>(std::lround(v));
        }
      }
    }
  }
}

}  // namespace ddpb

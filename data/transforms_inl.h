// random_resized_crop_box, a template so that the caller's draws inline (data/transforms.h).
#pragma once

#include <algorithm>
#include <cmath>

namespace ddpb {

template <class Draw>
CropBox random_resized_crop_box(int width, int height, Draw&& draw) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + (1.0 - 0.08) * draw(4 * attempt));
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * draw(4 * attempt + 1));
    const int w = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      // torch.randint(0, height - h + 1): uniform over the placements.
      const int top =
          std::min(height - h, static_cast<int>(draw(4 * attempt + 2) * (height - h + 1)));
      const int left =
          std::min(width - w, static_cast<int>(draw(4 * attempt + 3) * (width - w + 1)));
      return {top, left, h, w};
    }
  }
  // Fallback: the centre crop, at the nearest bound of the ratio.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = static_cast<int>(std::lround(w / (3.0 / 4.0)));
  } else if (in_ratio > 4.0 / 3.0) {
    w = static_cast<int>(std::lround(h * (4.0 / 3.0)));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace ddpb

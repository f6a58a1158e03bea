// The ImageNet training transform, as torchvision defines it: RandomResizedCrop(size, scale
// (0.08, 1), ratio (3/4, 4/3)), RandomHorizontalFlip(0.5), ToTensor, Normalize(ImageNet's mean
// and std). The random draws come from (seed, epoch, index) (Note [Samples are functions of
// (seed, epoch, index)]), not from torch's generator: the same sample gets the same crop in
// every worker, but not the crop PyTorch would draw.
#pragma once

#include <cstdint>

#include "data/jpeg.h"

namespace ddpb {

// A crop in full-size pixels: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
};

// torchvision's RandomResizedCrop.get_params: up to 10 tries of an area fraction uniform in
// [0.08, 1] and a log-uniform aspect ratio in [3/4, 4/3], a try fitting the image placed
// uniformly; else the centre crop at the ratio's nearest bound. `draw(k)` is the k-th uniform
// draw in [0, 1) of this sample.
template <class Draw>
CropBox random_resized_crop_box(int width, int height, Draw&& draw);

// The crop of `image` at `box` (in full-size pixels; the image may be a decode at `scale` of a
// full_w x full_h image), resized to out x out by PIL's bilinear filter (antialiased when
// shrinking), flipped left-right when `flip`, written CHW: as floats normalized with ImageNet's
// mean and std (`out_f32`), or as the raw bytes (`out_u8`, normalized later on the device).
// Exactly one of out_f32 and out_u8 is non-null.
void crop_resize_normalize(const RgbImage& image, int full_w, int full_h, const CropBox& box,
                           int out, bool flip, float* out_f32, uint8_t* out_u8);

inline constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

}  // namespace ddpb

#include "data/transforms_inl.h"

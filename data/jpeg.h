// JPEG decoding and encoding with libjpeg-turbo (its TurboJPEG API), for image folders.
//
// Note [Decode-time downscaling]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A JPEG can be decoded at 1/2, 1/4 or 1/8 of its size (and other M/8 factors) for a fraction
// of the work, by leaving out DCT coefficients. RandomResizedCrop keeps a region of the image
// and resizes it to the output size; when that region, decoded at a smaller scale, still has
// at least the output's pixels on both sides, the smaller decode loses nothing the resize would
// keep. So the crop is chosen on the full-size dimensions (read from the header alone), the
// smallest scale that keeps the crop at least out_size on both sides is decoded, and the crop
// is taken, scaled, from that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddpb {

// Interleaved 8-bit RGB.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
};

struct JpegSize {
  int width = 0, height = 0;
};

// A decode scale num / denom (libjpeg-turbo's factors: 1/8 ... 2/1).
struct JpegScale {
  int num = 1, denom = 1;
  int apply(int dimension) const { return (dimension * num + denom - 1) / denom; }
};

// The dimensions from the header alone. Throws BadSampleError naming `name`.
JpegSize jpeg_size(const uint8_t* data, size_t size, const std::string& name);
// The smallest scale of libjpeg-turbo's (Note [Decode-time downscaling]) at which a crop of
// crop_w x crop_h full-size pixels still spans at least out_w x out_h; 1/1 when none is smaller.
JpegScale jpeg_scale_for(int crop_w, int crop_h, int out_w, int out_h);
// Decodes at `scale`. A corrupt or truncated file (any libjpeg-turbo error or warning, as PIL
// refuses a truncated image) throws BadSampleError naming `name` and the reason.
RgbImage decode_jpeg(const uint8_t* data, size_t size, JpegScale scale, const std::string& name);
// Encodes RGB at `quality` (1-100) with 4:2:0 chroma, as most photographs are stored.
std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality);

}  // namespace ddpb

// `ddpbench data make`: realistic datasets on disk for tests and demos, in the formats
// `--data` reads (data/token_shards.h, data/image_folder.h).
#pragma once

#include <cstdint>
#include <string>

namespace ddpb {

struct TokenDataSpec {
  std::string out;           // a folder, created (its parent must exist)
  int64_t tokens = 1 << 20;  // in all
  int shards = 2;
  int vocab = 512;
  bool llmc = true;  // llm.c's shards (else one nanoGPT train.bin)
  uint64_t seed = 0;
};

// Tokens from a fixed random Markov chain (data/synthetic.h's MarkovTokenDataset chain), so
// that a model learns from them; shards named like llm.c's (shard_000000.bin ...) or nanoGPT's
// train.bin. Returns a one-line description of what was written.
std::string make_token_data(const TokenDataSpec& spec);

struct ImageDataSpec {
  std::string out;
  int classes = 10;
  int images_per_class = 20;
  int min_side = 300, max_side = 500;  // each image's sides, drawn in this range
  int quality = 95;                    // JPEG quality
  uint64_t seed = 0;
};

// An ImageFolder (out/class_000/img_00000.jpg ...) of JPEGs of ImageNet-like sizes and
// quality (hundreds of pixels a side, about 100 KB each): a smooth field of the class's colour
// and frequency with shapes and grain, so that classes differ and files compress as photos do.
// Returns a one-line description (count, mean file size).
std::string make_image_data(const ImageDataSpec& spec);

}  // namespace ddpb

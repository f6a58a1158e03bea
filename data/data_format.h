// The formats of datasets on disk (`--data DIR`, `--data-format`), and telling them apart.
#pragma once

#include <string>

#include "base/named_enum.h"

namespace ddpb {

enum class DataFormat { Tokens, ImageFolder };
constexpr NameTable<DataFormat, 2> enum_names(DataFormat) {
  return {{{"tokens", DataFormat::Tokens}, {"imagefolder", DataFormat::ImageFolder}}};
}

// The split of a folder of token shards a run reads (`--data-split`, data/token_shards.h):
// nanoGPT's prepare.py writes train.bin and val.bin side by side, llm.c's scripts
// NAME_train_*.bin and NAME_val_*.bin.
enum class DataSplit { Train, Val };
constexpr NameTable<DataSplit, 2> enum_names(DataSplit) {
  return {{{"train", DataSplit::Train}, {"val", DataSplit::Val}}};
}

// Tokens for a .bin file or a folder holding *.bin files; an image folder for a folder of
// folders. Throws UsageError naming the path when it is neither, or does not exist.
DataFormat detect_data_format(const std::string& path);

}  // namespace ddpb

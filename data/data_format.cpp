#include "data/data_format.h"

#include <filesystem>

#include "core/check.h"

namespace ddpb {

DataFormat detect_data_format(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  DDPB_USAGE_CHECK(!ec && fs::exists(st)) << "--data " << path << ": no such file or folder";
  if (fs::is_regular_file(st)) {
    DDPB_USAGE_CHECK(fs::path(path).extension() == ".bin")
        << "--data " << path << ": a file of tokens is a .bin shard (nanoGPT's or llm.c's)";
    return DataFormat::Tokens;
  }
  DDPB_USAGE_CHECK(fs::is_directory(st)) << "--data " << path << ": not a file or a folder";
  bool bins = false, folders = false;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    bins = bins || (e.is_regular_file(ec) && e.path().extension() == ".bin");
    folders = folders || e.is_directory(ec);
  }
  DDPB_USAGE_CHECK(!ec) << "--data " << path << ": cannot list it: " << ec.message();
  if (bins) return DataFormat::Tokens;
  DDPB_USAGE_CHECK(folders) << "--data " << path
                            << ": an empty folder (no token shard *.bin, no class folder)";
  return DataFormat::ImageFolder;
}

}  // namespace ddpb

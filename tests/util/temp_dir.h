// TempDir: a fresh folder of the test's own, from mkdtemp (so two tests, or two runs of one,
// never share it), removed with everything in it when the object goes.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddpb::testing {

class TempDir {
 public:
  // `tag` names the folder (ddpb_<tag>_XXXXXX under $TMPDIR or /tmp), for whoever finds one.
  explicit TempDir(const std::string& tag) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("ddpb_" + tag + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp(" + pattern + "): " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The whole of a file, as bytes ("" when it cannot be read).
inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names in a folder, sorted: what a test expects to be left there.
inline std::vector<std::string> folder_entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ddpb::testing

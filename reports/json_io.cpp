#include "reports/json_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ddpb::reports {

void write_text_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw ReportError("cannot create " + tmp + ": " + std::strerror(errno));
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw ReportError("cannot write " + path + ": " + std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw ReportError("cannot flush " + path + ": " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw ReportError("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

void write_json_atomic(const std::string& path, const nlohmann::json& value) {
  write_text_atomic(path, value.dump(2) + "\n");
}

nlohmann::json read_json(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw ReportError("cannot read " + path + ": " + ec.message());
  if (size > max_bytes) {
    throw ReportError(path + " is " + std::to_string(size) + " bytes, over the limit of " +
                      std::to_string(max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportError("cannot open " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_report_text(buf.str(), path);
}

nlohmann::json parse_report_text(const std::string& text, const std::string& name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number beyond double's range (1e400) throws out_of_range.406.
    throw ReportError(name + " is not valid JSON: " + e.what());
  }
}

}  // namespace ddpb::reports

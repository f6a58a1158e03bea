// A minimal well-formedness check for the XHTML-compatible HTML and the SVG the reports write:
// every element opened is closed in order, void elements are written self-closed (<br />),
// attribute values are quoted, and every '&' starts an entity. Not a full XML parser: enough
// to catch an unescaped '<' from record text or a tag left open.
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace ddpb::testing {

// "" when well-formed, else what is wrong and where (byte offset and the surrounding text).
inline std::string xml_problem(const std::string& s) {
  static const std::set<std::string> kVoid = {"area",   "base",  "br",    "col",  "embed",
                                              "hr",     "img",   "input", "link", "meta",
                                              "source", "track", "wbr"};
  std::vector<std::string> open;
  auto at = [&](size_t pos, const std::string& what) {
    const size_t from = pos > 40 ? pos - 40 : 0;
    return what + " at byte " + std::to_string(pos) + ": ..." + s.substr(from, 80) + "...";
  };
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      size_t j = i + 1;
      if (j < s.size() && s[j] == '#') ++j;
      const size_t name = j;
      while (j < s.size() && std::isalnum(static_cast<unsigned char>(s[j]))) ++j;
      if (j == name || j >= s.size() || s[j] != ';') return at(i, "bare '&'");
      i = j + 1;
      continue;
    }
    if (s[i] == '>') return at(i, "stray '>'");
    if (s[i] != '<') {
      ++i;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t end = s.find("-->", i);
      if (end == std::string::npos) return at(i, "unclosed comment");
      i = end + 3;
      continue;
    }
    if (s.compare(i, 9, "<!DOCTYPE") == 0) {
      i = s.find('>', i) + 1;
      continue;
    }
    const bool closing = i + 1 < s.size() && s[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-' || s[j] == ':'))
      ++j;
    const std::string name = s.substr(name_start, j - name_start);
    if (name.empty()) return at(i, "'<' not starting a tag");
    // Attributes: name="value" pairs; quoted values may hold anything but their quote.
    bool self_closing = false;
    while (true) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size()) return at(i, "unterminated tag <" + name);
      if (s[j] == '>') break;
      if (s.compare(j, 2, "/>") == 0) {
        self_closing = true;
        ++j;
        break;
      }
      if (closing) return at(j, "attribute in closing tag </" + name);
      const size_t attr = j;
      while (j < s.size() && s[j] != '=' && s[j] != '>' &&
             !std::isspace(static_cast<unsigned char>(s[j])))
        ++j;
      if (j == attr || j >= s.size() || s[j] != '=') return at(attr, "attribute without a value");
      ++j;
      if (j >= s.size() || (s[j] != '"' && s[j] != '\'')) return at(j, "unquoted attribute value");
      const size_t end = s.find(s[j], j + 1);
      if (end == std::string::npos) return at(j, "unterminated attribute value");
      if (s.substr(j + 1, end - j - 1).find('<') != std::string::npos)
        return at(j, "'<' inside an attribute value");
      j = end + 1;
    }
    i = j + 1;
    if (closing) {
      if (open.empty() || open.back() != name)
        return at(i,
                  "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">"));
      open.pop_back();
    } else if (kVoid.count(name) && !self_closing) {
      return at(i, "void element <" + name + "> not self-closed");
    } else if (!self_closing) {
      open.push_back(name);
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + "> at the end";
  return "";
}

}  // namespace ddpb::testing

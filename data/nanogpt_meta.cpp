#include "data/nanogpt_meta.h"

#include <fmt/core.h>

#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "base/input_file.h"
#include "core/check.h"

namespace ddpb {
namespace {

// The opcodes read (Python's Lib/pickletools.py names and documents each); kStop ends.
enum Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kBinFloat = 'G',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kBinUnicode = 'X',
  kAppend = 'a',
  kAppends = 'e',
  kDict = 'd',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kSetItems = 'u',
  kEmptyTuple = ')',
  kEmptyList = ']',
  kEmptyDict = '}',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kMemoize = 0x94,
  kFrame = 0x95,
};

// What a pickled object is, as far as finding vocab_size needs.
enum class Kind { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict };

struct Value {
  Kind kind = Kind::None;
  int64_t i = 0;                // Int, Bool
  std::string s;                // Str, Bytes
  std::vector<uint32_t> items;  // Tuple, List; Dict: key, value, key, value ...
};

[[noreturn]] void meta_error(const std::string& what, const std::string& reason) {
  throw UsageError(
      fmt::format("{}: cannot read vocab_size: {} (nanoGPT's prepare.py pickles a "
                  "dict with an int 'vocab_size')",
                  what, reason));
}

// The stack machine of Note [A bounded pickle reader].
class PickleReader {
 public:
  PickleReader(std::string_view bytes, const std::string& what) : bytes_(bytes), what_(what) {}

  // Runs to STOP; returns the index of the pickled object.
  uint32_t run() {
    while (pos_ < bytes_.size()) {
      op_at_ = pos_;
      const uint8_t op = u8();
      if (op == kStop) return pop();
      step(op);
    }
    fail("it ends before its STOP opcode");
  }

  const Value& at(uint32_t index) const { return arena_[index]; }

  [[noreturn]] void fail(const std::string& reason) const {
    meta_error(what_, fmt::format("{} at byte {}", reason, op_at_));
  }

 private:
  // Objects from the bytes that follow the opcode, and the memo.
  void step(uint8_t op) {
    switch (op) {
      case kProto:
        return version();
      case kFrame:
        take(8);
        return;  // framing only: the bytes are read as they come
      case kEmptyDict:
        return push(make(Kind::Dict));
      case kEmptyList:
        return push(make(Kind::List));
      case kEmptyTuple:
        return push(make(Kind::Tuple));
      case kMark:
        bounded(marks_.size(), "marks");
        return marks_.push_back(stack_.size());
      case kBinInt1:
        return push(make_int(u8()));
      case kBinInt2:
        return push(make_int(le(2, false)));
      case kBinInt:
        return push(make_int(le(4, true)));
      case kLong1:
        return push(make_int(long1()));
      case kNone:
        return push(make(Kind::None));
      case kNewTrue:
      case kNewFalse:
        return push(make_bool(op == kNewTrue));
      case kBinFloat:
        take(8);
        return push(make(Kind::Float));
      case kShortBinUnicode:
        return push(make_str(Kind::Str, le(1, false)));
      case kBinUnicode:
        return push(make_str(Kind::Str, le(4, false)));
      case kBinUnicode8:
        return push(make_str(Kind::Str, le(8, false)));
      case kShortBinBytes:
        return push(make_str(Kind::Bytes, le(1, false)));
      case kBinBytes:
        return push(make_str(Kind::Bytes, le(4, false)));
      case kMemoize:
        return put(static_cast<uint32_t>(memo_.size()));
      case kBinPut:
        return put(static_cast<uint32_t>(le(1, false)));
      case kLongBinPut:
        return put(static_cast<uint32_t>(le(4, false)));
      case kBinGet:
        return push(memo(le(1, false)));
      case kLongBinGet:
        return push(memo(le(4, false)));
      case kPop:
        pop();
        return;
      default:
        return collect(op);
    }
  }

  // Containers from what is above the last MARK, or from the top few.
  void collect(uint8_t op) {
    switch (op) {
      case kSetItem:
        return setitems(pop_n(2));
      case kSetItems:
        return setitems(pop_mark());
      case kAppend:
        return into(Kind::List, pop_n(1));
      case kAppends:
        return into(Kind::List, pop_mark());
      case kTuple:
        return push(make_from(Kind::Tuple, pop_mark()));
      case kTuple1:
      case kTuple2:
      case kTuple3:
        return push(make_from(Kind::Tuple, pop_n(op - kTuple1 + 1)));
      case kList:
        return push(make_from(Kind::List, pop_mark()));
      case kDict: {
        std::vector<uint32_t> pairs = pop_mark();
        if (pairs.size() % 2) fail("DICT over an odd number of items");
        return push(make_from(Kind::Dict, std::move(pairs)));
      }
      default:
        fail(fmt::format("opcode 0x{:02x}, which a dict of ints and strings does not use", op));
    }
  }

  void version() {
    const uint8_t v = u8();
    if (v < 2 || v > 5) fail(fmt::format("pickle protocol {} (2 to 5 are read)", v));
  }

  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  std::string_view take(size_t n) {
    if (n > bytes_.size() - pos_)
      fail(fmt::format("{} bytes wanted, {} left", n, bytes_.size() - pos_));
    const std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // An n-byte little-endian integer, sign-extended when `is_signed`.
  int64_t le(size_t n, bool is_signed) {
    const std::string_view s = take(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(s[k])} << (8 * k);
    if (is_signed && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
    if (!is_signed && n == 8 && v > static_cast<uint64_t>(INT64_MAX)) fail("a length over 2^63");
    return static_cast<int64_t>(v);
  }
  int64_t long1() {
    const uint8_t n = u8();
    if (n > 8) fail(fmt::format("a LONG1 of {} bytes (an int beyond 64 bits)", n));
    return n == 0 ? 0 : le(n, true);
  }

  uint32_t make(Kind kind) {
    if (arena_.size() >= kMaxPickleValues)
      fail(fmt::format("more than {} objects", kMaxPickleValues));
    arena_.push_back(Value{kind, 0, {}, {}});
    return static_cast<uint32_t>(arena_.size() - 1);
  }
  uint32_t make_int(int64_t v) {
    const uint32_t i = make(Kind::Int);
    arena_[i].i = v;
    return i;
  }
  uint32_t make_bool(bool v) {
    const uint32_t i = make(Kind::Bool);
    arena_[i].i = v;
    return i;
  }
  uint32_t make_str(Kind kind, int64_t length) {
    const std::string_view s = take(static_cast<size_t>(length));
    const uint32_t i = make(kind);
    arena_[i].s = std::string(s);
    return i;
  }
  uint32_t make_from(Kind kind, std::vector<uint32_t> items) {
    const uint32_t i = make(kind);
    arena_[i].items = std::move(items);
    return i;
  }

  // Opcodes that make no object (MARK, MEMOIZE, a GET's push) are bounded as objects are, so
  // that a file of them alone cannot grow the reader past kMaxPickleValues entries each.
  void bounded(size_t size, const char* what) const {
    if (size >= kMaxPickleValues) fail(fmt::format("more than {} {}", kMaxPickleValues, what));
  }
  void push(uint32_t index) {
    bounded(stack_.size(), "stack entries");
    stack_.push_back(index);
  }
  void put(uint32_t key) {
    const uint32_t value = top();
    if (!memo_.count(key)) bounded(memo_.size(), "memo entries");
    memo_[key] = value;
  }
  uint32_t top() const {
    if (stack_.size() <= floor()) fail("an opcode on an empty stack");
    return stack_.back();
  }
  uint32_t pop() {
    const uint32_t v = top();
    stack_.pop_back();
    return v;
  }
  // The stack's part below the last MARK is not reachable without popping the mark.
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<uint32_t> pop_n(size_t n) {
    if (stack_.size() < floor() + n) fail("an opcode on too short a stack");
    std::vector<uint32_t> out(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return out;
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) fail("an opcode that needs a MARK without one");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> out(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
    stack_.resize(at);
    return out;
  }
  uint32_t memo(int64_t key) const {
    const auto it = memo_.find(static_cast<uint32_t>(key));
    if (it == memo_.end()) fail(fmt::format("memo {} read before it is written", key));
    return it->second;
  }
  void into(Kind kind, const std::vector<uint32_t>& items) {
    Value& c = arena_[top()];
    if (c.kind != kind) fail("APPEND or SETITEM into something else than a list or dict");
    if (c.items.size() + items.size() > kMaxPickleValues * 2) fail("a container too large");
    c.items.insert(c.items.end(), items.begin(), items.end());
  }
  void setitems(const std::vector<uint32_t>& pairs) {
    if (pairs.size() % 2) fail("SETITEMS over an odd number of items");
    into(Kind::Dict, pairs);
  }

  std::string_view bytes_;
  const std::string& what_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<Value> arena_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::map<uint32_t, uint32_t> memo_;
};

}  // namespace

int64_t parse_meta_vocab_size(std::string_view bytes, const std::string& what) {
  PickleReader reader(bytes, what);
  const Value& root = reader.at(reader.run());
  if (root.kind != Kind::Dict) meta_error(what, "the pickled object is not a dict");
  // A key set twice keeps its last value, as Python's dict does.
  const Value* value = nullptr;
  for (size_t k = 0; k + 1 < root.items.size(); k += 2) {
    const Value& key = reader.at(root.items[k]);
    if (key.kind == Kind::Str && key.s == "vocab_size") value = &reader.at(root.items[k + 1]);
  }
  if (!value) meta_error(what, "its dict has no 'vocab_size'");
  if (value->kind != Kind::Int) meta_error(what, "its 'vocab_size' is not an int");
  if (value->i < 1 || value->i > INT32_MAX)
    meta_error(what, fmt::format("its vocab_size {} is not a vocabulary's size", value->i));
  return value->i;
}

int64_t read_meta_vocab_size(const std::string& path) {
  try {
    return parse_meta_vocab_size(read_input_file(path, kMaxMetaBytes), path);
  } catch (const InputFileError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace ddpb

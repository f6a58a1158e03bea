#include "comm/store.h"

#include <charconv>
#include <utility>

namespace ddpb::comm {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  DDPB_CHECK(base_ != nullptr) << "PrefixStore('" << prefix_ << "') needs a base store";
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  base_->set(prefix_ + key, value);
}

Bytes PrefixStore::get(const std::string& key) {
  return base_->get(prefix_ + key);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(prefix_ + key, delta);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(prefixed(keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys) {
  base_->wait(prefixed(keys));
}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefix_ + k);
  return out;
}

namespace detail {

int64_t add_to_counter(const std::string& key, const Bytes* current, int64_t delta) {
  int64_t old = 0;
  if (current != nullptr) {
    const char* first = reinterpret_cast<const char*>(current->data());
    const char* last = first + current->size();
    auto [ptr, ec] = std::from_chars(first, last, old);
    DDPB_CHECK(ec == std::errc() && ptr == last && !current->empty())
        << "store key '" << key << "' holds " << current->size()
        << " bytes that are not a decimal integer, so add() cannot count on it";
  }
  int64_t sum = 0;
  DDPB_CHECK(!__builtin_add_overflow(old, delta, &sum))
      << "store counter '" << key << "' overflows: " << old << " + " << delta;
  return sum;
}

Bytes format_counter(int64_t value) {
  std::string s = std::to_string(value);
  return Bytes(s.begin(), s.end());
}

void check_key_value(const char* store, const std::string& key, size_t value_bytes) {
  DDPB_CHECK(!key.empty() && key.size() <= kMaxKeyBytes)
      << store << ": key of " << key.size() << " bytes (allowed 1.." << kMaxKeyBytes << ")";
  DDPB_CHECK(value_bytes <= kMaxValueBytes)
      << store << ": value of " << value_bytes << " bytes for key '" << key << "' (max "
      << kMaxValueBytes << ")";
}

void throw_timeout(const char* store, const char* op, const std::vector<std::string>& keys,
                   Duration timeout) {
  std::string names;
  for (const auto& k : keys) names += (names.empty() ? "'" : ", '") + k + "'";
  throw StoreTimeout(std::string(store) + " " + op + "(" + names + ") timed out after " +
                     std::to_string(timeout.count()) + " ms");
}

}  // namespace detail
}  // namespace ddpb::comm

// How a typed record (reports/run_record.h, reports/suite_record.h) becomes JSON and back.
// Each record type lists its fields once; writing and reading are both made from that list.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/named_enum.h"

namespace ddpb::reports {

// Note [One field list per record type]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A record type T declares `static constexpr bool kRecord = true;` and
//     template <class Self, class V> static void fields(Self& self, V& v) {
//       v("median", self.median); ...; v.rest(self.extra);
//     }
// The key next to the member is the only place the JSON name is written: record_to_json()
// runs the list with a writer and record_from_json() with a reader, so the two cannot drift.
// The member's C++ type says what the JSON holds: an integer type an integer, double a finite
// number, std::optional a key that may be absent (absent when nullopt), std::vector an array,
// NamedValues<T> an object of name -> value, an enum its name (base/named_enum.h).
//
// Reading is lenient, as the renderers have always been (they show a report of a partial or
// hand-edited suite.json, with the schema's complaint in the banner): a missing or mistyped
// key leaves the member at its default (std::optional: nullopt), a bad array element is
// skipped, and a non-integral number where an integer is named reads rounded. Whether a record is
// well-formed is the schema validator's to say; every record ddpbench writes passes it before it is
// written.
//
// `rest` (an OpenFields, last in the list) keeps the keys the list does not name, for the
// objects the schema leaves open (context, config, mode details): written back as they were,
// under the named keys, so reading a record and writing it again loses nothing.

// The keys of an open object that its type does not name.
struct OpenFields {
  nlohmann::json value = nlohmann::json::object();
  bool operator==(const OpenFields&) const = default;
};

// A key that is always written and may hold null (the schema's ["integer", "null"]): an
// empty value writes null; null (or a mistyped value) reads as empty. std::optional<Nullable<T>>
// is a key that may be absent and, when present, null.
template <class T>
struct Nullable {
  std::optional<T> value;
  bool operator==(const Nullable&) const = default;
};

// An object whose keys are data, in key order ("phases_ms": {"data": 0.1, "forward": 2.0}).
template <class T>
using NamedValues = std::vector<std::pair<std::string, T>>;

// The value named `name` (the last, as JSON keeps the last of a repeated key), or `fallback`.
template <class T>
T named_value(const NamedValues<T>& values, std::string_view name, T fallback = T{}) {
  for (auto it = values.rbegin(); it != values.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  return fallback;
}

namespace record_detail {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsNullable : std::false_type {};
template <class T>
struct IsNullable<Nullable<T>> : std::true_type {};
template <class T>
struct IsNamedValues : std::false_type {};
template <class T>
struct IsNamedValues<std::vector<std::pair<std::string, T>>> : std::true_type {};
template <class T>
concept Record = T::kRecord;

template <class T>
nlohmann::json to_value(const T& v);

struct Writer {
  nlohmann::json& out;
  template <class T>
  void operator()(const char* key, const T& v) {
    if constexpr (IsOptional<T>::value) {
      if (v) out[key] = to_value(*v);
    } else {
      out[key] = to_value(v);
    }
  }
  void rest(const OpenFields& extra) {
    for (const auto& [key, value] : extra.value.items()) {
      if (!out.contains(key)) out[key] = value;
    }
  }
};

template <class T>
nlohmann::json to_value(const T& v) {
  if constexpr (std::is_same_v<T, nlohmann::json>) {
    return v;
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(enum_name(v));
  } else if constexpr (IsNullable<T>::value) {
    return v.value ? to_value(*v.value) : nlohmann::json(nullptr);
  } else if constexpr (IsNamedValues<T>::value) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, value] : v) out[name] = to_value(value);
    return out;
  } else if constexpr (IsVector<T>::value) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : v) out.push_back(to_value(e));
    return out;
  } else if constexpr (Record<T>) {
    nlohmann::json out = nlohmann::json::object();
    Writer w{out};
    T::fields(v, w);
    return out;
  } else {
    return nlohmann::json(v);  // bool, integers, double, std::string
  }
}

template <class T>
bool from_value(const nlohmann::json& j, T& out);

struct Reader {
  const nlohmann::json& in;
  std::vector<std::string_view> named;
  template <class T>
  void operator()(const char* key, T& v) {
    named.emplace_back(key);
    const auto it = in.find(key);
    if (it == in.end()) return;
    if constexpr (IsOptional<T>::value) {
      typename T::value_type x{};
      if (from_value(*it, x)) v = std::move(x);
    } else {
      T x{};
      if (from_value(*it, x)) v = std::move(x);
    }
  }
  void rest(OpenFields& extra) {
    extra.value = nlohmann::json::object();
    for (const auto& [key, value] : in.items()) {
      if (std::find(named.begin(), named.end(), key) == named.end()) extra.value[key] = value;
    }
  }
};

template <class T>
bool integer_from(const nlohmann::json& j, T& out) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    out = static_cast<T>(u);
    return true;
  }
  int64_t i = 0;
  if (j.is_number_integer()) {
    i = j.get<int64_t>();
  } else if (j.is_number_float()) {
    // A hand-edited or scaled record may hold 1.1e8 where the writer put an integer.
    const double d = j.get<double>();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return false;
    i = std::llround(d);
  } else {
    return false;
  }
  if constexpr (std::is_signed_v<T>) {
    if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max()) return false;
  } else {
    if (i < 0) return false;
  }
  out = static_cast<T>(i);
  return true;
}

template <class T>
bool from_value(const nlohmann::json& j, T& out) {
  if constexpr (std::is_same_v<T, nlohmann::json>) {
    out = j;
    return true;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return false;
    out = j.get<bool>();
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    return integer_from(j, out);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number() || !std::isfinite(j.get<double>())) return false;
    out = j.get<T>();
    return true;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return false;
    out = j.get<std::string>();
    return true;
  } else if constexpr (IsNullable<T>::value) {
    typename decltype(out.value)::value_type x{};
    if (from_value(j, x)) out.value = std::move(x);
    return true;
  } else if constexpr (std::is_enum_v<T>) {
    if (!j.is_string()) return false;
    const auto e = enum_from_name<T>(j.get_ref<const std::string&>());
    if (e) out = *e;
    return e.has_value();
  } else if constexpr (IsNamedValues<T>::value) {
    if (!j.is_object()) return false;
    for (const auto& [name, value] : j.items()) {
      typename T::value_type::second_type x{};
      if (from_value(value, x)) out.emplace_back(name, std::move(x));
    }
    return true;
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) return false;
    for (const auto& e : j) {
      typename T::value_type x{};
      if (from_value(e, x)) out.push_back(std::move(x));
    }
    return true;
  } else {
    static_assert(Record<T>, "a record member of a type record_fields.h does not know");
    if (!j.is_object()) return false;
    Reader r{j, {}};
    T::fields(out, r);
    return true;
  }
}

}  // namespace record_detail

template <class T>
nlohmann::json record_to_json(const T& record) {
  return record_detail::to_value(record);
}

// Lenient (Note [One field list per record type]): never throws; a value that is not an
// object reads as a default T.
template <class T>
T record_from_json(const nlohmann::json& j) {
  T out{};
  record_detail::from_value(j, out);
  return out;
}

}  // namespace ddpb::reports

// Enums with names: the flags and the records speak in names ("bf16", "ddp"), the code in
// enum values. Each enum declares its names once, as a table found by argument-dependent
// lookup:
//
//   enum class MathMode { FP32, TF32, BF16 };
//   constexpr NameTable<MathMode, 3> enum_names(MathMode) {
//     return {{{"fp32", MathMode::FP32}, {"tf32", MathMode::TF32}, {"bf16", MathMode::BF16}}};
//   }
//
// and every parse and print goes through the functions below, so a name is spelt in one
// place and a new value cannot be forgotten by one of several hand-written parsers.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ddpb {

template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};
template <typename E, size_t N>
using NameTable = std::array<EnumName<E>, N>;

// The value named `name`; nullopt for a name not in E's table.
template <typename E>
std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// The name of `value` ("?" for a value outside the table, which a cast could make).
template <typename E>
std::string_view enum_name(E value) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

// Every name, for messages: "fp32, tf32 or bf16".
template <typename E>
std::string enum_choices() {
  const auto& table = enum_names(E{});
  std::string text;
  for (size_t i = 0; i < table.size(); ++i) {
    if (i > 0) text += i + 1 == table.size() ? " or " : ", ";
    text += table[i].name;
  }
  return text;
}

}  // namespace ddpb

// nanoGPT's meta.pkl: the dict its prepare.py scripts pickle beside train.bin and val.bin,
// {'vocab_size': int, 'itos': {int: str}, 'stoi': {str: int}}, whose vocab_size nanoGPT's
// train.py sizes the model with. ddpbench reads vocab_size without Python, with a reader of
// the few pickle opcodes such a dict is made of (protocols 2 to 5, FRAMEs included).
//
// Note [A bounded pickle reader]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A pickle is a program for a stack machine, and Python's unpickler runs any callable it
// names. This reader knows only the opcodes that build None, bools, ints, floats, strings,
// bytes, tuples, lists and dicts and the memo; any other opcode (GLOBAL, REDUCE, BUILD, the
// text opcodes of protocol 0...) is refused naming it and its byte offset. It is bounded: the
// file is read up to kMaxMetaBytes, at most kMaxPickleValues objects are made (and as many
// stack entries, marks and memo entries: opcodes that make no object fill those), and every
// length is checked against the bytes left. Objects live in one arena and containers hold
// indices into it, so no object owns another: a self-referencing or deeply nested pickle can
// neither leak nor recurse.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ddpb {

inline constexpr size_t kMaxMetaBytes = size_t{16} << 20;
inline constexpr size_t kMaxPickleValues = size_t{1} << 20;

// The int under the key 'vocab_size' of the pickled dict `bytes`. Throws UsageError, one line
// starting with `what` (the file's path): not a pickle this reader knows, not a dict, no int
// 'vocab_size', or a vocab_size outside [1, 2^31).
int64_t parse_meta_vocab_size(std::string_view bytes, const std::string& what);

// The same, of the file `path` (Note [User-named inputs]: a regular file, bounded).
int64_t read_meta_vocab_size(const std::string& path);

}  // namespace ddpb

// nanoGPT's meta.pkl (data/nanogpt_meta.h): vocab_size read from the bytes Python's pickle
// writes, at every protocol nanoGPT's prepare.py may have used, and every other input refused
// in one line naming the file (Note [A bounded pickle reader]).
#include "data/nanogpt_meta.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "../util/error_of.h"
#include "../util/temp_dir.h"
#include "core/check.h"

namespace ddpb {
namespace {

using testing::error_of;

using testing::TempDir;

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Produced once by Python 3.11's pickle.dumps (its default, protocol 4, with a FRAME) of the
// meta prepare.py writes for the text "hello world\n":
//   chars = sorted(set(text)); meta = {'vocab_size': len(chars),
//   'itos': {i: ch for i, ch in enumerate(chars)}, 'stoi': {ch: i for i, ch in enumerate(chars)}}
// Its stoi reads the characters back from the memo (BINGET).
const std::string kHelloWorldMeta = from_hex(
    "80049584000000000000007d94288c0a766f6361625f73697a65944b098c0469746f73947d94284b008c010a944b"
    "018c0120944b028c0164944b038c0165944b048c0168944b058c016c944b068c016f944b078c0172944b088c0177"
    "94758c0473746f69947d942868044b0068054b0168064b0268074b0368084b0468094b05680a4b06680b4b07680c"
    "4b0875752e");

TEST(NanoGptMeta, ReadsVocabSizeFromPythonsPickle) {
  EXPECT_EQ(parse_meta_vocab_size(kHelloWorldMeta, "meta.pkl"), 9);
  // Protocol 2 (memo by BINPUT, no FRAME) and 5, with two- and four-byte ints (from Python).
  EXPECT_EQ(parse_meta_vocab_size(
                from_hex("80027d7100580a000000766f6361625f73697a6571014d5802732e"), "p2"),
            600);
  EXPECT_EQ(
      parse_meta_vocab_size(
          from_hex("80059516000000000000007d948c0a766f6361625f73697a65944a70110100732e"), "p5"),
      70000);
  TempDir dir("meta");
  std::ofstream(dir / "meta.pkl", std::ios::binary) << kHelloWorldMeta;
  EXPECT_EQ(read_meta_vocab_size(dir / "meta.pkl"), 9);
}

// Every protocol Python writes, on a character vocabulary as prepare.py makes it and on a
// GPT-2-sized one (ints of one, two and four bytes, long strings), straight from Python.
TEST(NanoGptMeta, ReadsEveryProtocolPythonWrites) {
  TempDir dir("meta_python");
  const std::string script =
      "import pickle, sys\n"
      "for vocab in (65, 300, 50304, 70000):\n"
      "    itos = {i: chr(0x20 + i) * (1 + i % 3) for i in range(vocab)}\n"
      "    meta = {'vocab_size': vocab, 'itos': itos, 'stoi': {s: i for i, s in itos.items()}}\n"
      "    for p in range(2, pickle.HIGHEST_PROTOCOL + 1):\n"
      "        with open(f'" +
      dir.str() + "/{vocab}-{p}.pkl', 'wb') as f: pickle.dump(meta, f, protocol=p)\n";
  std::ofstream(dir / "make.py") << script;
  const std::string python = DDPB_TEST_PYTHON;
  if (std::system((python + " " + dir / "make.py").c_str()) != 0)
    GTEST_SKIP() << python << " could not write the pickles (no Python 3 here)";
  int read = 0;
  for (int vocab : {65, 300, 50304, 70000}) {
    for (int p = 2; p <= 5; ++p) {
      const std::string path = dir / (std::to_string(vocab) + "-" + std::to_string(p) + ".pkl");
      if (!std::ifstream(path).good()) continue;  // protocol 5 needs Python 3.8
      EXPECT_EQ(read_meta_vocab_size(path), vocab) << path;
      ++read;
    }
  }
  EXPECT_GE(read, 12) << "protocols 2 to 4 at least, for each vocabulary";
}

// What is not a nanoGPT meta dict is one line naming the file, never a crash or a hang.
// A key set twice keeps its last value, as Python's dict (and so nanoGPT's train.py) does.
TEST(NanoGptMeta, TheLastVocabSizeSetWins) {
  // {'vocab_size': 9} at protocol 4, then SETITEM vocab_size = 65 before STOP.
  const std::string twice = from_hex(
      "80047d948c0a766f6361625f73697a65944b09738c0a766f6361625f73"
      "697a65944b41732e");
  EXPECT_EQ(parse_meta_vocab_size(twice, "meta.pkl"), 65);
}

TEST(NanoGptMeta, RefusesWhatItCannotReadInOneLine) {
  const auto refused = [](const std::string& bytes, const std::string& needle) {
    const std::string m =
        error_of<UsageError>([&] { parse_meta_vocab_size(bytes, "/d/meta.pkl"); });
    EXPECT_EQ(m.rfind("/d/meta.pkl: cannot read vocab_size: ", 0), 0u) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  };
  refused("", "ends before its STOP");
  refused(from_hex("8002") + "cos\nsystem\n.", "opcode 0x63");  // GLOBAL: code, not data
  refused(from_hex("8004") + "]" + from_hex("94") + ".", "not a dict");
  refused(from_hex("80047d948c0161944b01732e"), "no 'vocab_size'");                 // {'a': 1}
  refused(from_hex("80047d948c0a766f6361625f73697a65948c0139732e"), "not an int");  // '9'
  refused(from_hex("80047d948c0a766f6361625f73697a65944b00732e"), "vocab_size 0");
  refused(from_hex("8001"), "pickle protocol 1");
  refused(from_hex("80046804"), "memo 4 read before it is written");
  refused(from_hex("8004") + "u", "without one");
  refused(from_hex("8004") + "X" + from_hex("ffffff7f"), "bytes wanted");
  // Opcodes that make no object are bounded too: a file of MARKs, of MEMOIZEs or of GETs alone
  // stops at kMaxPickleValues entries instead of growing with the file.
  refused(from_hex("8004") + std::string(kMaxPickleValues + 1, '('), "more than 1048576 marks");
  refused(from_hex("8004") + "N" + std::string(kMaxPickleValues + 1, '\x94'),
          "more than 1048576 memo entries");
  std::string gets = from_hex("8004") + "N" + from_hex("94");
  for (size_t k = 0; k <= kMaxPickleValues; ++k) gets += from_hex("6800");
  refused(gets, "more than 1048576 stack entries");
  // Every prefix of a good file is refused, and no byte changed anywhere crashes the reader.
  for (size_t n = 0; n < kHelloWorldMeta.size(); ++n)
    EXPECT_THROW(parse_meta_vocab_size(kHelloWorldMeta.substr(0, n), "cut"), UsageError) << n;
  int still_read = 0;
  for (size_t at = 0; at < kHelloWorldMeta.size(); ++at) {
    for (int value : {0x00, 0x28, 0x2e, 0x68, 0x75, 0x94, 0xff}) {
      std::string bytes = kHelloWorldMeta;
      bytes[at] = static_cast<char>(value);
      try {
        still_read += parse_meta_vocab_size(bytes, "flipped") > 0;
      } catch (const UsageError&) {
      }
    }
  }
  EXPECT_GT(still_read, 0) << "some changes (inside a string) leave vocab_size readable";
  // A file that is not a regular file, or does not exist, is named.
  TempDir dir("meta_bad");
  EXPECT_NE(
      error_of<UsageError>([&] { read_meta_vocab_size(dir.str()); }).find("not a regular file"),
      std::string::npos);
  EXPECT_NE(error_of<UsageError>([&] { read_meta_vocab_size(dir / "none.pkl"); }).find("none.pkl"),
            std::string::npos);
}

}  // namespace
}  // namespace ddpb

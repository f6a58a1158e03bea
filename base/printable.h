// Text from files (records, datasets, dumps, topologies) on its way to a terminal.
#pragma once

#include <string>
#include <string_view>

namespace ddpb {

// `text` with what could forge or reorder a terminal line escaped: C0 controls and DEL as
// \xNN, C1 controls as \u00NN, and the bidirectional controls (U+200E, U+200F, U+202A..E,
// U+2066..9) as \uNNNN (issue 48, P21). Everything else, UTF-8 included, is kept.
std::string printable(std::string_view text);

}  // namespace ddpb

// One colour per step phase for every chart of the reports (Note [Phase colours]): the step
// anatomy (chart-phases), the critical-path Gantt charts and the bucket timeline all colour a
// phase, and the few things a timeline shows that are not phases, from this table alone.
//
// Note [Phase colours]
// ~~~~~~~~~~~~~~~~~~~~
// A reader who learns that forward is blue in DP's chart must find it blue in DDP's, in the
// step anatomy and in the critical path alike, so a chart never assigns colours in the order
// it happens to meet phases. The table is keyed by the name records carry (the vocabulary of
// core/step_phase.h, Note [One phase vocabulary]; reports/ does not include core/) and lists
// the phases in that vocabulary's order, which every legend follows. Hues follow the phase
// kind: blues and greens for compute, yellow for data, oranges, reds and purples for moving
// tensors between devices; greys and brown for what is not a phase (waiting, host time
// outside every phase, a bucket's collective on the communication stream). A name outside the
// vocabulary gets a colour of its own from the name alone, so it too is the same everywhere.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddpb::reports {

// The step phases in the vocabulary's order ("data", ..., "optimizer").
const std::vector<std::string>& phase_names();

// The colour of a phase by its record name ("backward_compute"), or of one of the non-phase
// spans below; a deterministic colour for any other name.
std::string phase_color(std::string_view name);

// Where a name goes in a legend: its index in phase_names(), then the non-phase spans, then
// any other name.
size_t phase_order(std::string_view name);

// What a timeline shows that is not a phase: a bucket's collective on the communication
// stream, waiting for another rank (device), and host time outside every phase.
inline constexpr std::string_view kCollectiveSpan = "bucket collective";
inline constexpr std::string_view kWaitSpan = "waiting";
inline constexpr std::string_view kHostSpan = "host (outside the phases)";

}  // namespace ddpb::reports

// What a design promises a rank holds for the model itself, by category: the formulas of
// docs/metrics.md "Memory by category", from the design's traits alone, so that records,
// reports and the projection share them and none needs the design's name.
//
// Note [Model-state memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// In fp32 with Ψ parameters over N ranks, a rank holds parameters 4Ψ, gradients 4Ψ and
// optimizer state KΨ (K = 8 for AdamW's two moments, 4 for SGD's momentum buffer, 0 for plain
// SGD), each divided by N where the design shards it (DesignInfo::shards_parameters,
// shards_gradients, shards_optimizer_state). With AdamW that is the ZeRO paper's table
// re-derived for fp32: DDP 16Ψ, ZeRO-1 8Ψ + 8Ψ/N, ZeRO-2 4Ψ + 12Ψ/N. What the formulas leave
// out shows in the measured/expected ratio a run records: ZeRO's padding (under N elements a
// bucket), the buffers of ZeRO-2's buckets in flight (Note [ZeRO gradient release]) and a
// gradient held outside its bucket at the peak. Activations and communication buffers have no
// formula; they are measured only.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "reports/design_info.h"
#include "reports/record_fields.h"

namespace ddpb::reports {

// K of Note [Model-state memory]: optimizer-state bytes per fp32 parameter; nullopt for an
// optimizer without a formula.
std::optional<double> optimizer_state_bytes_per_parameter(std::string_view optimizer,
                                                          double momentum);

// The categories of Note [Model-state memory] ("parameters", "gradients", "optimizer_state")
// a rank of `design` holds with `params` parameters over `world` ranks.
NamedValues<int64_t> expected_model_state(const DesignInfo& design, int64_t params, int world,
                                          double optimizer_bytes_per_parameter);

// The same categories moved from `from_world` to `to_world` ranks: each sharded category
// scales by from_world / to_world.
NamedValues<int64_t> model_state_at_world(const DesignInfo& design,
                                          const NamedValues<int64_t>& expected, int from_world,
                                          int to_world);

// measured / expected for every category of `expected`, and for their sums ("model_state";
// with each category at its own most, both sides are sums of maxima); a category expected to
// hold nothing is left out.
NamedValues<double> measured_over_expected(const NamedValues<int64_t>& measured,
                                           const NamedValues<int64_t>& expected);

// The sum of a set of categories.
int64_t total_bytes(const NamedValues<int64_t>& categories);

}  // namespace ddpb::reports

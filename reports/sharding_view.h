// The report's sharding section: DDP against its ZeRO stages, side by side (group "sharding",
// Note [Sharding rounds] in bench/suite/suite_spec.cpp), and the verdict's sentence on them.
#pragma once

#include <string>
#include <vector>

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

ReportSection build_sharding_section(const SuiteRecord& suite);

// One sentence per sharded design of `workload` against the first design of its sharding
// rounds (DDP): the memory per rank it saves, at what step time, and what it would save at 8
// ranks (64 when it ran at 8 or more) by the formulas of Note [Model-state memory], e.g.
// "ZeRO-2 saves 41% of memory per rank at 1.08x DDP's step; at 8 ranks it would save 77%."
std::vector<std::string> sharding_sentences(const SuiteRecord& suite, const std::string& workload);

}  // namespace ddpb::reports

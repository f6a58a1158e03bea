// The report's sharding section: DDP against its ZeRO stages, side by side (group "sharding",
// Note [Sharding rounds] in bench/suite/suite_spec.cpp).
#pragma once

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

ReportSection build_sharding_section(const SuiteRecord& suite);

}  // namespace ddpb::reports

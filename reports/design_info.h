// A training design as the records describe it (Note [Designs in records]): every run record
// carries its design's row ("design"), and every suite record the rows of the designs it ran
// ("designs"), so that reports/ and the projection learn a design's label, noun, traits and
// phases from the data and never from its name.
//
// Note [Designs in records]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The designs are rows of one table (bench/run/designs.h, Note [The design table]). reports/
// does not include bench/, and a results folder must render on a build that has never heard
// of one of its designs, so the row travels with the records: a name ("ddp", what --mode
// takes), a label for tables ("DDP"), the noun for one of its participants ("rank" or
// "device"), its traits, and its phases each with its kind (Note [Phase kinds] in
// core/step_phase.h). Code that needs to treat designs differently asks a trait; code that
// writes about a design writes its label. A name is only ever compared with another name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/record_fields.h"

namespace ddpb::reports {

// One phase a design times its step in, and what the phase spends its time on.
struct DesignPhase {
  static constexpr bool kRecord = true;
  std::string phase, kind;  // "backward_compute", "compute"
  bool operator==(const DesignPhase&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("phase", s.phase), v("kind", s.kind);
  }
};

struct DesignInfo {
  static constexpr bool kRecord = true;
  std::string name = {};   // what --mode takes and the records' "mode" holds: "ddp"
  std::string label = {};  // how tables and sentences name it: "DDP"
  std::string noun = {};   // one of the participants its world size counts: "rank" or "device"
  // Traits (docs/records.md "design"):
  bool parallel = false;            // trains on more than one device (--world-size > 1)
  bool processes_per_rank = false;  // one process per rank, started by the launcher
  bool has_buckets = false;         // gradients travel in buckets (DDP's reducer and its flags)
  bool overlaps_backward = false;   // its gradient communication runs while backward does
  // Each rank holds 1/world_size of the parameters, of the gradients (ZeRO-2) or of the
  // optimizer state (ZeRO's stages): what a rank must hold (bench/run/run_config.cpp's
  // capacity check) and the memory it promises (Note [Model-state memory]) follow them.
  bool shards_parameters = false;
  bool shards_gradients = false;
  bool shards_optimizer_state = false;
  // The collective its gradients meet in ("allreduce", "reduce"); empty: none.
  std::string gradient_op = {};
  std::vector<DesignPhase> phases = {};  // in step order
  bool operator==(const DesignInfo&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("label", s.label), v("noun", s.noun), v("parallel", s.parallel);
    v("processes_per_rank", s.processes_per_rank), v("has_buckets", s.has_buckets);
    v("overlaps_backward", s.overlaps_backward), v("shards_parameters", s.shards_parameters);
    v("shards_gradients", s.shards_gradients);
    v("shards_optimizer_state", s.shards_optimizer_state), v("gradient_op", s.gradient_op);
    v("phases", s.phases);
  }

  // The kind of one of its phases; nullopt for a phase it does not time.
  std::optional<std::string> phase_kind(std::string_view phase) const {
    for (const DesignPhase& p : phases)
      if (p.phase == phase) return p.kind;
    return std::nullopt;
  }
};

// The row named `name` in `designs`, or nullptr.
inline const DesignInfo* find_design(const std::vector<DesignInfo>& designs,
                                     std::string_view name) {
  for (const DesignInfo& d : designs)
    if (d.name == name) return &d;
  return nullptr;
}

// The row named `name`, or, for a design the records do not describe, a row with the name
// for its label, "device" for its noun and no traits (so it falls out of every trait's
// question; the validators name such a run, reports/schema_validator.h).
inline DesignInfo design_or_name(const std::vector<DesignInfo>& designs, std::string_view name) {
  if (const DesignInfo* d = find_design(designs, name)) return *d;
  DesignInfo unknown;
  unknown.name = unknown.label = std::string(name);
  unknown.noun = "device";
  return unknown;
}

}  // namespace ddpb::reports

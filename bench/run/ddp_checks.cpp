#include "bench/run/ddp_checks.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "base/named_enum.h"
#include "core/check.h"

namespace ddpb::bench {

bool all_or_none_have_input(const std::vector<bool>& have, int64_t step) {
  std::vector<int> out, in;
  for (int r = 0; r < static_cast<int>(have.size()); ++r)
    (have[static_cast<size_t>(r)] ? in : out).push_back(r);
  if (out.empty()) return true;
  if (in.empty()) return false;
  throw Error(fmt::format(
      "uneven inputs: rank(s) {} ran out of input at step {} while rank(s) {} have more "
      "(PyTorch's DDP would hang here): use --uneven-inputs join (PyTorch's Join), or an even "
      "split (--sampler padded)",
      fmt::join(out, ", "), step, fmt::join(in, ", ")));
}

std::optional<std::string> hook_compute_warning(const StepOutcome& out, ddp::CommHook hook,
                                                int64_t step) {
  if (!out.mode || !out.mode->buckets) return std::nullopt;
  double compute_ms = 0;
  for (const auto& b : *out.mode->buckets) compute_ms += b.hook_compute_ms.value_or(0);
  if (compute_ms <= 0.5 * out.step_ms) return std::nullopt;
  return fmt::format(
      "ddpbench: warning: the {} comm hook's own compute took {:.1f} ms of the {:.1f} ms step {} "
      "(more than half): it costs more than its compression saves; a lower --powersgd-rank "
      "orthogonalises smaller matrices",
      enum_name(hook), compute_ms, out.step_ms, step);
}

void HookComputeWarning::after_step(const StepOutcome& out, ddp::CommHook hook, int64_t step,
                                    int rank) {
  if (warned_ || rank != 0) return;
  if (const auto warning = hook_compute_warning(out, hook, step)) {
    fmt::print(stderr, "{}\n", *warning);
    warned_ = true;
  }
}

}  // namespace ddpb::bench

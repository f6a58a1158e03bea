#include "bench/project/compute_rate.h"

#include <fmt/core.h>

#include <algorithm>

#include "bench/measure/mfu.h"
#include "core/check.h"
#include "reports/projection_view.h"

namespace ddpb::bench {
namespace {

// The one-line refusal of Note [Compute rate].
[[noreturn]] void no_rate(const std::string& what, const std::string& device,
                          const std::string& why) {
  throw UsageError(fmt::format(
      "{}: no compute rate for {}: {}; give the projected device's sustained training FLOP/s "
      "with --device-flops (for example --device-flops 400e12)",
      what, device, why));
}

ComputeRate given_rate(const MeasuredCompute& m, double flops_per_s, const std::string& what) {
  if (m.flops_per_step <= 0 || m.compute_ms <= 0) {
    throw UsageError(what +
                     ": --device-flops needs the workload's training FLOPs per sample "
                     "(workload.train_flops_per_sample) and measured forward and backward times");
  }
  ComputeRate r;
  r.scale = m.flops_per_step / flops_per_s * 1e3 / m.compute_ms;
  r.info = {"--device-flops", flops_per_s, std::nullopt, std::nullopt};
  return r;
}

ComputeRate measured_rate(const MeasuredCompute& m) {
  ComputeRate r;
  r.info.source = "as measured";
  if (m.flops_per_step > 0 && m.compute_ms > 0)
    r.info.flops_per_s = m.flops_per_step / (m.compute_ms / 1e3);
  return r;
}

}  // namespace

std::optional<PeakRate> device_peak(const TopologyDevice& device, ops::MathMode precision) {
  if (device.peak_flops_per_s)
    return PeakRate{*device.peak_flops_per_s, device.source.value_or(device.name)};
  const auto peak = datasheet_peak(device.name, precision);
  if (!peak) return std::nullopt;
  return PeakRate{peak->flops_per_s, peak->source};
}

ComputeRate compute_rate(const MeasuredCompute& m, const Topology& topo, double given_flops_per_s,
                         const std::string& what) {
  if (given_flops_per_s > 0) return given_rate(m, given_flops_per_s, what);
  if (!topo.device) return measured_rate(m);
  const std::string device = topo.device->name + " (topology " + topo.name + ")";
  const auto target = device_peak(*topo.device, m.precision);
  if (!target) {
    no_rate(what, device, fmt::format("no datasheet peak for it at {}", enum_name(m.precision)));
  }
  if (m.flops_per_step <= 0 || m.compute_ms <= 0)
    no_rate(what, device, "the record has no training FLOPs per sample");
  if (!m.peak || m.peak->flops_per_s <= 0) {
    no_rate(what, device,
            "the measured device has no known peak (a suite's GEMM peak or a GPU run's MFU) to "
            "take the fraction it reached from");
  }
  const double achieved = m.flops_per_step / (m.compute_ms / 1e3);
  const double fraction = std::min(1.0, achieved / m.peak->flops_per_s);
  const double rate = target->flops_per_s * fraction;
  ComputeRate r;
  r.scale = m.flops_per_step / rate * 1e3 / m.compute_ms;
  r.info.source = fmt::format(
      "{} ({}) x {:.1f}%, the fraction of its own peak the measured run reached ({} of {}, {})",
      target->source, reports::format_flops(target->flops_per_s), fraction * 100,
      reports::format_flops(achieved), reports::format_flops(m.peak->flops_per_s), m.peak->source);
  r.info.flops_per_s = rate;
  r.info.peak_flops_per_s = target->flops_per_s;
  r.info.fraction = fraction;
  return r;
}

}  // namespace ddpb::bench

#include "bench/run/fault_injection.h"

#include "bench/run/flag_values.h"
#include "bench/run/run_config.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>
#include <utility>

#include "comm/tcp_store.h"
#include "core/check.h"

namespace ddpb::bench {

namespace {

std::optional<FaultSpec::Kind> slow_kind(const std::string& kind) {
  for (const auto& [prefix, k] : {std::pair{"slow=", FaultSpec::Kind::Slow},
                                  std::pair{"slow-backward=", FaultSpec::Kind::SlowBackward},
                                  std::pair{"slow-data=", FaultSpec::Kind::SlowData}}) {
    if (kind.rfind(prefix, 0) == 0) return k;
  }
  return std::nullopt;
}

}  // namespace

FaultSpec parse_fault(const std::string& text) {
  FaultSpec f;
  if (text.empty()) return f;
  auto at = text.find('@');
  DDPB_USAGE_CHECK(at != std::string::npos)
      << "--inject-fault '" << text << "': expected KIND@rank=R,step=S";
  std::string kind = text.substr(0, at), rest = text.substr(at + 1);
  if (kind == "crash") {
    f.kind = FaultSpec::Kind::Crash;
  } else if (kind == "hang") {
    f.kind = FaultSpec::Kind::Hang;
  } else if (kind == "store-drop") {
    f.kind = FaultSpec::Kind::StoreDrop;
  } else if (kind == "corrupt-grad") {
    f.kind = FaultSpec::Kind::CorruptGrad;
  } else if (const auto slow = slow_kind(kind)) {
    f.kind = *slow;
    const std::string name = kind.substr(0, kind.find('='));
    f.slow_ms = parse_int_flag("--inject-fault " + name + "=MS", kind.substr(name.size() + 1), 0,
                               3'600'000);
  } else {
    DDPB_USAGE_FAIL() << "--inject-fault: unknown or unavailable kind '" << kind
                      << "' (available: crash, hang, slow=MS, slow-backward=MS, slow-data=MS, "
                         "corrupt-grad, store-drop)";
  }
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t comma = rest.find(',', pos);
    std::string item =
        rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    auto eq = item.find('=');
    DDPB_USAGE_CHECK(eq != std::string::npos)
        << "--inject-fault '" << text << "': bad item '" << item << "'";
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "rank") {
      f.rank = static_cast<int>(parse_int_flag("--inject-fault rank", value, 0, kMaxWorldSize - 1));
    } else if (key == "step") {
      f.step = parse_int_flag("--inject-fault step", value, 1, 2 * kMaxSteps);
    } else {
      DDPB_USAGE_FAIL() << "--inject-fault '" << text << "': unknown key '" << key << "'";
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  DDPB_USAGE_CHECK(f.rank >= 0 && f.step >= 1)
      << "--inject-fault '" << text << "': rank >= 0, step >= 1";
  return f;
}

void maybe_inject_fault(const FaultSpec& f, int rank, int64_t step) {
  if (f.kind == FaultSpec::Kind::None || rank != f.rank || step < f.step) return;
  switch (f.kind) {
    case FaultSpec::Kind::Crash:
      if (step == f.step) {
        std::fprintf(stderr, "injected fault: rank %d crashes at step %ld\n", rank,
                     static_cast<long>(step));
        std::fflush(stderr);
        ::_exit(3);
      }
      break;
    case FaultSpec::Kind::Hang:
      std::fprintf(stderr, "injected fault: rank %d hangs at step %ld\n", rank,
                   static_cast<long>(step));
      std::fflush(stderr);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    case FaultSpec::Kind::Slow:
      std::this_thread::sleep_for(std::chrono::milliseconds(f.slow_ms));
      break;
    case FaultSpec::Kind::SlowBackward:  // applied by the Reducer inside backward
    case FaultSpec::Kind::SlowData:      // applied by the training loop's data wait
    case FaultSpec::Kind::CorruptGrad:   // applied by the DDP runner inside backward
    case FaultSpec::Kind::StoreDrop:     // applied by the DDP runner, which owns the store
    case FaultSpec::Kind::None:
      break;
  }
}

double data_fault_delay_ms(const FaultSpec& fault, int rank, int64_t step) {
  const bool on =
      fault.kind == FaultSpec::Kind::SlowData && fault.rank == rank && step >= fault.step;
  return on ? static_cast<double>(fault.slow_ms) : 0.0;
}

void inject_ddp_step_fault(const FaultSpec& fault, int rank, int64_t step, ddp::Reducer& reducer,
                           comm::Store& store) {
  if (fault.kind == FaultSpec::Kind::SlowBackward && fault.rank == rank && step >= fault.step)
    reducer.delay_next_backward(static_cast<double>(fault.slow_ms));
  if (fault.rank != rank || fault.step != step) return;
  if (fault.kind == FaultSpec::Kind::CorruptGrad) reducer.corrupt_next_gradient(0);  // ready last
  inject_store_fault(fault, rank, step, store);
}

void inject_store_fault(const FaultSpec& fault, int rank, int64_t step, comm::Store& store) {
  if (fault.kind != FaultSpec::Kind::StoreDrop || fault.rank != rank || fault.step != step) return;
  if (auto* tcp = dynamic_cast<comm::TCPStore*>(&store)) {
    std::fprintf(stderr, "injected fault: rank %d drops its store connection at step %ld\n", rank,
                 static_cast<long>(step));
    tcp->drop_connection();
  }
}

}  // namespace ddpb::bench

#include "core/autograd.h"
#include "core/memory_category.h"

#include <atomic>
#include <limits>
#include <queue>
#include <unordered_map>

#include "core/check.h"
#include "core/nvtx.h"
#include "core/ops.h"
#include "core/stream.h"

namespace ddpb::autograd {
namespace {

std::atomic<uint64_t> g_next_sequence{0};
thread_local bool t_grad_mode = true;
// The destinations offered to the node being applied on this thread, by input index.
thread_local const std::vector<Tensor>* t_offers = nullptr;
// Each backward's id, unique in the process (0: none running on this thread), so that a
// multi-grad hook fires once per backward (Note [Pre-backward hooks]).
std::atomic<uint64_t> g_next_backward{1};
thread_local uint64_t t_backward_id = 0;

// Sets this thread's backward id for one run_backward; restores the outer one (a hook may
// run a backward of its own).
class BackwardIdScope {
 public:
  BackwardIdScope()
      : previous_(std::exchange(t_backward_id,
                                g_next_backward.fetch_add(1, std::memory_order_relaxed))) {}
  ~BackwardIdScope() { t_backward_id = previous_; }
  BackwardIdScope(const BackwardIdScope&) = delete;
  BackwardIdScope& operator=(const BackwardIdScope&) = delete;

 private:
  uint64_t previous_;
};

// How a freed parameter is named in messages (Note [Freeable parameters]).
std::string parameter_label(const VarImpl& v) {
  if (!v.name.empty()) return "parameter '" + v.name + "'";
  return "a parameter " + v.data.describe();
}

// The accumulator of a leaf: sums what reaches it into .grad, then fires the hooks.
// See Note [Gradient-ready hooks].
class AccumulateGrad final : public Node {
 public:
  // The highest sequence number: among ready nodes, an accumulator runs first, so a
  // parameter's hooks fire the moment its gradient is final, not after the rest of backward.
  // (An accumulator is created once per parameter and reused by every later graph, so its
  // creation-order number would otherwise be the lowest of all and it would run last: DDP
  // would then launch every bucket only when backward has finished.) PyTorch gives its
  // AccumulateGrad nodes the maximum sequence number for the same reason.
  explicit AccumulateGrad(std::weak_ptr<VarImpl> var) : var_(std::move(var)) {
    sequence_nr = std::numeric_limits<uint64_t>::max();
  }
  const char* name() const override { return "AccumulateGrad"; }
  std::shared_ptr<VarImpl> variable() const { return var_.lock(); }
  std::vector<Tensor> apply(const Tensor& grad) override {
    auto var = var_.lock();
    if (!var) return {};
    const bool in_destination =
        var->grad_destination.defined() && grad.raw_data() == var->grad_destination.raw_data();
    var->grad_destination = Tensor();  // one backward only
    if (!var->grad.defined()) {
      // The incoming buffer is private to the engine when nothing else holds its storage;
      // then it is adopted without a copy, as PyTorch steals a uniquely owned gradient. A
      // gradient computed into the leaf's destination is adopted too: that is its purpose.
      // (A graph capture's own reference to the buffer does not count as sharing. On CPU the
      // closures a capture records hold references too, so a captured CPU step copies the
      // gradients that an eager one adopts: CPU capture is for testing the capture, not for
      // speed. CUDA kernels hold no references, so a CUDA graph adopts as eager steps do.)
      const long owners = grad.storage().use_count() -
                          (capture_detail::held_by_capture(grad.storage().get()) ? 1 : 0);
      var->grad = in_destination || owners == 1 ? grad : grad.clone();
      tag_memory(var->grad, MemoryCategory::Gradients);  // Note [Memory categories]
    } else {
      ops::axpy(1.0f, grad, var->grad);
    }
    Var handle = Var::from_impl(var);
    for (const auto& hook : var->hooks) hook(handle);
    return {};
  }

 private:
  std::weak_ptr<VarImpl> var_;
};

std::shared_ptr<Node> gradient_edge(const Var& v) {
  if (!v.defined() || !v.requires_grad()) return nullptr;
  if (v.grad_fn()) return v.grad_fn();
  auto* impl = v.impl();
  if (!impl->accumulator) impl->accumulator = std::make_shared<AccumulateGrad>(v.impl_ptr());
  return impl->accumulator;
}

void run_backward(const std::shared_ptr<Node>& root, Tensor root_grad) {
  BackwardIdScope backward_id;
  // Count, for every node reachable from the root, how many edges lead into it.
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root.get()};
  dependencies[root.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& next : n->next) {
      if (!next) continue;
      if (dependencies[next.get()]++ == 0) stack.push_back(next.get());
    }
  }
  // A node runs when all its inputs have delivered; among ready nodes, the most recently
  // created runs first (PyTorch's order), which is deterministic.
  auto later_first = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  std::unordered_map<Node*, Tensor> buffers;
  buffers[root.get()] = std::move(root_grad);
  ready.push(root.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    Tensor grad = std::move(buffers[n]);
    buffers.erase(n);
    // Offer each leaf's gradient destination when this node is its only contributor and
    // there is nothing to accumulate into (Note [Gradient destinations]).
    std::vector<Tensor> offers(n->next.size());
    for (size_t i = 0; i < n->next.size(); ++i) {
      auto* acc = dynamic_cast<AccumulateGrad*>(n->next[i].get());
      if (!acc || dependencies[acc] != 1) continue;
      if (auto var = acc->variable();
          var && var->grad_destination.defined() && !var->grad.defined()) {
        offers[i] = var->grad_destination;
      }
    }
    std::vector<Tensor> input_grads;
    if (grad.defined()) {
      // The gradient of n's output is complete (Note [Pre-backward hooks]).
      if (!n->pre_hooks.empty()) n->pre_hooks.run(grad);
      t_offers = &offers;
      try {
        input_grads = n->apply(grad);
      } catch (...) {
        t_offers = nullptr;
        throw;
      }
      t_offers = nullptr;
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      Node* next = n->next[i].get();
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor& buf = buffers[next];
        if (!buf.defined()) {
          buf = std::move(input_grads[i]);
        } else {
          // Out of place: a gradient tensor may be shared by several consumers.
          Tensor sum = Tensor::empty(buf.shape(), buf.dtype(), buf.device());
          ops::add(buf, input_grads[i], sum);
          buf = std::move(sum);
        }
      }
      if (--dependencies[next] == 0) ready.push(next);
    }
  }
}

}  // namespace

Var::Var(Tensor data, bool requires_grad) : impl_(std::make_shared<VarImpl>()) {
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
}

void Var::set_data(Tensor data) const {
  DDPB_CHECK(data.shape() == impl_->data.shape() && data.dtype() == impl_->data.dtype() &&
             data.device() == impl_->data.device())
      << "set_data: " << data.describe() << " cannot replace " << impl_->data.describe();
  impl_->data = std::move(data);
}

Var Var::from_impl(std::shared_ptr<VarImpl> impl) {
  Var v;
  v.impl_ = std::move(impl);
  return v;
}

void Var::register_grad_ready_hook(GradReadyHook hook) const {
  DDPB_CHECK(is_leaf() && requires_grad()) << "gradient-ready hooks are for leaf parameters";
  impl_->hooks.push_back(std::move(hook));
}

void Var::clear_grad_ready_hooks() const {
  impl_->hooks.clear();
}

HookHandle Var::register_grad_hook(GradHook hook) const {
  DDPB_CHECK(defined() && requires_grad() && !is_leaf())
      << "register_grad_hook is for results that require grad (a leaf parameter's hook is "
         "register_grad_ready_hook)";
  const uint64_t id = impl_->grad_fn->pre_hooks.add(std::move(hook));
  return HookHandle([node = std::weak_ptr<Node>(impl_->grad_fn), id] {
    if (auto n = node.lock()) n->pre_hooks.remove(id);
  });
}

void Var::free_storage() const {
  DDPB_CHECK(defined() && impl_->data.defined()) << "free_storage() on an undefined Var";
  const Tensor& d = impl_->data;
  Storage& storage = *d.storage();
  if (!storage.allocated()) return;
  // Storage holds max(nbytes, 1): see Tensor::empty.
  DDPB_CHECK(d.raw_data() == storage.data() && std::max<size_t>(d.nbytes(), 1) == storage.nbytes())
      << parameter_label(*impl_) << " is a view into a larger buffer of " << storage.nbytes()
      << " bytes; freeing it would free the others too: release the buffer's storage (Note "
         "[Freeable parameters])";
  storage.release(parameter_label(*impl_));
}

void Var::restore_storage() const {
  DDPB_CHECK(defined() && impl_->data.defined()) << "restore_storage() on an undefined Var";
  MemoryCategoryScope parameters(MemoryCategory::Parameters);  // Note [Memory categories]
  impl_->data.storage()->reallocate();
}

void Var::restore_storage(const Tensor& full) const {
  DDPB_CHECK(defined()) << "restore_storage() on an undefined Var";
  DDPB_CHECK(full.defined() && full.storage()->allocated())
      << "restore_storage(" << full.describe() << ") for " << parameter_label(*impl_)
      << ": the new storage must be allocated";
  set_data(full);
}

bool Var::storage_freed() const {
  return defined() && impl_->data.defined() && !impl_->data.storage()->allocated();
}

void Var::backward(const Tensor& grad_output) const {
  DDPB_CHECK(defined() && requires_grad()) << "backward() on a value that does not require grad";
  Tensor g = grad_output;
  if (!g.defined()) {
    DDPB_CHECK(data().numel() == 1)
        << "backward() without a gradient needs a scalar, got " << data().describe();
    g = Tensor::empty(data().shape(), DType::F32, data().device());
    ops::fill(g, 1.0f);
  }
  DDPB_CHECK(g.shape() == data().shape() && g.dtype() == data().dtype())
      << "output gradient " << g.describe() << " does not match " << data().describe();
  run_backward(gradient_edge(*this), std::move(g));
}

Tensor gradient_buffer(size_t input, const std::vector<int64_t>& shape, DType dtype,
                       const Device& device) {
  if (t_offers && input < t_offers->size()) {
    const Tensor& d = (*t_offers)[input];
    if (d.defined() && d.shape() == shape && d.dtype() == dtype && d.device() == device) return d;
  }
  return Tensor::empty(shape, dtype, device);
}

Node::Node() : sequence_nr(g_next_sequence.fetch_add(1, std::memory_order_relaxed)) {}

HookHandle register_multi_grad_hook(const std::vector<Var>& outputs, std::function<void()> hook) {
  struct State {
    std::function<void()> hook;
    // The backward it last fired in. Atomic: graphs hooked with one callback may run
    // backward on different threads.
    std::atomic<uint64_t> fired_in{0};
  };
  auto state = std::make_shared<State>();
  state->hook = std::move(hook);
  std::vector<HookHandle> handles;
  for (const Var& v : outputs) {
    if (!v.defined() || !v.requires_grad() || v.is_leaf()) continue;
    handles.push_back(v.register_grad_hook([state](const Tensor&) {
      const uint64_t now = t_backward_id;
      uint64_t seen = state->fired_in.load(std::memory_order_relaxed);
      while (seen != now) {
        if (state->fired_in.compare_exchange_weak(seen, now)) {
          state->hook();
          return;
        }
      }
    }));
  }
  return HookHandle([handles = std::move(handles)]() mutable {
    for (auto& h : handles) h.remove();
  });
}

std::vector<const VarImpl*> reachable_leaves(const Var& output) {
  std::vector<const VarImpl*> leaves;
  if (!output.defined() || !output.requires_grad()) return leaves;
  if (output.is_leaf()) return {output.impl()};
  std::unordered_map<Node*, bool> visited;
  std::vector<Node*> stack{output.grad_fn().get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (visited[n]) continue;
    visited[n] = true;
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) {
      if (auto var = acc->variable()) leaves.push_back(var.get());
      continue;
    }
    for (auto& next : n->next) {
      if (next && !visited[next.get()]) stack.push_back(next.get());
    }
  }
  return leaves;
}

Var make_result(Tensor output, std::shared_ptr<Node> node, const std::vector<Var>& inputs) {
  bool needs_grad = false;
  if (t_grad_mode) {
    for (const auto& in : inputs) needs_grad |= in.defined() && in.requires_grad();
  }
  if (!needs_grad) return Var(std::move(output));
  node->next.reserve(inputs.size());
  for (const auto& in : inputs) node->next.push_back(gradient_edge(in));
  Var result(std::move(output), /*requires_grad=*/true);
  result.impl()->grad_fn = std::move(node);
  return result;
}

NoGradGuard::NoGradGuard() : previous_(t_grad_mode) {
  t_grad_mode = false;
}
NoGradGuard::~NoGradGuard() {
  t_grad_mode = previous_;
}

}  // namespace ddpb::autograd

// Reverse-mode autograd with gradient-ready and pre-backward hooks, and freeable parameters.
//
// Forward ops (core/functional.h) record a Node per result; backward() runs the nodes in
// reverse, in order of readiness, and accumulates leaf gradients.
//
// Note [Gradient-ready hooks]
// Every leaf Var that requires grad (a parameter) can carry hooks that fire exactly once per
// backward, the moment its gradient is final: the engine counts every use of the parameter
// in the graph and runs its accumulator only after all of them delivered their gradient, so
// a tied weight (GPT-2's wte, also the LM head) fires once with both contributions summed.
// Hooks fire in the order gradients actually become ready: a ready accumulator runs before
// any other ready node, so the hook fires before backward goes on. A parameter that the graph does
// not reach (unused in this forward) never fires. DDP's Reducer relies on all three facts.
//
// Thread-safety: a graph belongs to the thread that built it; independent graphs (one per
// DP replica) can run backward concurrently on different threads. Hooks run on the thread
// that calls backward().
//
// Note [Pre-backward hooks]
// A non-leaf Var can carry hooks (register_grad_hook) that fire once per backward, the moment
// its gradient is complete and before its producer node (grad_fn) runs backward: they are
// the node's pre-hooks, and the engine runs a node only when every consumer of its output has
// delivered, so at that point the gradient is final and nothing upstream of the Var (the
// unit that produced it) has run yet. They receive that gradient. A Var the backward does
// not reach, or reaches with no gradient, does not fire. A graph kept for a second backward
// fires again. FSDP registers one on a unit's output in its post-forward hook to all-gather
// the unit's parameters again before the unit's backward (PyTorch's Tensor.register_hook).
// A unit with several outputs uses register_multi_grad_hook: one callback, fired once per
// backward when the first of the outputs is reached. Every node of the unit lies upstream of
// some output, so it still fires before any of them; the later unit's (reverse forward
// order) has fired already, and the unit's parameters' gradient-ready hooks fire only after.
// Hooks run on the thread running backward, in registration order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ddpb::autograd {

class Node;
class Var;

using GradReadyHook = std::function<void(const Var& param)>;
// See Note [Pre-backward hooks]: the complete gradient of the hooked Var.
using GradHook = std::function<void(const Tensor& grad)>;

// What registering a removable hook returns: remove() unregisters it (PyTorch's
// RemovableHandle). Dropping the handle keeps the hook; a second remove(), or one after the
// hook's owner is gone, does nothing.
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remove) : remove_(std::move(remove)) {}
  void remove() {
    if (auto fn = std::exchange(remove_, nullptr)) fn();
  }

 private:
  std::function<void()> remove_;
};

// Hooks in registration order, each under an id for removal. run() calls a copy of the list,
// so a hook may remove itself or another while they run (the change applies next time).
template <typename Fn>
class HookList {
 public:
  uint64_t add(Fn fn) {
    hooks_.emplace_back(next_id_, std::move(fn));
    return next_id_++;
  }
  void remove(uint64_t id) {
    std::erase_if(hooks_, [id](const auto& h) { return h.first == id; });
  }
  void clear() { hooks_.clear(); }
  bool empty() const { return hooks_.empty(); }
  size_t size() const { return hooks_.size(); }
  template <typename... Args>
  void run(const Args&... args) const {
    const auto hooks = hooks_;
    for (const auto& h : hooks) h.second(args...);
  }

 private:
  std::vector<std::pair<uint64_t, Fn>> hooks_;
  uint64_t next_id_ = 0;
};

struct VarImpl {
  Tensor data;
  Tensor grad;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;      // null for leaves
  std::shared_ptr<Node> accumulator;  // leaves only, created on first use in a graph
  std::vector<GradReadyHook> hooks;
  // See Note [Gradient destinations].
  Tensor grad_destination;
  // For messages: a parameter's full name ("h.0.attn.c_attn.weight"), set by make_parameter.
  std::string name;
};

// Note [Gradient destinations]
// A leaf may name where its next gradient should be written (DDP sets its slot in the
// bucket). When backward reaches the node that produces that gradient, and it is the leaf's
// only contribution and the leaf has no gradient to accumulate into, the engine offers the
// destination to the node: gradient_buffer() returns it, the node computes straight into it
// (a GEMM with beta = 0 overwrites it), and the accumulator adopts it as .grad without a
// copy. Otherwise gradient_buffer() allocates as usual and nothing changes. Either way the
// destination is used for one backward only.

// Note [Rebinding a parameter's storage]
// A leaf's identity is its VarImpl, not its tensor: modules, optimizers, hooks and autograd's
// accumulators all hold the Var, so storage swapped in with set_data() is what every later
// forward, backward and step uses (ZeRO lays its parameters out in flat buckets this way, so
// that the all-gather writes them in place). What kept the old Tensor itself (a view taken
// earlier, an optimizer's segment) keeps the old storage: rebind first, then take views. The
// gradient is untouched; it must keep the parameter's shape.

// Note [Freeable parameters]
// FSDP keeps only its shard of a unit's parameters between uses: it frees the full
// parameters after the unit's forward and gathers them again before its backward. Autograd's
// nodes saved the parameters' tensors in forward (LinearBackward keeps the weight), so freeing
// must release the memory under those tensors, not drop the Var's handle: free_storage()
// releases the allocation of the parameter's Storage (core/tensor.h) and keeps the Storage,
// so the Var, its tensor and every saved tensor keep their shape, dtype and device, and
// restore_storage() allocates the same Storage again, which they all see (PyTorch's
// storage.resize_(0) and back). The identity is untouched (Note [Rebinding a parameter's
// storage]): modules, optimizers, hooks and accumulators hold the same VarImpl throughout.
// While freed, any read of the memory (an op, a copy, an optimizer step, a backward that
// needs it) throws naming the parameter, never reads garbage; shape() and data().shape()
// still answer. restore_storage() leaves the values to the caller (an all-gather writes them
// into data()); restore_storage(full) instead rebinds to `full`, e.g. a view into a gathered
// flat buffer, and tensors saved before that keep the freed storage. A parameter that is a
// view into a larger buffer cannot be freed alone (that would free its neighbours): release
// the buffer's Storage. The gradient is a separate tensor and stays as it is.

// A tensor handle with autograd state. Copies share the same state (like torch.Tensor).
class Var {
 public:
  Var() = default;
  explicit Var(Tensor data, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const { return impl_->data; }
  // Rebinds the variable to other storage of the same shape, dtype and device (Note
  // [Rebinding a parameter's storage]); the caller copies the values.
  void set_data(Tensor data) const;
  const Tensor& grad() const { return impl_->grad; }
  // Replaces the gradient tensor; DDP uses this to make gradients views into buckets.
  void set_grad(Tensor grad) const { impl_->grad = std::move(grad); }
  // Where the next backward should write this leaf's gradient (Note [Gradient destinations]).
  void set_grad_destination(Tensor destination) const {
    impl_->grad_destination = std::move(destination);
  }
  bool requires_grad() const { return impl_->requires_grad; }
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  const Shape& shape() const { return impl_->data.shape(); }

  // A label for messages: the parameter's full name, or empty.
  const std::string& name() const { return impl_->name; }
  void set_name(std::string name) const { impl_->name = std::move(name); }

  // See Note [Gradient-ready hooks].
  void register_grad_ready_hook(GradReadyHook hook) const;
  void clear_grad_ready_hooks() const;
  // A hook on this non-leaf Var's complete gradient, before its producer's backward runs
  // (Note [Pre-backward hooks]).
  HookHandle register_grad_hook(GradHook hook) const;

  // See Note [Freeable parameters]. free_storage() releases the memory (a no-op if freed);
  // restore_storage() allocates it again, uninitialised (a no-op if allocated);
  // restore_storage(full) rebinds to `full`, allocated, of the same shape, dtype and device.
  void free_storage() const;
  void restore_storage() const;
  void restore_storage(const Tensor& full) const;
  bool storage_freed() const;

  // Runs backward from this scalar (grad 1) or with an explicit output gradient.
  void backward(const Tensor& grad_output = Tensor()) const;

  VarImpl* impl() const { return impl_.get(); }
  static Var from_impl(std::shared_ptr<VarImpl> impl);
  const std::shared_ptr<VarImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<VarImpl> impl_;
};

// A backward function: the gradient of the node's single output in, one gradient per input
// out (undefined where the input needs none).
class Node {
 public:
  Node();
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;

  std::vector<std::shared_ptr<Node>> next;  // one per input; null if it needs no gradient
  uint64_t sequence_nr;                     // creation order; later nodes run first
  // Run with the output's gradient before apply() (Note [Pre-backward hooks]).
  HookList<GradHook> pre_hooks;

  // Whether input `i` needs a gradient (PyTorch's ctx.needs_input_grad[i]).
  bool needs_input_grad(size_t i) const { return i < next.size() && next[i] != nullptr; }
};

// For use inside Node::apply: a buffer for the gradient of the running node's input `input`,
// the offered destination (Note [Gradient destinations]) when it has this shape, dtype and
// device, else a new uninitialised tensor.
Tensor gradient_buffer(size_t input, const std::vector<int64_t>& shape, DType dtype,
                       const Device& device);

// Wires `node` to `inputs` and returns the result Var: with grad mode on and any input
// requiring grad, the result requires grad and has `node` as grad_fn; otherwise it is a
// plain constant and `node` is dropped.
Var make_result(Tensor output, std::shared_ptr<Node> node, const std::vector<Var>& inputs);

// Calls `hook` once per backward, when the first of `outputs` that the backward reaches gets
// its gradient, before any node upstream of them runs (PyTorch's register_multi_grad_hook,
// mode "any"; Note [Pre-backward hooks]). Outputs that need no gradient, and leaves, are
// skipped; with none left it never fires. The handle removes it from every output.
HookHandle register_multi_grad_hook(const std::vector<Var>& outputs, std::function<void()> hook);

// The leaf Vars whose gradients a backward from `output` would reach: DDP's
// find-unused-parameters search (a parameter not in the set gets no gradient this step).
std::vector<const VarImpl*> reachable_leaves(const Var& output);

// Thread-local switch, as torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace ddpb::autograd

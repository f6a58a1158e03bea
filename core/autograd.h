// Reverse-mode autograd with gradient-ready hooks.
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
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ddpb::autograd {

class Node;
class Var;

using GradReadyHook = std::function<void(const Var& param)>;

struct VarImpl {
  Tensor data;
  Tensor grad;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;      // null for leaves
  std::shared_ptr<Node> accumulator;  // leaves only, created on first use in a graph
  std::vector<GradReadyHook> hooks;
  // See Note [Gradient destinations].
  Tensor grad_destination;
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

  // See Note [Gradient-ready hooks].
  void register_grad_ready_hook(GradReadyHook hook) const;
  void clear_grad_ready_hooks() const;

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

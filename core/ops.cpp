// Argument validation for every op, then dispatch to the backend of the tensors' device.
// Backends may rely on these checks (see core/backend.h).
#include "core/ops.h"

#include <atomic>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/check.h"
#include "core/nvtx.h"
#include "core/op_checks.h"
#include "core/progress.h"
#include "core/stream_sanitizer.h"

namespace ddpb::ops {
namespace detail {

void require_defined(const Tensor& t, const char* what) {
  DDPB_CHECK(t.defined()) << what << " is an undefined tensor";
}

Backend& same_device(const char* op, std::initializer_list<std::pair<const Tensor*, DType>> ts) {
  const Device* dev = nullptr;
  for (auto& [t, dtype] : ts) {
    DDPB_CHECK(t->defined()) << op << ": undefined tensor argument";
    DDPB_CHECK(t->dtype() == dtype)
        << op << ": expected " << dtype_name(dtype) << ", got " << t->describe();
    if (!dev) {
      dev = &t->device();
    } else {
      DDPB_CHECK(t->device() == *dev) << op << ": tensors on different devices (" << dev->str()
                                      << " and " << t->describe() << ")";
    }
  }
  return backend_for(dev->type);
}

void same_numel(const char* op, const Tensor& a, const Tensor& b) {
  DDPB_CHECK(a.numel() == b.numel())
      << op << ": size mismatch " << a.describe() << " vs " << b.describe();
}

void require_shape(const char* op, const Tensor& t, const Shape& shape) {
  DDPB_CHECK(t.shape() == shape) << op << ": expected shape " << shape_str(shape) << ", got "
                                 << t.describe();
}

void accesses(const char* op, const Device& device, std::initializer_list<const Tensor*> reads,
              std::initializer_list<const Tensor*> writes) {
  progress::note_op();  // Note [Step watchdog]
  if (sanitizer::enabled()) sanitizer::on_op(current_stream(device), op, reads, writes);
}

}  // namespace detail

namespace {

using namespace detail;

std::atomic<MathMode> g_math_mode{MathMode::FP32};
std::atomic<AttentionKind> g_attention_kind{AttentionKind::Math};

bool is_float(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

// The dtypes autocast stores activations in (Note [Autocast], core/functional.cpp): f32 or
// bf16. Returns the tensor's dtype after checking it is one of them.
DType f32_or_bf16(const char* op, const Tensor& t) {
  DDPB_CHECK(t.defined()) << op << ": undefined tensor argument";
  DDPB_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16)
      << op << ": expected f32 or bf16, got " << t.describe();
  return t.dtype();
}

// The stream a copy runs on (core/backend.h): the CUDA side's, the destination's when both
// sides are CUDA or both are CPU. A copy between two devices of one type is also ordered
// after the source device's current stream, as CUDA's peer copies are (an event recorded
// there, waited on by the copying stream).
void sanitize_copy(const Tensor& src, const Tensor& dst) {
  const Device& s = src.device();
  const Device& d = dst.device();
  const Device& on = (d.is_cuda() || !s.is_cuda()) ? d : s;
  Stream& stream = current_stream(on);
  if (s != d && s.type == d.type)
    sanitizer::stream_acquire(stream, sanitizer::snapshot(current_stream(s)));
  sanitizer::on_op(stream, "copy", {&src}, {&dst});
}

}  // namespace

void set_math_mode(MathMode mode) {
  g_math_mode = mode;
}
void set_attention_kind(AttentionKind kind) {
  g_attention_kind = kind;
}
AttentionKind attention_kind() {
  return g_attention_kind;
}
MathMode math_mode() {
  return g_math_mode;
}

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha, float beta, const Tensor& bias, Activation act) {
  DDPB_OP_RANGE("gemm");
  // Operands both f32 or both bf16; a bf16 product may leave in f32 (Note [Autocast]).
  const DType operands = f32_or_bf16("gemm", a);
  const DType out = f32_or_bf16("gemm", c);
  DDPB_CHECK(operands == DType::BF16 || out == DType::F32)
      << "gemm: f32 operands need an f32 output, got " << c.describe();
  Backend& be = same_device("gemm", {{&a, operands}, {&b, operands}, {&c, out}});
  DDPB_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2)
      << "gemm needs 2-D tensors: " << a.describe() << ", " << b.describe() << ", " << c.describe();
  int64_t m = trans_a ? a.size(1) : a.size(0);
  int64_t k = trans_a ? a.size(0) : a.size(1);
  int64_t kb = trans_b ? b.size(1) : b.size(0);
  int64_t n = trans_b ? b.size(0) : b.size(1);
  DDPB_CHECK(k == kb && c.size(0) == m && c.size(1) == n)
      << "gemm shapes do not match: a" << (trans_a ? "^T " : " ") << a.describe() << ", b"
      << (trans_b ? "^T " : " ") << b.describe() << ", c " << c.describe();
  if (bias.defined()) {
    same_device("gemm bias", {{&c, out}, {&bias, F}});
    require_shape("gemm bias", bias, {n});
  }
  accesses("gemm", c.device(), {&a, &b, &bias, beta != 0.0f ? &c : nullptr}, {&c});
  be.gemm(a, trans_a, b, trans_b, c, alpha, beta, bias, act);
}

void fill(const Tensor& t, float value) {
  Backend& be = same_device("fill", {{&t, F}});
  accesses("fill", t.device(), {}, {&t});
  be.fill(t, value);
}

void zero(const Tensor& t) {
  require_defined(t, "zero");
  accesses("zero", t.device(), {}, {&t});
  backend_for(t.device().type).zero(t);
}

void add(const Tensor& a, const Tensor& b, const Tensor& out) {
  // Each input f32 or bf16; bf16 + bf16 may stay bf16, anything else leaves in f32.
  const DType da = f32_or_bf16("add", a), db = f32_or_bf16("add", b);
  const DType dout = f32_or_bf16("add", out);
  DDPB_CHECK(dout == DType::F32 || (da == DType::BF16 && db == DType::BF16))
      << "add: " << a.describe() << " + " << b.describe() << " cannot leave in " << out.describe();
  Backend& be = same_device("add", {{&a, da}, {&b, db}, {&out, dout}});
  same_numel("add", a, b);
  same_numel("add", a, out);
  accesses("add", out.device(), {&a, &b}, {&out});
  be.add(a, b, out);
}

void mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  Backend& be = same_device("mul", {{&a, F}, {&b, F}, {&out, F}});
  same_numel("mul", a, b);
  same_numel("mul", a, out);
  accesses("mul", out.device(), {&a, &b}, {&out});
  be.mul(a, b, out);
}

void axpy(float alpha, const Tensor& x, const Tensor& y) {
  Backend& be = same_device("axpy", {{&x, F}, {&y, F}});
  same_numel("axpy", x, y);
  accesses("axpy", y.device(), {&x}, {&y});
  be.axpy(alpha, x, y);
}

void scale(const Tensor& t, float s) {
  Backend& be = same_device("scale", {{&t, F}});
  accesses("scale", t.device(), {}, {&t});
  be.scale(t, s);
}

void scale_copy(const Tensor& src, const Tensor& dst, float s) {
  Backend& be = same_device("scale_copy", {{&src, F}, {&dst, F}});
  same_numel("scale_copy", src, dst);
  accesses("scale_copy", dst.device(), {&src}, {&dst});
  be.scale_copy(src, dst, s);
}

void relu_forward(const Tensor& x, const Tensor& y) {
  const DType d = f32_or_bf16("relu_forward", x);
  Backend& be = same_device("relu_forward", {{&x, d}, {&y, d}});
  same_numel("relu_forward", x, y);
  accesses("relu_forward", y.device(), {&x}, {&y});
  be.relu_forward(x, y);
}

void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  const DType d = f32_or_bf16("relu_backward", dy);
  Backend& be = same_device("relu_backward", {{&dy, d}, {&y, d}, {&dx, d}});
  same_numel("relu_backward", dy, y);
  same_numel("relu_backward", dy, dx);
  accesses("relu_backward", dx.device(), {&dy, &y}, {&dx});
  be.relu_backward(dy, y, dx);
}

void gelu_forward(const Tensor& x, const Tensor& y) {
  const DType d = f32_or_bf16("gelu_forward", x);
  Backend& be = same_device("gelu_forward", {{&x, d}, {&y, d}});
  same_numel("gelu_forward", x, y);
  accesses("gelu_forward", y.device(), {&x}, {&y});
  be.gelu_forward(x, y);
}

void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) {
  const DType d = f32_or_bf16("gelu_backward", dy);
  Backend& be = same_device("gelu_backward", {{&dy, d}, {&x, d}, {&dx, d}});
  same_numel("gelu_backward", dy, x);
  same_numel("gelu_backward", dy, dx);
  accesses("gelu_backward", dx.device(), {&dy, &x}, {&dx});
  be.gelu_backward(dy, x, dx);
}

void cast(const Tensor& src, const Tensor& dst) {
  require_defined(src, "cast source");
  require_defined(dst, "cast destination");
  DDPB_CHECK(is_float(src.dtype()) && is_float(dst.dtype()))
      << "cast supports f32, bf16 and f16: " << src.describe() << " -> " << dst.describe();
  DDPB_CHECK(src.device() == dst.device())
      << "cast across devices: " << src.describe() << " -> " << dst.describe();
  same_numel("cast", src, dst);
  accesses("cast", dst.device(), {&src}, {&dst});
  backend_for(src.device().type).cast(src, dst);
}

void sum_rows(const Tensor& x, const Tensor& out) {
  Backend& be = same_device("sum_rows", {{&x, f32_or_bf16("sum_rows", x)}, {&out, F}});
  DDPB_CHECK(x.dim() == 2) << "sum_rows needs a 2-D input, got " << x.describe();
  require_shape("sum_rows", out, {x.size(1)});
  accesses("sum_rows", out.device(), {&x}, {&out});
  be.sum_rows(x, out);
}

void sum_all(const Tensor& x, const Tensor& out) {
  Backend& be = same_device("sum_all", {{&x, F}, {&out, F}});
  DDPB_CHECK(out.numel() == 1) << "sum_all output must have one element: " << out.describe();
  accesses("sum_all", out.device(), {&x}, {&out});
  be.sum_all(x, out);
}

void all_finite(const Tensor& x, const Tensor& out) {
  Backend& be = same_device("all_finite", {{&x, F}, {&out, F}});
  DDPB_CHECK(out.numel() == 1) << "all_finite output must have one element: " << out.describe();
  accesses("all_finite", out.device(), {&x}, {&out});
  be.all_finite(x, out);
}

void orthogonalize_columns(const Tensor& m, float epsilon) {
  Backend& be = same_device("orthogonalize_columns", {{&m, F}});
  DDPB_CHECK(m.dim() == 2 && m.size(1) <= m.size(0))
      << "orthogonalize_columns wants [N,R] with R <= N: " << m.describe();
  DDPB_CHECK(epsilon >= 0.0f) << "orthogonalize_columns: negative epsilon " << epsilon;
  accesses("orthogonalize_columns", m.device(), {&m}, {&m});
  be.orthogonalize_columns(m, epsilon);
}

void softmax_forward(const Tensor& x, const Tensor& y) {
  Backend& be = same_device("softmax_forward", {{&x, F}, {&y, F}});
  DDPB_CHECK(x.dim() >= 1 && x.shape() == y.shape())
      << "softmax_forward: " << x.describe() << " -> " << y.describe();
  accesses("softmax_forward", y.device(), {&x}, {&y});
  be.softmax_forward(x, y);
}

void softmax_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  Backend& be = same_device("softmax_backward", {{&dy, F}, {&y, F}, {&dx, F}});
  DDPB_CHECK(y.dim() >= 1 && dy.shape() == y.shape() && dx.shape() == y.shape())
      << "softmax_backward shapes: " << dy.describe() << ", " << y.describe();
  accesses("softmax_backward", dx.device(), {&dy, &y}, {&dx});
  be.softmax_backward(dy, y, dx);
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, float eps) {
  DDPB_OP_RANGE("layernorm_forward");
  Backend& be = same_device("layernorm_forward",
                            {{&x, F}, {&weight, F}, {&bias, F}, {&y, F}, {&mean, F}, {&rstd, F}});
  DDPB_CHECK(x.dim() == 2) << "layernorm_forward needs [M,C], got " << x.describe();
  int64_t m = x.size(0), c = x.size(1);
  require_shape("layernorm weight", weight, {c});
  require_shape("layernorm bias", bias, {c});
  require_shape("layernorm output", y, {m, c});
  require_shape("layernorm mean", mean, {m});
  require_shape("layernorm rstd", rstd, {m});
  accesses("layernorm_forward", y.device(), {&x, &weight, &bias}, {&y, &mean, &rstd});
  be.layernorm_forward(x, weight, bias, y, mean, rstd, eps);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias) {
  DDPB_OP_RANGE("layernorm_backward");
  Backend& be = same_device("layernorm_backward", {{&dy, F},
                                                   {&x, F},
                                                   {&weight, F},
                                                   {&mean, F},
                                                   {&rstd, F},
                                                   {&dx, F},
                                                   {&dweight, F},
                                                   {&dbias, F}});
  DDPB_CHECK(x.dim() == 2) << "layernorm_backward needs [M,C], got " << x.describe();
  int64_t m = x.size(0), c = x.size(1);
  require_shape("layernorm dy", dy, {m, c});
  require_shape("layernorm dx", dx, {m, c});
  require_shape("layernorm weight", weight, {c});
  require_shape("layernorm dweight", dweight, {c});
  require_shape("layernorm dbias", dbias, {c});
  require_shape("layernorm mean", mean, {m});
  require_shape("layernorm rstd", rstd, {m});
  accesses("layernorm_backward", dx.device(), {&dy, &x, &weight, &mean, &rstd},
           {&dx, &dweight, &dbias});
  be.layernorm_backward(dy, x, weight, mean, rstd, dx, dweight, dbias);
}

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) {
  Backend& be = same_device("embedding_forward", {{&ids, I}, {&table, F}, {&out, F}});
  DDPB_CHECK(table.dim() == 2) << "embedding table must be [V,C], got " << table.describe();
  require_shape("embedding output", out, {ids.numel(), table.size(1)});
  accesses("embedding_forward", out.device(), {&ids, &table}, {&out});
  be.embedding_forward(ids, table, out);
}

void embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable) {
  DDPB_OP_RANGE("embedding_backward");
  Backend& be = same_device("embedding_backward", {{&dout, F}, {&ids, I}, {&dtable, F}});
  DDPB_CHECK(dtable.dim() == 2) << "embedding grad must be [V,C], got " << dtable.describe();
  require_shape("embedding dout", dout, {ids.numel(), dtable.size(1)});
  accesses("embedding_backward", dtable.device(), {&dout, &ids}, {&dtable});
  be.embedding_backward(dout, ids, dtable);
}

namespace {
// qkv [B,T,3C] with C split into n_head heads; `saved` is what the attention keeps for
// backward: the probabilities [B,H,T,T] (materialised) or the row log-sum-exps [B,H,T]
// (flash).
enum class Saved { Probabilities, LogSumExp };
void check_attention(const char* op, const Tensor& qkv, const Tensor& saved, int n_head,
                     Saved kind) {
  DDPB_CHECK(qkv.dim() == 3 && qkv.size(2) % 3 == 0)
      << op << ": qkv must be [B,T,3C], got " << qkv.describe();
  int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3;
  DDPB_CHECK(n_head > 0 && c % n_head == 0)
      << op << ": " << c << " channels do not split into " << n_head << " heads";
  require_shape(op, saved,
                kind == Saved::Probabilities ? Shape{b, n_head, t, t} : Shape{b, n_head, t});
}
}  // namespace

void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& att, int n_head) {
  DDPB_OP_RANGE("attention_forward");
  Backend& be = same_device("attention_forward", {{&qkv, F}, {&out, F}, {&att, F}});
  check_attention("attention_forward", qkv, att, n_head, Saved::Probabilities);
  require_shape("attention output", out, {qkv.size(0), qkv.size(1), qkv.size(2) / 3});
  accesses("attention_forward", out.device(), {&qkv}, {&out, &att});
  be.attention_forward(qkv, out, att, n_head);
}

void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head) {
  DDPB_OP_RANGE("flash_attention_forward");
  Backend& be = same_device("flash_attention_forward", {{&qkv, F}, {&out, F}, {&lse, F}});
  check_attention("flash_attention_forward", qkv, lse, n_head, Saved::LogSumExp);
  require_shape("attention output", out, {qkv.size(0), qkv.size(1), qkv.size(2) / 3});
  accesses("flash_attention_forward", out.device(), {&qkv}, {&out, &lse});
  be.flash_attention_forward(qkv, out, lse, n_head);
}

void flash_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, const Tensor& dqkv, int n_head) {
  DDPB_OP_RANGE("flash_attention_backward");
  Backend& be = same_device("flash_attention_backward",
                            {{&dout, F}, {&qkv, F}, {&out, F}, {&lse, F}, {&dqkv, F}});
  check_attention("flash_attention_backward", qkv, lse, n_head, Saved::LogSumExp);
  const Shape o{qkv.size(0), qkv.size(1), qkv.size(2) / 3};
  require_shape("attention dout", dout, o);
  require_shape("attention output", out, o);
  require_shape("attention dqkv", dqkv, qkv.shape());
  accesses("flash_attention_backward", dqkv.device(), {&dout, &qkv, &out, &lse}, {&dqkv});
  be.flash_attention_backward(dout, qkv, out, lse, dqkv, n_head);
}

void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& att,
                        const Tensor& dqkv, int n_head) {
  DDPB_OP_RANGE("attention_backward");
  Backend& be = same_device("attention_backward", {{&dout, F}, {&qkv, F}, {&att, F}, {&dqkv, F}});
  check_attention("attention_backward", qkv, att, n_head, Saved::Probabilities);
  require_shape("attention dout", dout, {qkv.size(0), qkv.size(1), qkv.size(2) / 3});
  require_shape("attention dqkv", dqkv, qkv.shape());
  accesses("attention_backward", dqkv.device(), {&dout, &qkv, &att}, {&dqkv});
  be.attention_backward(dout, qkv, att, dqkv, n_head);
}

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                           const Tensor& probs) {
  DDPB_OP_RANGE("cross_entropy_forward");
  Backend& be =
      same_device("cross_entropy_forward", {{&logits, F}, {&targets, I}, {&loss, F}, {&probs, F}});
  DDPB_CHECK(logits.dim() == 2) << "cross_entropy logits must be [N,V], got " << logits.describe();
  require_shape("cross_entropy targets", targets, {logits.size(0)});
  require_shape("cross_entropy loss", loss, {1});
  require_shape("cross_entropy probs", probs, logits.shape());
  accesses("cross_entropy_forward", loss.device(), {&logits, &targets}, {&loss, &probs});
  be.cross_entropy_forward(logits, targets, loss, probs);
}

void cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& targets,
                            const Tensor& dlogits) {
  DDPB_OP_RANGE("cross_entropy_backward");
  Backend& be = same_device("cross_entropy_backward",
                            {{&dloss, F}, {&probs, F}, {&targets, I}, {&dlogits, F}});
  DDPB_CHECK(probs.dim() == 2) << "cross_entropy probs must be [N,V], got " << probs.describe();
  require_shape("cross_entropy dloss", dloss, {1});
  require_shape("cross_entropy targets", targets, {probs.size(0)});
  require_shape("cross_entropy dlogits", dlogits, probs.shape());
  accesses("cross_entropy_backward", dlogits.device(), {&dloss, &probs, &targets}, {&dlogits});
  be.cross_entropy_backward(dloss, probs, targets, dlogits);
}

void copy(const Tensor& src, const Tensor& dst) {
  require_defined(src, "copy source");
  require_defined(dst, "copy destination");
  DDPB_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel())
      << "copy between mismatched tensors: " << src.describe() << " -> " << dst.describe();
  if (src.numel() == 0) return;
  bool any_cuda = src.device().is_cuda() || dst.device().is_cuda();
  if (sanitizer::enabled()) sanitize_copy(src, dst);
  backend_for(any_cuda ? DeviceType::CUDA : DeviceType::CPU).copy(src, dst);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr,
              float momentum, float weight_decay, bool first_step) {
  DDPB_OP_RANGE("sgd_step");
  Backend& be = same_device("sgd_step", {{&param, F}, {&grad, F}});
  same_numel("sgd_step", param, grad);
  if (momentum != 0.0f) {
    same_device("sgd_step", {{&param, F}, {&momentum_buf, F}});
    same_numel("sgd_step", param, momentum_buf);
  }
  accesses("sgd_step", param.device(), {&grad}, {&param, &momentum_buf});
  be.sgd_step(param, grad, momentum_buf, lr, momentum, weight_decay, first_step);
}

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, float lr,
                float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  DDPB_OP_RANGE("adamw_step");
  Backend& be = same_device("adamw_step", {{&param, F}, {&grad, F}, {&m, F}, {&v, F}});
  same_numel("adamw_step", param, grad);
  same_numel("adamw_step", param, m);
  same_numel("adamw_step", param, v);
  DDPB_CHECK(step >= 1) << "adamw_step counts steps from 1, got " << step;
  accesses("adamw_step", param.device(), {&grad}, {&param, &m, &v});
  be.adamw_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step);
}

namespace {

// What a multi-tensor step reads and writes, declared as one op (the per-tensor ops'
// accesses() for a list).
void list_accesses(const char* op, const Device& device, std::vector<Tensor> reads,
                   std::vector<Tensor> writes) {
  progress::note_op();  // Note [Step watchdog]
  if (sanitizer::enabled()) sanitizer::on_op(current_stream(device), op, reads, writes);
}

// Every list has `params`'s length; returns the backend of the (common) device, or null for
// an empty list.
Backend* check_lists(const char* op, std::span<const Tensor> params,
                     std::initializer_list<std::span<const Tensor>> others) {
  for (const auto& list : others) {
    DDPB_CHECK(list.size() == params.size())
        << op << ": lists of " << params.size() << " and " << list.size() << " tensors";
  }
  if (params.empty()) return nullptr;
  require_defined(params[0], op);
  return &backend_for(params[0].device().type);
}

}  // namespace

void sgd_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                    std::span<const Tensor> momentum_bufs, float lr, float momentum,
                    float weight_decay, bool first_step) {
  DDPB_OP_RANGE("sgd_step_multi");
  const bool with_momentum = momentum != 0.0f;
  if (!with_momentum) momentum_bufs = {};  // never touched: may be empty or undefined
  Backend* be = with_momentum ? check_lists("sgd_step_multi", params, {grads, momentum_bufs})
                              : check_lists("sgd_step_multi", params, {grads});
  if (be == nullptr) return;
  std::vector<Tensor> reads, writes;
  for (size_t i = 0; i < params.size(); ++i) {
    same_device("sgd_step_multi", {{&params[0], F}, {&params[i], F}, {&grads[i], F}});
    same_numel("sgd_step_multi", params[i], grads[i]);
    reads.push_back(grads[i]);
    writes.push_back(params[i]);
    if (!with_momentum) continue;
    same_device("sgd_step_multi", {{&params[i], F}, {&momentum_bufs[i], F}});
    same_numel("sgd_step_multi", params[i], momentum_bufs[i]);
    writes.push_back(momentum_bufs[i]);
  }
  list_accesses("sgd_step_multi", params[0].device(), std::move(reads), std::move(writes));
  be->sgd_step_multi(params, grads, momentum_bufs, lr, momentum, weight_decay, first_step);
}

void adamw_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                      std::span<const Tensor> m, std::span<const Tensor> v, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int64_t step) {
  DDPB_OP_RANGE("adamw_step_multi");
  DDPB_CHECK(step >= 1) << "adamw_step counts steps from 1, got " << step;
  Backend* be = check_lists("adamw_step_multi", params, {grads, m, v});
  if (be == nullptr) return;
  std::vector<Tensor> reads, writes;
  for (size_t i = 0; i < params.size(); ++i) {
    same_device("adamw_step_multi",
                {{&params[0], F}, {&params[i], F}, {&grads[i], F}, {&m[i], F}, {&v[i], F}});
    same_numel("adamw_step_multi", params[i], grads[i]);
    same_numel("adamw_step_multi", params[i], m[i]);
    same_numel("adamw_step_multi", params[i], v[i]);
    reads.push_back(grads[i]);
    writes.insert(writes.end(), {params[i], m[i], v[i]});
  }
  list_accesses("adamw_step_multi", params[0].device(), std::move(reads), std::move(writes));
  be->adamw_step_multi(params, grads, m, v, lr, beta1, beta2, eps, weight_decay, step);
}

}  // namespace ddpb::ops

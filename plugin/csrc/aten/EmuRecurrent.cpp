// Fused recurrent cells on emu. For a PrivateUse1 input, ATen's LSTM and GRU layers (RNN.cpp) call the
// fused cell ops that only CUDA implements (_thnn_fused_lstm_cell, _thnn_fused_gru_cell) and, in
// backward, their *_backward_impl; with no CPU kernel either, the CPU fallback cannot run them. These
// kernels compute the same gate math as CUDA's, with the same workspace layout (what backward reads),
// as stream work on CPU tensors aliasing device memory.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <tuple>

#include "aten/Launch.h"

namespace torch_emu {

namespace {

using at::Tensor;

const Tensor& value_or_undefined(const compat::optional<Tensor>& t) {
  static const Tensor undefined;
  return t.has_value() ? *t : undefined;
}

void check_gates(
    const char* op,
    const Tensor& input_gates,
    const Tensor& hidden_gates,
    const Tensor& state,
    int64_t chunks,
    const Tensor& input_bias,
    const Tensor& hidden_bias) {
  TORCH_CHECK(
      input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes(),
      op,
      ": expected 2-D input_gates and hidden_gates of the same shape, got ",
      input_gates.sizes(),
      " and ",
      hidden_gates.sizes());
  TORCH_CHECK(
      state.dim() == 2 && state.size(0) == input_gates.size(0) && state.size(1) * chunks == input_gates.size(1),
      op,
      ": expected a state of shape [",
      input_gates.size(0),
      ", ",
      input_gates.size(1) / chunks,
      "], got ",
      state.sizes());
  TORCH_CHECK(input_bias.defined() == hidden_bias.defined(), op, ": expected both biases or neither");
  if (input_bias.defined()) {
    TORCH_CHECK(
        input_bias.dim() == 1 && input_bias.size(0) == input_gates.size(1) && hidden_bias.sizes() == input_bias.sizes(),
        op,
        ": expected biases of shape [",
        input_gates.size(1),
        "], got ",
        input_bias.sizes(),
        " and ",
        hidden_bias.sizes());
  }
  for (const Tensor* t : {&hidden_gates, &state, &input_bias, &hidden_bias}) {
    TORCH_CHECK(
        !t->defined() || t->scalar_type() == input_gates.scalar_type(),
        op,
        ": expected all arguments of dtype ",
        input_gates.scalar_type(),
        ", got ",
        t->scalar_type());
  }
}

// ---- LSTM: workspace holds the activated gates [i, f, g, o] ----
std::tuple<Tensor, Tensor, Tensor> lstm_cell(
    const Tensor& input_gates,
    const Tensor& hidden_gates,
    const Tensor& cx,
    const compat::optional<Tensor>& input_bias_opt,
    const compat::optional<Tensor>& hidden_bias_opt) {
  const Tensor& input_bias = value_or_undefined(input_bias_opt);
  const Tensor& hidden_bias = value_or_undefined(hidden_bias_opt);
  const auto device =
      common_device("_thnn_fused_lstm_cell", {&input_gates, &hidden_gates, &cx, &input_bias, &hidden_bias});
  check_gates("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, 4, input_bias, hidden_bias);
  Tensor hy = at::empty(cx.sizes(), cx.options());
  Tensor cy = at::empty(cx.sizes(), cx.options());
  Tensor workspace = at::empty(input_gates.sizes(), input_gates.options());
  launch(
      device,
      [hy = arg(hy),
       cy = arg(cy),
       workspace = arg(workspace),
       input_gates = arg(input_gates),
       hidden_gates = arg(hidden_gates),
       cx = arg(cx),
       input_bias = arg(input_bias),
       hidden_bias = arg(hidden_bias)] {
        Tensor gates = kernel_view(input_gates) + kernel_view(hidden_gates);
        const Tensor ib = kernel_view(input_bias);
        if (ib.defined())
          gates = gates + ib + kernel_view(hidden_bias);
        const auto chunks = gates.chunk(4, 1);
        const Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
        at::cat_out(as_lvalue(kernel_view(workspace)), {i, f, g, o}, 1);
        Tensor c = kernel_view(cy);
        c.copy_(f.mul(kernel_view(cx)).add_(i.mul(g)));
        kernel_view(hy).copy_(o.mul(c.tanh()));
      });
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward(
    const compat::optional<Tensor>& grad_hy_opt,
    const compat::optional<Tensor>& grad_cy_opt,
    const Tensor& cx,
    const Tensor& cy,
    const Tensor& workspace,
    bool has_bias) {
  const Tensor& grad_hy = value_or_undefined(grad_hy_opt);
  const Tensor& grad_cy = value_or_undefined(grad_cy_opt);
  const auto device = common_device("_thnn_fused_lstm_cell_backward_impl", {&grad_hy, &grad_cy, &cx, &cy, &workspace});
  if (!grad_hy.defined() && !grad_cy.defined())
    return {Tensor(), Tensor(), Tensor()};
  TORCH_CHECK(
      workspace.dim() == 2 && cx.sizes() == cy.sizes() && workspace.size(1) == 4 * cx.size(1),
      "_thnn_fused_lstm_cell_backward_impl: workspace ",
      workspace.sizes(),
      " does not match cx ",
      cx.sizes());
  Tensor grad_gates = at::empty(workspace.sizes(), workspace.options());
  Tensor grad_cx = at::empty(cx.sizes(), cx.options());
  Tensor grad_bias = has_bias ? at::empty({workspace.size(1)}, workspace.options()) : Tensor();
  launch(
      device,
      [grad_gates = arg(grad_gates),
       grad_cx = arg(grad_cx),
       grad_bias = arg(grad_bias),
       grad_hy = arg(grad_hy),
       grad_cy = arg(grad_cy),
       cx = arg(cx),
       cy = arg(cy),
       workspace = arg(workspace)] {
        const auto gates = kernel_view(workspace).chunk(4, 1);
        const Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
        const Tensor c = kernel_view(cx);
        const Tensor gh = kernel_view(grad_hy), gc = kernel_view(grad_cy);
        const Tensor tanh_cy = kernel_view(cy).tanh();
        Tensor grad_o, grad_c;
        if (gh.defined()) {
          grad_o = gh.mul(tanh_cy).mul_(o.mul(1 - o));
          grad_c = gh.mul(o).mul_(1 - tanh_cy.mul(tanh_cy));
          if (gc.defined())
            grad_c.add_(gc);
        } else {
          grad_o = at::zeros_like(o);
          grad_c = gc.clone();
        }
        const Tensor grad_i = grad_c.mul(g).mul_(i.mul(1 - i));
        const Tensor grad_f = grad_c.mul(c).mul_(f.mul(1 - f));
        const Tensor grad_g = grad_c.mul(i).mul_(1 - g.mul(g));
        Tensor out = kernel_view(grad_gates);
        at::cat_out(out, {grad_i, grad_f, grad_g, grad_o}, 1);
        kernel_view(grad_cx).copy_(grad_c.mul(f));
        Tensor bias = kernel_view(grad_bias);
        if (bias.defined())
          at::sum_out(bias, out, {0}, false);
      });
  return {grad_gates, grad_cx, grad_bias};
}

// ---- GRU: workspace holds [r, z, n, hx, hn] (hn with the hidden bias) ----
std::tuple<Tensor, Tensor> gru_cell(
    const Tensor& input_gates,
    const Tensor& hidden_gates,
    const Tensor& hx,
    const compat::optional<Tensor>& input_bias_opt,
    const compat::optional<Tensor>& hidden_bias_opt) {
  const Tensor& input_bias = value_or_undefined(input_bias_opt);
  const Tensor& hidden_bias = value_or_undefined(hidden_bias_opt);
  const auto device =
      common_device("_thnn_fused_gru_cell", {&input_gates, &hidden_gates, &hx, &input_bias, &hidden_bias});
  check_gates("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, 3, input_bias, hidden_bias);
  Tensor hy = at::empty(hx.sizes(), hx.options());
  Tensor workspace = at::empty({hx.size(0), hx.size(1) * 5}, input_gates.options());
  launch(
      device,
      [hy = arg(hy),
       workspace = arg(workspace),
       input_gates = arg(input_gates),
       hidden_gates = arg(hidden_gates),
       hx = arg(hx),
       input_bias = arg(input_bias),
       hidden_bias = arg(hidden_bias)] {
        Tensor ig = kernel_view(input_gates), hg = kernel_view(hidden_gates);
        const Tensor ib = kernel_view(input_bias);
        if (ib.defined()) {
          ig = ig + ib;
          hg = hg + kernel_view(hidden_bias);
        }
        const auto in = ig.chunk(3, 1);
        const auto hn = hg.chunk(3, 1);
        const Tensor r = in[0].add(hn[0]).sigmoid_();
        const Tensor z = in[1].add(hn[1]).sigmoid_();
        const Tensor n = in[2].add(r.mul(hn[2])).tanh_();
        const Tensor h = kernel_view(hx);
        kernel_view(hy).copy_(n.add(z.mul(h.sub(n))));
        at::cat_out(as_lvalue(kernel_view(workspace)), {r, z, n, h, hn[2]}, 1);
      });
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(
    const Tensor& grad_hy,
    const Tensor& workspace,
    bool has_bias) {
  const auto device = common_device("_thnn_fused_gru_cell_backward", {&grad_hy, &workspace});
  TORCH_CHECK(
      grad_hy.dim() == 2 && workspace.dim() == 2 && workspace.size(1) == 5 * grad_hy.size(1) &&
          workspace.size(0) == grad_hy.size(0),
      "_thnn_fused_gru_cell_backward: workspace ",
      workspace.sizes(),
      " does not match grad_hy ",
      grad_hy.sizes());
  const int64_t batch = grad_hy.size(0), hidden = grad_hy.size(1);
  Tensor grad_input_gates = at::empty({batch, 3 * hidden}, workspace.options());
  Tensor grad_hidden_gates = at::empty({batch, 3 * hidden}, workspace.options());
  Tensor grad_hx = at::empty({batch, hidden}, workspace.options());
  Tensor grad_input_bias = has_bias ? at::empty({3 * hidden}, workspace.options()) : Tensor();
  Tensor grad_hidden_bias = has_bias ? at::empty({3 * hidden}, workspace.options()) : Tensor();
  launch(
      device,
      [gig = arg(grad_input_gates),
       ghg = arg(grad_hidden_gates),
       ghx = arg(grad_hx),
       gib = arg(grad_input_bias),
       ghb = arg(grad_hidden_bias),
       grad_hy = arg(grad_hy),
       workspace = arg(workspace)] {
        const auto ws = kernel_view(workspace).chunk(5, 1);
        const Tensor &r = ws[0], &z = ws[1], &n = ws[2], &h = ws[3], &hn = ws[4];
        const Tensor go = kernel_view(grad_hy);
        const Tensor grad_z = go.mul(h.sub(n)).mul_(z.mul(1 - z));
        const Tensor grad_n = go.mul(1 - z).mul_(1 - n.mul(n));
        const Tensor grad_hn = grad_n.mul(r);
        const Tensor grad_r = grad_n.mul(hn).mul_(r.mul(1 - r));
        Tensor input_gates = kernel_view(gig), hidden_gates = kernel_view(ghg);
        at::cat_out(input_gates, {grad_r, grad_z, grad_n}, 1);
        at::cat_out(hidden_gates, {grad_r, grad_z, grad_hn}, 1);
        kernel_view(ghx).copy_(go.mul(z));
        Tensor input_bias = kernel_view(gib), hidden_bias = kernel_view(ghb);
        if (input_bias.defined()) {
          at::sum_out(input_bias, input_gates, {0}, false);
          at::sum_out(hidden_bias, hidden_gates, {0}, false);
        }
      });
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}

} // namespace torch_emu

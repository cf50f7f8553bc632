// Linear algebra kernels: mm, bmm and addmm.
#include "aten/native/LinearAlgebra.h"

#include <ATen/ops/addmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mm.h>

#include "aten/native/Common.h"

namespace torch_emu {
namespace native {

// ---- linear algebra ----
void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  TORCH_CHECK(
      a.scalar_type() == b.scalar_type(),
      "expected m1 and m2 to have the same dtype, but got: ",
      a.scalar_type(),
      " != ",
      b.scalar_type(),
      " (in ",
      op,
      ")");
}

Tensor mm(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(
      a.size(1) == b.size(0),
      "mat1 and mat2 shapes cannot be multiplied (",
      a.size(0),
      "x",
      a.size(1),
      " and ",
      b.size(0),
      "x",
      b.size(1),
      ")");
  check_matmul_dtypes("mm", a, b);
  const bool widened =
      computes_widened("mm", {a.scalar_type(), a.scalar_type(), b.scalar_type()}, [&](const Dtypes& d) {
        at::mm_out(
            as_lvalue(one_on_cpu(d[0]).view({1, 1})), one_on_cpu(d[1]).view({1, 1}), one_on_cpu(d[2]).view({1, 1}));
      });
  const auto device = common_device("mm", {&a, &b});
  Tensor out = at::empty({a.size(0), b.size(1)}, on_emu(device, a.scalar_type()));
  launch(device, [out = arg(out), a = arg(a), b = arg(b), widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      at::mm_out(o, computed(kernel_view(a), widened), computed(kernel_view(b), widened));
    });
  });
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(
      a.size(0) == b.size(0) && a.size(2) == b.size(1),
      "Expected size for first two dimensions of batch2 tensor to be: [",
      a.size(0),
      ", ",
      a.size(2),
      "] but got: [",
      b.size(0),
      ", ",
      b.size(1),
      "].");
  check_matmul_dtypes("bmm", a, b);
  const bool widened =
      computes_widened("bmm", {a.scalar_type(), a.scalar_type(), b.scalar_type()}, [&](const Dtypes& d) {
        at::bmm_out(
            as_lvalue(one_on_cpu(d[0]).view({1, 1, 1})),
            one_on_cpu(d[1]).view({1, 1, 1}),
            one_on_cpu(d[2]).view({1, 1, 1}));
      });
  const auto device = common_device("bmm", {&a, &b});
  Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, on_emu(device, a.scalar_type()));
  launch(device, [out = arg(out), a = arg(a), b = arg(b), widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      at::bmm_out(o, computed(kernel_view(a), widened), computed(kernel_view(b), widened));
    });
  });
  return out;
}

Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const at::Scalar& beta, const at::Scalar& alpha) {
  TORCH_CHECK(
      a.dim() == 2 && b.dim() == 2, "addmm: mat1 and mat2 must be matrices, got ", a.dim(), "-D and ", b.dim(), "-D");
  TORCH_CHECK(
      a.size(1) == b.size(0),
      "mat1 and mat2 shapes cannot be multiplied (",
      a.size(0),
      "x",
      a.size(1),
      " and ",
      b.size(0),
      "x",
      b.size(1),
      ")");
  check_matmul_dtypes("addmm", a, b);
  // dtypes: the result's (a's), self's, b's (a's too, checked above)
  const bool widened =
      computes_widened("addmm", {a.scalar_type(), self.scalar_type(), b.scalar_type()}, [&](const Dtypes& d) {
        at::addmm_out(
            as_lvalue(one_on_cpu(d[0]).view({1, 1})),
            one_on_cpu(d[1]).view({1, 1}),
            one_on_cpu(d[0]).view({1, 1}),
            one_on_cpu(d[2]).view({1, 1}),
            beta,
            alpha);
      });
  const auto device = common_device("addmm", {&self, &a, &b});
  Tensor out = at::empty({a.size(0), b.size(1)}, on_emu(device, a.scalar_type()));
  TORCH_CHECK(
      at::is_expandable_to(self.sizes(), out.sizes()),
      "addmm: self of shape ",
      self.sizes(),
      " cannot broadcast to the result shape ",
      out.sizes());
  launch(device, [out = arg(out), self = arg(self), a = arg(a), b = arg(b), beta, alpha, widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      at::addmm_out(
          o,
          computed(kernel_view(self), widened),
          computed(kernel_view(a), widened),
          computed(kernel_view(b), widened),
          beta,
          alpha);
    });
  });
  return out;
}

} // namespace native
} // namespace torch_emu

// Computing an op in a wider dtype and casting its results back (see Widen.h).
#include "aten/Widen.h"

#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/Exception.h>

#include <cctype>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace torch_emu {

bool is_narrow(c10::ScalarType t) {
  return t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16 || t == c10::ScalarType::ComplexHalf;
}

c10::ScalarType wider(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
      return c10::ScalarType::Float;
    case c10::ScalarType::ComplexHalf:
      return c10::ScalarType::ComplexFloat;
    default:
      return t;
  }
}

at::Tensor to_wider(const at::Tensor& t) {
  return t.defined() && is_narrow(t.scalar_type()) ? t.to(wider(t.scalar_type())) : t;
}

bool is_narrow_dtype_refusal(const c10::Error& error) {
  // aten's dispatch macros say "\"abs_cpu\" not implemented for 'ComplexHalf'"; some kernels word it themselves
  // ("grid_sampler_2d_cpu not implemented for Half", "multinomial is not implemented for half on CPU", "Upsample
  // backward only support BFloat16 in the lower percision data types on CPU."). A wrong guess costs a widened call
  // that is refused in turn, after which the original error is raised.
  std::string message = error.what_without_backtrace();
  for (char& c : message)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (message.find("lower percision data types") != std::string::npos ||
      message.find("lower precision data types") != std::string::npos)
    return true;
  const size_t refusal = message.find("not implemented for");
  if (refusal == std::string::npos)
    return false;
  const std::string dtype = message.substr(refusal + 19, 16);
  for (const char* name : {"half", "bfloat16", "complexhalf"})
    if (dtype.find(name) != std::string::npos)
      return true;
  return false;
}

namespace {

// The dtype an argument requests (ScalarType or ScalarType?), if the schema declares one.
bool is_dtype_argument(const c10::Argument& argument) {
  c10::TypePtr type = argument.real_type();
  if (type->kind() == c10::TypeKind::OptionalType)
    type = type->castRaw<c10::OptionalType>()->getElementType();
  return type->kind() == c10::TypeKind::ScalarTypeType;
}

bool writes(const c10::Argument& argument) {
  return argument.alias_info() != nullptr && argument.alias_info()->isWrite();
}

// Calls f on every tensor an argument holds (itself, or the elements of a list of tensors or optional tensors).
template <typename F>
void for_each_tensor(const c10::IValue& v, const F& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined())
      f(v.toTensor());
  } else if (v.isList()) {
    for (const c10::IValue& element : v.toListRef())
      if (element.isTensor() && element.toTensor().defined())
        f(element.toTensor());
  }
}

// Per op and dtypes: the CPU kernel refused a narrow dtype and the widened call ran, so later calls go widened at once.
struct WidenedSignatures {
  std::mutex mu;
  std::set<std::string> known;
};

WidenedSignatures& widened_signatures() {
  static auto* signatures = new WidenedSignatures();
  return *signatures;
}

std::string signature(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack.size() - arguments.size();
  std::string key = op.schema().operator_name().name + "." + op.schema().operator_name().overload_name;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& v = stack[first + i];
    key += '|';
    for_each_tensor(v, [&](const at::Tensor& t) {
      key += c10::toString(t.scalar_type());
      key += ',';
    });
    if (is_dtype_argument(arguments[i]) && v.isInt())
      key += c10::toString(static_cast<c10::ScalarType>(v.toInt()));
  }
  return key;
}

// The FFT primitives refuse Half and ComplexHalf with a plain error ("MKL FFT doesn't support tensors of type:
// Half"), not aten's dtype refusal, while cuFFT computes them: they always go widened.
bool always_widened(const c10::OperatorHandle& op) {
  const std::string& name = op.schema().operator_name().name;
  return name == "aten::_fft_c2c" || name == "aten::_fft_r2c" || name == "aten::_fft_c2r";
}

// The dtype a result goes back to: the narrow inputs' promoted dtype for a result in the widened inputs' one,
// and the same for its real counterpart (abs, angle of ComplexHalf give Half) and complex one (an FFT of Half
// gives ComplexHalf); a requested narrow dtype likewise. Other results (indices, masks) keep theirs.
struct CastBack {
  std::vector<std::pair<c10::ScalarType, c10::ScalarType>> wide_to_narrow;

  void add(c10::ScalarType narrow, c10::ScalarType wide) {
    if (narrow == wide || narrow == c10::ScalarType::Undefined || !is_narrow(narrow))
      return;
    wide_to_narrow.emplace_back(wide, narrow);
    if (c10::isComplexType(narrow))
      wide_to_narrow.emplace_back(c10::toRealValueType(wide), c10::toRealValueType(narrow));
    if (narrow == c10::ScalarType::Half)
      wide_to_narrow.emplace_back(c10::toComplexType(wide), c10::ScalarType::ComplexHalf);
  }

  at::Tensor apply(const at::Tensor& t) const {
    if (!t.defined())
      return t;
    for (const auto& [wide, narrow] : wide_to_narrow)
      if (t.scalar_type() == wide)
        return t.to(narrow);
    return t;
  }
};

} // namespace

bool has_narrow_argument(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack.size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& v = stack[first + i];
    bool narrow = false;
    for_each_tensor(v, [&](const at::Tensor& t) { narrow = narrow || is_narrow(t.scalar_type()); });
    if (narrow)
      return true;
    if (is_dtype_argument(arguments[i]) && v.isInt() && is_narrow(static_cast<c10::ScalarType>(v.toInt())))
      return true;
  }
  return false;
}

void call_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t first = stack->size() - arguments.size();
  at::native::ResultTypeState narrow_inputs, wide_inputs;
  CastBack cast_back;
  std::vector<std::pair<at::Tensor, at::Tensor>> written; // (the caller's tensor, its widened stand-in)

  auto widen = [&](const at::Tensor& t, const c10::Argument& argument) {
    if (!writes(argument))
      narrow_inputs = at::native::update_result_type_state(t, narrow_inputs);
    if (!is_narrow(t.scalar_type())) {
      if (!writes(argument))
        wide_inputs = at::native::update_result_type_state(t, wide_inputs);
      return t;
    }
    TORCH_CHECK(
        argument.alias_info() == nullptr || writes(argument),
        schema.operator_name(),
        ": cannot compute in a wider dtype an op that returns a view of its ",
        c10::toString(t.scalar_type()),
        " argument '",
        argument.name(),
        "'");
    at::Tensor stand_in = t.to(wider(t.scalar_type()));
    if (writes(argument))
      written.emplace_back(t, stand_in);
    else
      wide_inputs = at::native::update_result_type_state(stand_in, wide_inputs);
    return stand_in;
  };

  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& v = (*stack)[first + i];
    const c10::Argument& argument = arguments[i];
    if (v.isTensor()) {
      if (v.toTensor().defined())
        v = c10::IValue(widen(v.toTensor(), argument));
    } else if (v.isList()) {
      bool narrow = false;
      for_each_tensor(v, [&](const at::Tensor& t) { narrow = narrow || is_narrow(t.scalar_type()); });
      if (!narrow) {
        for_each_tensor(v, [&](const at::Tensor& t) { widen(t, argument); }); // counted for the result type
        continue;
      }
      // A new list: the caller's list object must not change under it.
      c10::impl::GenericList list(v.toList().elementType());
      for (const c10::IValue& element : v.toListRef())
        list.push_back(
            element.isTensor() && element.toTensor().defined() ? c10::IValue(widen(element.toTensor(), argument)) :
                                                                 element);
      v = c10::IValue(std::move(list));
    } else if (is_dtype_argument(argument) && v.isInt()) {
      const auto requested = static_cast<c10::ScalarType>(v.toInt());
      if (is_narrow(requested)) {
        cast_back.add(requested, wider(requested));
        v = c10::IValue(static_cast<int64_t>(wider(requested)));
      }
    }
  }
  cast_back.add(at::native::result_type(narrow_inputs), at::native::result_type(wide_inputs));

  op.callBoxed(stack);

  for (auto& [caller, stand_in] : written) {
    if (caller.sizes() != stand_in.sizes())
      caller.resize_(stand_in.sizes());
    caller.copy_(stand_in);
  }
  // A result that aliases an argument (the self of an in-place op, an out=) is that argument: the caller's
  // tensor for a stand-in, else as it is; any other result is cast back.
  const auto& returns = schema.returns();
  const size_t first_result = stack->size() - returns.size();
  for (size_t j = 0; j < returns.size(); ++j) {
    const bool aliases = returns[j].alias_info() != nullptr;
    auto result = [&](const at::Tensor& t) {
      for (const auto& [caller, stand_in] : written)
        if (t.is_same(stand_in))
          return caller;
      return aliases ? t : cast_back.apply(t);
    };
    c10::IValue& r = (*stack)[first_result + j];
    if (r.isTensor()) {
      r = c10::IValue(result(r.toTensor()));
    } else if (r.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : r.toTensorList().vec())
        list.push_back(result(t));
      r = c10::IValue(std::move(list));
    }
  }
}

void cpu_fallback_or_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string key = signature(op, *stack);
  bool known = always_widened(op);
  if (!known) {
    std::lock_guard<std::mutex> lock(widened_signatures().mu);
    known = widened_signatures().known.count(key) != 0;
  }
  if (known) {
    call_widened(op, stack);
    return;
  }
  const size_t first = stack->size() - op.schema().arguments().size();
  const std::vector<c10::IValue> arguments(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  std::exception_ptr refusal;
  try {
    at::native::cpu_fallback(op, stack);
    return;
  } catch (const c10::Error& error) {
    if (!is_narrow_dtype_refusal(error))
      throw;
    refusal = std::current_exception();
  }
  // The CPU kernel raised before computing anything: the op runs again from the caller's arguments.
  stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  stack->insert(stack->end(), arguments.begin(), arguments.end());
  try {
    call_widened(op, stack);
  } catch (const c10::Error& error) {
    // The wider dtype is refused too: the op does not take this dtype at all, and says so in the caller's terms.
    if (std::string(error.what_without_backtrace()).find("not implemented for '") != std::string::npos)
      std::rethrow_exception(refusal);
    throw;
  }
  std::lock_guard<std::mutex> lock(widened_signatures().mu);
  widened_signatures().known.insert(key);
}

} // namespace torch_emu

// Element types of the interconnect (API 2.3) and the reductions its collectives apply, float16 and bfloat16 through
// float (round to nearest even on the way back).
#include "comm_internal.h"

#if EMU_DRIVER_HAS_COMM

#include <cstring>

namespace emu {
namespace comm {

size_t elem_size(emuDataType t) {
  switch (t) {
    case emuInt8:
    case emuUint8:
    case emuBool:
      return 1;
    case emuFloat16:
    case emuBfloat16:
    case emuInt16:
      return 2;
    case emuInt32:
    case emuFloat32:
      return 4;
    case emuInt64:
    case emuFloat64:
      return 8;
  }
  return 0;
}

const char* type_name(uint32_t t) {
  static const char* names[] = {
      "int8", "uint8", "int32", "int64", "float16", "float32", "float64", "bfloat16", "bool", "int16"};
  return t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((m & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) { // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff)
    return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31)
    return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10)
      return uint16_t(sign);
    man |= 0x800000;
    const uint32_t shift = uint32_t(14 - exp);
    uint32_t h = man >> shift;
    const uint32_t rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1)))
      ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(exp) << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h;
  return uint16_t(sign | h);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000)
    return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

template <typename T>
T combine(T a, T b, emuRedOp op) {
  switch (op) {
    case emuProd:
      return T(a * b);
    case emuMax:
      return a < b ? b : a;
    case emuMin:
      return b < a ? b : a;
    default:
      return T(a + b);
  }
}

template <typename T, emuRedOp Op>
void reduce_loop(T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    a[i] = combine(a[i], b[i], Op);
}

// The operator is chosen once per call, not per element: each loop is then one operation the compiler vectorises.
template <typename T>
void reduce_typed(void* acc, const void* in, size_t n, emuRedOp op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  switch (op) {
    case emuProd:
      return reduce_loop<T, emuProd>(a, b, n);
    case emuMax:
      return reduce_loop<T, emuMax>(a, b, n);
    case emuMin:
      return reduce_loop<T, emuMin>(a, b, n);
    default:
      return reduce_loop<T, emuSum>(a, b, n);
  }
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void reduce_narrow(void* acc, const void* in, size_t n, emuRedOp op) {
  auto* a = static_cast<uint16_t*>(acc);
  const auto* b = static_cast<const uint16_t*>(in);
  for (size_t i = 0; i < n; ++i)
    a[i] = Store(combine(Load(a[i]), Load(b[i]), op));
}

template <typename T>
void divide_typed(void* acc, size_t n, int by) {
  T* a = static_cast<T*>(acc);
  for (size_t i = 0; i < n; ++i)
    a[i] = T(a[i] / T(by));
}

} // namespace

void reduce_into(void* acc, const void* in, size_t n, emuDataType t, emuRedOp op) {
  switch (t) {
    case emuInt8:
      return reduce_typed<int8_t>(acc, in, n, op);
    case emuUint8:
      return reduce_typed<uint8_t>(acc, in, n, op);
    case emuInt16:
      return reduce_typed<int16_t>(acc, in, n, op);
    case emuInt32:
      return reduce_typed<int32_t>(acc, in, n, op);
    case emuInt64:
      return reduce_typed<int64_t>(acc, in, n, op);
    case emuFloat32:
      return reduce_typed<float>(acc, in, n, op);
    case emuFloat64:
      return reduce_typed<double>(acc, in, n, op);
    case emuFloat16:
      return reduce_narrow<half_to_float, float_to_half>(acc, in, n, op);
    case emuBfloat16:
      return reduce_narrow<bf16_to_float, float_to_bf16>(acc, in, n, op);
    case emuBool: {
      auto* a = static_cast<uint8_t*>(acc);
      const auto* b = static_cast<const uint8_t*>(in);
      const bool any = op == emuSum || op == emuMax || op == emuAvg;
      for (size_t i = 0; i < n; ++i)
        a[i] = any ? (a[i] || b[i]) : (a[i] && b[i]);
      return;
    }
  }
}

void divide(void* acc, size_t n, emuDataType t, int by) {
  switch (t) {
    case emuInt8:
      return divide_typed<int8_t>(acc, n, by);
    case emuUint8:
      return divide_typed<uint8_t>(acc, n, by);
    case emuInt16:
      return divide_typed<int16_t>(acc, n, by);
    case emuInt32:
      return divide_typed<int32_t>(acc, n, by);
    case emuInt64:
      return divide_typed<int64_t>(acc, n, by);
    case emuFloat32:
      return divide_typed<float>(acc, n, by);
    case emuFloat64:
      return divide_typed<double>(acc, n, by);
    case emuFloat16: {
      auto* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < n; ++i)
        a[i] = float_to_half(half_to_float(a[i]) / float(by));
      return;
    }
    case emuBfloat16: {
      auto* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < n; ++i)
        a[i] = float_to_bf16(bf16_to_float(a[i]) / float(by));
      return;
    }
    case emuBool:
      return;
  }
}

} // namespace comm
} // namespace emu

#endif // EMU_DRIVER_HAS_COMM

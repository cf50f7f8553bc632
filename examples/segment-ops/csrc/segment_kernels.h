// The kernels proper: plain loops over raw pointers, shared by the ordinary and the stable-ABI registration so the two
// builds compute exactly the same thing. No torch header here: these functions know nothing of tensors.
#pragma once

#include <cstdint>
#include <string>

namespace segops {

// Why an index is unusable ("" when every index is in [0, num_segments)): the callers raise it in their own way.
inline std::string check_index(const int64_t* index, int64_t rows, int64_t num_segments) {
  for (int64_t row = 0; row < rows; ++row) {
    if (index[row] < 0 || index[row] >= num_segments) {
      return "index[" + std::to_string(row) + "] = " + std::to_string(index[row]) + " is outside [0, " +
          std::to_string(num_segments) + ")";
    }
  }
  return "";
}

// out[index[row], col] += src[row, col]; out must be zeroed, num_segments x cols, row-major.
template <typename scalar_t>
void segment_sum(const scalar_t* src, const int64_t* index, scalar_t* out, int64_t rows, int64_t cols) {
  for (int64_t row = 0; row < rows; ++row) {
    scalar_t* target = out + index[row] * cols;
    const scalar_t* source = src + row * cols;
    for (int64_t col = 0; col < cols; ++col) {
      target[col] += source[col];
    }
  }
}

// counts[s] = how many rows index names segment s; counts must be zeroed, num_segments long.
inline void segment_count(const int64_t* index, int64_t* counts, int64_t rows) {
  for (int64_t row = 0; row < rows; ++row) {
    counts[index[row]] += 1;
  }
}

}  // namespace segops

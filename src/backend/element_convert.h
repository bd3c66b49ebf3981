// Conversions between float and the 16-bit floating-point formats, for backends that compute
// on them without hardware support (the host backend's MPI reduction of fp16/bf16, and the
// host-side checks of reduced values). Round to nearest even, as CUDA's __float2half_rn and
// __float2bfloat16_rn do; NaN stays NaN.
#pragma once

#include <bit>
#include <cstdint>

namespace bucketsim {

inline float Bf16ToFloat(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t FloatToBf16(float value) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float Fp16ToFloat(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal (or zero): mantissa * 2^-24.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline std::uint16_t FloatToFp16(float value) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;              // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;             // rounds to infinity
  if (magnitude < 0x38800000u) {                                   // subnormal half (or zero)
    float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;  // * 2^24: units of 2^-24
    auto units = static_cast<std::uint32_t>(scaled);
    float rest = scaled - static_cast<float>(units);
    if (rest > 0.5f || (rest == 0.5f && (units & 1u))) ++units;
    return sign | static_cast<std::uint16_t>(units);
  }
  std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return sign | static_cast<std::uint16_t>((rounded - 0x38000000u) >> 13);
}

}  // namespace bucketsim

#include "kernels/cpu/vec.h"

#include <immintrin.h>

namespace loragate::cpu {
namespace {

float dot_scalar(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

void axpy_scalar(float p, const float* x, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += p * x[j];
}

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, int64_t n) {
  // Two accumulators hide FMA latency on long rows; the final sum order is fixed.
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16), acc1);
  }
  if (j + 16 <= n) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), acc0);
    j += 16;
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(acc0, acc1));
  float s = 0.0f;
  for (float lane : lanes) s += lane;
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

__attribute__((target("avx512f"))) void axpy_avx512(float p, const float* x, float* y, int64_t n) {
  const __m512 vp = _mm512_set1_ps(p);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(y + j, _mm512_fmadd_ps(vp, _mm512_loadu_ps(x + j), _mm512_loadu_ps(y + j)));
  for (; j < n; ++j) y[j] += p * x[j];
}

struct VecKernels {
  float (*dot)(const float*, const float*, int64_t);
  void (*axpy)(float, const float*, float*, int64_t);
};

const VecKernels& kernels() {
  static const VecKernels k = __builtin_cpu_supports("avx512f") ? VecKernels{dot_avx512, axpy_avx512}
                                                                : VecKernels{dot_scalar, axpy_scalar};
  return k;
}

}  // namespace

float vec_dot(const float* a, const float* b, int64_t n) { return kernels().dot(a, b, n); }
void vec_axpy(float p, const float* x, float* y, int64_t n) { kernels().axpy(p, x, y, n); }

}  // namespace loragate::cpu

// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// 8-bit activations with integer dot products (llama.cpp's approach, opt-in).

#pragma once

namespace {

// ---- 8-bit activations (llama.cpp's approach) -------------------------------------------------------
// Each row's block of 32 activations is rounded to int8 with one float scale dx = max|x| / 127 (and its
// sum sx = dx · Σq, which the q4 offset needs), then multiplied with the weights' integers exactly:
//   q4:  Σ (d·q + m) · dx·qx = d·dx · Σ q·qx + m · sx          q8:  d·dx · Σ q·qx
// On AVX2 the 32 integer products of a block are two instructions (maddubs, madd); the float work is one
// multiply-add per block instead of one per weight. The activations' rounding is the price (relative
// error ~1/254 per value); `weights = "auto"` and `bench --fidelity` decide whether it is paid.

struct Quantized {
  std::vector<int8_t> q;   // (M, K)
  std::vector<float> d;    // (M, K/32): dx
  std::vector<float> sum;  // (M, K/32): dx · Σ q
};

void quantize_rows(const Problem& p, Quantized& out) {
  const int64_t blocks = p.k / kBlock;
  out.q.resize(p.m * p.k);
  out.d.resize(p.m * blocks);
  out.sum.resize(p.m * blocks);
  for (int64_t i = 0; i < p.m * blocks; ++i) {
    const float* x = p.x + i * kBlock;
    float amax = 0.0f;
    for (int64_t j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t total = 0;
    for (int64_t j = 0; j < kBlock; ++j) {
      const int32_t q = static_cast<int32_t>(std::nearbyint(x[j] * inverse));
      out.q[i * kBlock + j] = static_cast<int8_t>(std::clamp(q, -127, 127));
      total += out.q[i * kBlock + j];
    }
    out.d[i] = d;
    out.sum[i] = d * static_cast<float>(total);
  }
}

#if defined(__AVX2__)
typedef __m256i Integers;  // the 32 integers of a block of weights

// Weights as unsigned bytes (q4: 0..15, element order) or, for q8, |q| with x's signs moved onto them.
template <bool Q4>
inline Integers block_integers(const Problem& p, int64_t n, int64_t b) {
  if constexpr (Q4) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.w + n * (p.k / 2) + b * (kBlock / 2)));
    const __m128i nibble = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble), _mm_and_si128(bytes, nibble));
  } else {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.w + n * p.k + b * kBlock));
  }
}

template <bool Q4>
inline __m256 block_dot(Integers w, const int8_t* xq) {  // Σ w·x over the block, 8 int32 lanes as floats
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  // VNNI: one instruction sums each lane's four byte products into int32. The integers are the ones
  // maddubs + madd give (|products| stay below int16's limit), so every copy's bits agree.
  const __m256i zero = _mm256_setzero_si256();
  if constexpr (Q4) return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(zero, w, x));
  return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(zero, _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)));
#else
  __m256i pairs;
  if constexpr (Q4) {
    pairs = _mm256_maddubs_epi16(w, x);
  } else {
    pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  }
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

inline float hsum8(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

template <bool Q4, int ROWS, int OUTS>
void int8_tile(const Problem& p, const Quantized& xs, int64_t row0, int64_t n0, int64_t n1) {
  const int64_t blocks = p.k / kBlock;
  int64_t n = n0;
  for (; n + OUTS <= n1; n += OUTS) {
    __m256 acc[OUTS][ROWS];
    float offset[OUTS][ROWS] = {};
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) acc[r][i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      for (int r = 0; r < OUTS; ++r) {
        const Integers w = block_integers<Q4>(p, n + r, b);
        const float d = half_to_float(p.scale[(n + r) * blocks + b]);
        for (int i = 0; i < ROWS; ++i) {
          const int64_t at = (row0 + i) * blocks + b;
          acc[r][i] = _mm256_fmadd_ps(block_dot<Q4>(w, xs.q.data() + at * kBlock), _mm256_set1_ps(d * xs.d[at]),
                                      acc[r][i]);
        }
        if constexpr (Q4) {
          const float m = half_to_float(p.shift[(n + r) * blocks + b]);
          // std::fma: one rounding whatever the tile (a vectorized and a scalar += could round apart).
          for (int i = 0; i < ROWS; ++i) offset[r][i] = std::fma(m, xs.sum[(row0 + i) * blocks + b], offset[r][i]);
        }
      }
    }
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) p.y[(row0 + i) * p.n + n + r] = hsum8(acc[r][i]) + offset[r][i];
  }
  if (n < n1) int8_tile<Q4, ROWS, 1>(p, xs, row0, n, n1);
}
#else
// Without AVX2: the same integers and the same order of float sums, by plain loops.
template <bool Q4, int ROWS, int OUTS>
void int8_tile(const Problem& p, const Quantized& xs, int64_t row0, int64_t n0, int64_t n1) {
  const int64_t blocks = p.k / kBlock;
  for (int64_t n = n0; n < n1; ++n)
    for (int i = 0; i < ROWS; ++i) {
      float acc = 0.0f, offset = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t at = (row0 + i) * blocks + b;
        const int8_t* x = xs.q.data() + at * kBlock;
        int32_t dot = 0;
        if constexpr (Q4) {
          const uint8_t* bytes = p.w + n * (p.k / 2) + b * (kBlock / 2);
          for (int64_t j = 0; j < kBlock / 2; ++j) dot += (bytes[j] & 15) * x[j] + (bytes[j] >> 4) * x[j + kBlock / 2];
          offset = std::fma(half_to_float(p.shift[n * blocks + b]), xs.sum[at], offset);
        } else {
          const int8_t* q = reinterpret_cast<const int8_t*>(p.w) + n * p.k + b * kBlock;
          for (int64_t j = 0; j < kBlock; ++j) dot += q[j] * x[j];
        }
        acc = std::fma(static_cast<float>(dot), half_to_float(p.scale[n * blocks + b]) * xs.d[at], acc);
      }
      p.y[(row0 + i) * p.n + n] = acc + offset;
    }
}
#endif

// Outputs [n0, n1) for every row, eight rows at a time whatever the batch (a row's bits never depend on
// its neighbours, in a prefill as in a step).
template <bool Q4>
void int8_part(const Problem& p, const Quantized& xs, int64_t n0, int64_t n1) {
  for (int64_t row = 0; row < p.m;) {
    switch (std::min<int64_t>(8, p.m - row)) {
      case 1: int8_tile<Q4, 1, 4>(p, xs, row, n0, n1); row += 1; break;
      case 2: int8_tile<Q4, 2, 4>(p, xs, row, n0, n1); row += 2; break;
      case 3: int8_tile<Q4, 3, 2>(p, xs, row, n0, n1); row += 3; break;
      case 4: case 5: case 6: case 7: int8_tile<Q4, 4, 2>(p, xs, row, n0, n1); row += 4; break;
      default: int8_tile<Q4, 8, 1>(p, xs, row, n0, n1); row += 8; break;
    }
  }
}

void run_int8(ffi::ThreadPool& pool, const Problem& problem, bool q4) {
  Quantized xs;
  quantize_rows(problem, xs);
  over_outputs(pool, problem, 4, [&problem, &xs, q4](int64_t n0, int64_t n1) {
    q4 ? int8_part<true>(problem, xs, n0, n1) : int8_part<false>(problem, xs, n0, n1);
  });
}

}  // namespace

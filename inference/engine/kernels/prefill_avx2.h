// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// a prefill on the AVX2 copy: outer products of 16-bit integer pairs over a k-major panel.

#pragma once

namespace {

#if defined(FIXIT_INT16_ROWS) && !defined(__AVX512F__)
#define FIXIT_OUTER_INT16 1
// ---- a prefill on the AVX2 copy: outer products of 16-bit integer pairs over a k-major panel --------
// The generic panel path (blocks.h) keeps k in the vector lanes: 27 G weights/s at 100 rows on an AMD
// Zen 3, where XLA's float32 dot (YNNPACK's 6 x 16 tile) reached 63. The panel here holds its kPanel
// outputs side by side for each k, so a register tile adds one broadcast x times two vectors of outputs
// per step, with no sums at the end. It first did so in float32 (6 rows x 16 outputs, twelve FMAs a k),
// at its FMAs' rate: 8 products an instruction, two a cycle. A madd multiplies 16 words and sums them in
// pairs, also two a cycle (AMD Zen 3), so the rows are now rounded to int16 per block as a decode batch's
// are (rows_to_int16: the same integers, the same error) and the panel holds each output's weights as
// 16-bit integers (block_words), two consecutive k a 32-bit lane: a register of 8 outputs x one pair of
// k. A tile of kPairRows rows x kPanel outputs adds, for each pair, one broadcast pair of x times those
// two registers (madd, then an integer add) into int32 accumulators; at the end of a block (q6: of a
// group of 16) each is converted once and multiplied by its outputs' scales times the row's dx into the
// tile's float sums, plus m·dx·Σqx for q4. 1.2-1.35x the float panel's rate at 100 rows (Qwen2.5-Coder-
// 1.5B's and SmolLM2's shapes, every format). The integers are exact, and each (row, output) adds its
// blocks in order of k, whatever the batch or the row's place in it.

// The 8 x 8 floats at src (rows ``from`` apart) transposed to dst (rows ``to`` apart).
inline void transpose8(const float* src, int64_t from, float* dst, int64_t to) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * from);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * to, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * to, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

constexpr int64_t kPairs = kBlock / 2;  // pairs of k a block
static_assert(kPanel == 16 && kLanes == 8, "a pair panel's step is two registers of 8 outputs");
// Rows a tile: 4 x 2 int32 accumulators, the weights' two registers, the broadcast pair and a madd's
// product fit AVX2's 16 registers (six rows, as the float tile had, ran 1.05x slower).
constexpr int kPairRows = 4;
// The accumulators' type: GCC's own vector, whose += is one vpaddd into the accumulator's register. With
// __m256i and _mm256_add_epi32 GCC added into a temporary and copied it back, eight copies a step.
typedef int32_t Int32x8 __attribute__((vector_size(32)));

// Outputs [n, n + width) of the block formats' integers as a pair panel, panel[(b · kPairs + j) · kPanel
// + o] = words 2j, 2j + 1 of output o's block b, and their scales, scales[g · kPanel + o] (q6: a scale a
// group of 16, g = 2b, 2b + 1), and q4's offsets, shifts[b · kPanel + o]; outputs past width are zero.
template <Format F>
void pair_panel(const Problem& p, int64_t n, int64_t width, int32_t* panel, float* scales, float* shifts) {
  constexpr int64_t per_block = F == Format::q6 ? 2 : 1;
  const int64_t blocks = p.k / kBlock;
  alignas(32) int32_t block[kPanel][kPairs];  // output o's pairs of block b in element order
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t o = 0; o < kPanel; ++o) {
      Words w{_mm256_setzero_si256(), _mm256_setzero_si256()};
      if (o < width) w = block_words<F>(p, n + o, b);
      _mm256_store_si256(reinterpret_cast<__m256i*>(block[o]), w.low);
      _mm256_store_si256(reinterpret_cast<__m256i*>(block[o] + kPairs / 2), w.high);
      for (int64_t g = 0; g < per_block; ++g)
        scales[(per_block * b + g) * kPanel + o] =
            o < width ? half_to_float(p.scale[(n + o) * per_block * blocks + per_block * b + g]) : 0.0f;
      if constexpr (F == Format::q4)
        shifts[b * kPanel + o] = o < width ? half_to_float(p.shift[(n + o) * blocks + b]) : 0.0f;
    }
    for (int64_t o = 0; o < kPanel; o += 8)  // 32-bit lanes move as floats' bits do
      for (int64_t j = 0; j < kPairs; j += 8)
        transpose8(reinterpret_cast<const float*>(&block[o][j]), kPairs,
                   reinterpret_cast<float*>(panel + (b * kPairs + j) * kPanel + o), kPanel);
  }
}

// The rows' integers in groups of kPairRows, pair-major: groups[(g · K/2 + j) · kPairRows + r] = words
// 2j, 2j + 1 of row g · kPairRows + r; a last group's missing rows are zeros whose sums nobody reads.
void pair_rows(const Problem& p, const Rows16& xs, std::vector<int32_t>& groups) {
  const int64_t pairs = p.k / 2;
  groups.assign((p.m + kPairRows - 1) / kPairRows * kPairRows * pairs, 0);
  for (int64_t row = 0; row < p.m; ++row) {
    int32_t* group = &groups[row / kPairRows * kPairRows * pairs + row % kPairRows];
    const int16_t* q = xs.q.data() + row * p.k;
    for (int64_t j = 0; j < pairs; ++j) std::memcpy(group + j * kPairRows, q + 2 * j, sizeof(int32_t));
  }
}

// One group of rows times the panel: sums (kPairRows x kPanel) of the ``groups`` of scales (each
// ``span`` pairs: a block, or q6's group of 16). ``dx``: the group's first row's dx per scale (row stride
// ``stride``); q4's ``row_sums`` (dx·Σqx a block, the same stride) times ``shifts``. The eight
// accumulators are named one by one: GCC keeps an array of them on the stack.
template <Format F>
void pair_tile(const int32_t* group, const int32_t* panel, const float* scales, const float* shifts,
               const float* dx, const float* row_sums, int64_t stride, int64_t count, float* sums) {
  constexpr int64_t span = F == Format::q6 ? kQ6Group / 2 : kPairs;
  for (int64_t i = 0; i < kPairRows * kPanel; ++i) sums[i] = 0.0f;
#define FIXIT_MADD_ROW(r)                                                                               \
  const __m256i x##r = _mm256_set1_epi32(group[k * kPairRows + r]);                                     \
  a##r##0 += reinterpret_cast<Int32x8>(_mm256_madd_epi16(w0, x##r)),                                     \
  a##r##1 += reinterpret_cast<Int32x8>(_mm256_madd_epi16(w1, x##r));
#define FIXIT_SCALE_ROW(r)                                                                              \
  {                                                                                                      \
    const __m256 d = _mm256_broadcast_ss(dx + r * stride + s);                                           \
    float* to = sums + r * kPanel;                                                                       \
    __m256 low = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reinterpret_cast<__m256i>(a##r##0)), _mm256_mul_ps(d0, d), \
                                 _mm256_loadu_ps(to));                                                   \
    __m256 high = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reinterpret_cast<__m256i>(a##r##1)), _mm256_mul_ps(d1, d), \
                                  _mm256_loadu_ps(to + 8));                                              \
    if constexpr (F == Format::q4) {                                                                     \
      const __m256 t = _mm256_broadcast_ss(row_sums + r * stride + s);                                   \
      low = _mm256_fmadd_ps(m0, t, low), high = _mm256_fmadd_ps(m1, t, high);                            \
    }                                                                                                    \
    _mm256_storeu_ps(to, low), _mm256_storeu_ps(to + 8, high);                                           \
  }
  for (int64_t s = 0; s < count; ++s) {
    Int32x8 a00 = {}, a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    for (int64_t k = s * span; k < (s + 1) * span; ++k) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kPanel));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kPanel + 8));
      FIXIT_MADD_ROW(0) FIXIT_MADD_ROW(1) FIXIT_MADD_ROW(2) FIXIT_MADD_ROW(3)
    }
    const __m256 d0 = _mm256_loadu_ps(scales + s * kPanel), d1 = _mm256_loadu_ps(scales + s * kPanel + 8);
    __m256 m0 = d0, m1 = d1;
    if constexpr (F == Format::q4)
      m0 = _mm256_loadu_ps(shifts + s * kPanel), m1 = _mm256_loadu_ps(shifts + s * kPanel + 8);
    (void)m0, (void)m1;
    FIXIT_SCALE_ROW(0) FIXIT_SCALE_ROW(1) FIXIT_SCALE_ROW(2) FIXIT_SCALE_ROW(3)
  }
#undef FIXIT_MADD_ROW
#undef FIXIT_SCALE_ROW
}
static_assert(kPairRows == 4, "pair_tile names four rows");

// Outputs [n0, n1) of every row, from the rows in pair-major groups (pair_rows).
template <Format F>
void pair_panel_rows(const Problem& p, const Rows16& xs, const std::vector<int32_t>& groups, int64_t n0,
                     int64_t n1) {
  constexpr int64_t per_block = F == Format::q6 ? 2 : 1;
  const int64_t blocks = p.k / kBlock, count = per_block * blocks;
  const bool q6 = F == Format::q6;
  const int64_t stride = q6 ? 2 * xs.stride : xs.stride;
  const float* dx = q6 ? xs.scale16.data() : xs.scale.data();
  thread_local std::vector<int32_t> panel;
  thread_local std::vector<float> scales, shifts;
  panel.resize(kPanel * p.k / 2);
  scales.resize(kPanel * count);
  shifts.resize(kPanel * blocks);
  alignas(32) float sums[kPairRows * kPanel];
  for (int64_t n = n0; n < n1; n += kPanel) {
    const int64_t width = std::min(kPanel, n1 - n);
    pair_panel<F>(p, n, width, panel.data(), scales.data(), shifts.data());
    for (int64_t row = 0; row < p.m; row += kPairRows) {
      const int64_t rows = std::min<int64_t>(kPairRows, p.m - row);
      pair_tile<F>(&groups[row * p.k / 2], panel.data(), scales.data(), shifts.data(), dx + row * stride,
                   xs.sums.data() + row * xs.stride, stride, count, sums);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(p.y + (row + r) * p.n + n, &sums[r * kPanel], width * sizeof(float));
    }
  }
}

void run_outer_int16(ffi::ThreadPool& pool, const Problem& problem, Format format) {
  Rows16 xs;
  rows_to_int16(problem, format, xs);
  // a last group's missing rows read zero scales (their integers are zero too)
  const int64_t padded = (problem.m + kPairRows - 1) / kPairRows * kPairRows;
  xs.scale.resize(padded * xs.stride, 0.0f);
  xs.sums.resize(padded * xs.stride, 0.0f);
  if (format == Format::q6) xs.scale16.resize(padded * 2 * xs.stride, 0.0f);
  std::vector<int32_t> groups;
  pair_rows(problem, xs, groups);
  over_outputs(pool, problem, kPanel, [&problem, &xs, &groups, format](int64_t n0, int64_t n1) {
    switch (format) {
      case Format::q4: return pair_panel_rows<Format::q4>(problem, xs, groups, n0, n1);
      case Format::q6: return pair_panel_rows<Format::q6>(problem, xs, groups, n0, n1);
      default: return pair_panel_rows<Format::q8>(problem, xs, groups, n0, n1);
    }
  });
}
#endif

}  // namespace

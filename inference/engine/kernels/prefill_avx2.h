// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// a prefill on the AVX2 copy: outer products over a k-major panel.

#pragma once

namespace {

#if defined(__AVX2__) && !defined(__AVX512F__)
#define FIXIT_OUTER_PANEL 1
// ---- a prefill on the AVX2 copy: outer products over a k-major panel -------------------------------
// The dot-product tiles above keep k in the lanes, so a 16-output panel splits into five 4 x 3 tiles and
// one column that runs on single accumulators (one FMA chain each, bound by its latency), and every
// (row, output) ends in a horizontal sum: 27 G weights/s at 100 rows on an AMD Zen 3, where XLA's
// float32 dot (YNNPACK's 6 x 16 tile) reached 63. Here the panel holds its kPanel outputs side by side
// for each k (two vectors) and the rows come in groups of kOuterRows, also k-major; a register tile of
// 6 rows x 16 outputs adds one broadcast x times those two vectors per k: 12 independent accumulators,
// two loads of weights and six broadcasts for 12 FMAs, no sums at the end. Each (row, output) is its
// products summed in order of k, whatever the batch or the row's place in it.
constexpr int kOuterRows = 6;
static_assert(kPanel == 2 * kLanes, "a k-major panel row is two vectors of outputs");

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

// Outputs [n, n + width) (width <= kPanel) decoded into panel[k * kPanel + j]; outputs past width are 0.
template <Format F>
void kmajor_panel(const Problem& p, int64_t n, int64_t width, float* panel) {
  alignas(32) float block[kPanel][kBlock];
  for (int64_t b = 0; b < p.k / kBlock; ++b) {
    for (int64_t j = 0; j < kPanel; ++j) {
      Weights w{};
      if (j < width) decode<F>(p, n + j, b, w);
      std::memcpy(block[j], &w.v, sizeof w.v);
    }
    for (int64_t j = 0; j < kPanel; j += 8)
      for (int64_t e = 0; e < kBlock; e += 8) transpose8(&block[j][e], kBlock, panel + (b * kBlock + e) * kPanel + j, kPanel);
  }
}

// The rows of x in groups of kOuterRows, each group k-major (group[k * kOuterRows + r]); a last group's
// missing rows are zeros whose sums nobody reads.
void kmajor_rows(const Problem& p, std::vector<float>& groups) {
  groups.assign((p.m + kOuterRows - 1) / kOuterRows * kOuterRows * p.k, 0.0f);
  for (int64_t row = 0; row < p.m; ++row) {
    float* group = &groups[row / kOuterRows * kOuterRows * p.k + row % kOuterRows];
    for (int64_t k = 0; k < p.k; ++k) group[k * kOuterRows] = p.x[row * p.k + k];
  }
}

// One group of rows times the panel: sums (kOuterRows x kPanel). The twelve accumulators are named one by
// one: GCC kept an array of them on the stack and stored it back every k (2.6x slower).
inline void outer_tile(const float* group, const float* panel, int64_t depth, float* sums) {
#define FIXIT_FMA_ROW(r)                                                            \
  const __m256 x##r = _mm256_broadcast_ss(group + k * kOuterRows + r);              \
  a##r##0 = _mm256_fmadd_ps(x##r, w0, a##r##0), a##r##1 = _mm256_fmadd_ps(x##r, w1, a##r##1);
#define FIXIT_STORE_ROW(r) \
  _mm256_storeu_ps(sums + r * kPanel, a##r##0), _mm256_storeu_ps(sums + r * kPanel + 8, a##r##1);
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,
         a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  for (int64_t k = 0; k < depth; ++k) {
    const __m256 w0 = _mm256_loadu_ps(panel + k * kPanel), w1 = _mm256_loadu_ps(panel + k * kPanel + 8);
    FIXIT_FMA_ROW(0) FIXIT_FMA_ROW(1) FIXIT_FMA_ROW(2) FIXIT_FMA_ROW(3) FIXIT_FMA_ROW(4) FIXIT_FMA_ROW(5)
  }
  FIXIT_STORE_ROW(0) FIXIT_STORE_ROW(1) FIXIT_STORE_ROW(2) FIXIT_STORE_ROW(3) FIXIT_STORE_ROW(4) FIXIT_STORE_ROW(5)
#undef FIXIT_FMA_ROW
#undef FIXIT_STORE_ROW
}
static_assert(kOuterRows == 6, "outer_tile names six rows");

// Outputs [n0, n1) of every row, from the rows in k-major groups (kmajor_rows).
template <Format F>
void outer_panel_rows(const Problem& p, const std::vector<float>& groups, int64_t n0, int64_t n1) {
  thread_local std::vector<float> panel;
  panel.resize(kPanel * p.k);
  alignas(32) float sums[kOuterRows * kPanel];
  for (int64_t n = n0; n < n1; n += kPanel) {
    const int64_t width = std::min(kPanel, n1 - n);
    kmajor_panel<F>(p, n, width, panel.data());
    for (int64_t row = 0; row < p.m; row += kOuterRows) {
      outer_tile(&groups[row * p.k], panel.data(), p.k, sums);
      for (int64_t r = 0; r < std::min<int64_t>(kOuterRows, p.m - row); ++r)
        std::memcpy(p.y + (row + r) * p.n + n, &sums[r * kPanel], width * sizeof(float));
    }
  }
}

void run_outer(ffi::ThreadPool& pool, const Problem& problem, Format format) {
  std::vector<float> groups;
  kmajor_rows(problem, groups);
  over_outputs(pool, problem, kPanel, [&problem, &groups, format](int64_t n0, int64_t n1) {
    switch (format) {
      case Format::q4: return outer_panel_rows<Format::q4>(problem, groups, n0, n1);
      case Format::q6: return outer_panel_rows<Format::q6>(problem, groups, n0, n1);
      default: return outer_panel_rows<Format::q8>(problem, groups, n0, n1);
    }
  });
}
#endif

}  // namespace

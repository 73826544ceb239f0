// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// decode rows with 16-bit activations (the AVX2 copy; q8 on the avx512 copy).

#pragma once

namespace {

#if !defined(__AVX512BF16__)
#if defined(__AVX2__)
#define FIXIT_INT16_ROWS 1
// ---- decode rows with 16-bit activations (the AVX2 copy; q8 on the avx512 copy) ---------------------
// Each row's block of 32 values is rounded to int16, qx = round(x / dx) with dx = max|x| / 32767, and the
// weights' integers multiply it exactly (madd: 16-bit products summed in pairs into int32):
//   q4: Σ (d·q + m)·x  ≈  d·dx·Σ q·qx + m·dx·Σ qx        (q 0..15)
//   q6: Σ d·(q − 32)·x ≈  d·dx·Σ (q − 32)·qx per group of 16
//   q8: Σ d·q·x        ≈  d·dx·Σ q·qx
// AVX2 has no bfloat16 product, and its float32 products need every weight widened to a float (four
// conversions a block) and four multiply-adds a row: at one row that work, not the bytes, bounded them
// (q4 at 6.6-13 GB/s against 32-37 GB/s of plain reads, 2 threads, AMD Zen 3). In 16-bit integers a block
// is one or two widenings of its bytes, then two madds a row, and one conversion and one multiply-add
// with d·dx (two for q6's two scales; q8 pairs two blocks' sums for one, add_pair): 1.6-2.2x the
// float path's rate at one row. The rounding's error is
// at most dx/2 = max|x|/65534 a value (bfloat16, which the avx512bf16 copy's exact path rounds the rows
// to, errs by up to |x|/512). A row's bits depend only on its own values, whatever the decode batch.
// The avx512 copy (AVX-512 without bfloat16 products) keeps a block's 32 words in one register, one madd
// a row, for q8 only: against its float path q8 ran 1.2-1.4x faster at eight rows and at one row of
// Qwen2.5-Coder-1.5B's shapes (AMD Zen 4; SmolLM2's one row varied 0.8-1.6x), q4 gained nothing, and q6
// lost up to 1.5x at eight rows of Qwen2.5-Coder-1.5B's (a float row-block there is two FMAs once the
// weights are decoded, an int16 one a madd, a conversion, a broadcast and an FMA); its float path is the
// more exact.
constexpr bool int16_format(Format format) {
#if defined(__AVX512F__)
  return format == Format::q8;
#else
  return true;
#endif
}

struct Rows16 {
  std::vector<int16_t> q;      // (M, K): qx
  std::vector<float> scale;    // (M, stride): dx per block, zero past the last block (whole vectors)
  std::vector<float> scale16;  // (M, 2 · stride): dx per group of 16 (q6's scales), each block's twice
  std::vector<float> sums;     // (M, stride): dx · Σ qx per block (q4's offsets)
  int64_t stride = 0;
};

inline float hmax8(__m256 v) {
  const __m128 four = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_max_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_max_ss(two, _mm_movehdup_ps(two)));
}

inline int32_t hsum8_epi32(__m256i v) {
  const __m128i four = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i two = _mm_add_epi32(four, _mm_unpackhi_epi64(four, four));
  return _mm_cvtsi128_si32(_mm_add_epi32(two, _mm_shuffle_epi32(two, 1)));
}

// The same float operations as block_formats.quantize_activations(x, levels=32767): inverse = 32767 / amax,
// qx = round-to-nearest-even(x · inverse), dx = amax / 32767. Only what ``format``'s tile reads is computed:
// q6's per-group scales, q4's block sums.
void rows_to_int16(const Problem& p, Format format, Rows16& out) {
  const int64_t blocks = p.k / kBlock;
  out.stride = (blocks + kLanes - 1) / kLanes * kLanes;
  out.q.resize(p.m * p.k);
  out.scale.assign(p.m * out.stride, 0.0f);
  if (format == Format::q6) out.scale16.assign(p.m * 2 * out.stride, 0.0f);
  out.sums.assign(p.m * out.stride, 0.0f);  // zero but for q4: the tiles take a row's pointer into it
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* x = p.x + i * p.k + b * kBlock;
      __m256 v[4];
      __m256 amax = _mm256_setzero_ps();
      for (int j = 0; j < 4; ++j) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        amax = _mm256_max_ps(amax, _mm256_and_ps(v[j], magnitude));
      }
      const float a = hmax8(amax);
      const __m256 inverse = _mm256_set1_ps(a > 0.0f ? 32767.0f / a : 0.0f);
      __m256i q[4];
      for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inverse));
      // packs interleaves 128-bit lanes (0-3 of a, 0-3 of b, 4-7 of a, 4-7 of b): a qword permute
      // restores element order
      const __m256i first = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
      const __m256i second = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8);
      int16_t* to = out.q.data() + i * p.k + b * kBlock;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), first);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + 16), second);
      const float dx = a / 32767.0f;
      out.scale[i * out.stride + b] = dx;
      if (format == Format::q6) out.scale16[i * 2 * out.stride + 2 * b] = out.scale16[i * 2 * out.stride + 2 * b + 1] = dx;
      if (format == Format::q4) {
        const int32_t total =
            hsum8_epi32(_mm256_add_epi32(_mm256_madd_epi16(first, ones), _mm256_madd_epi16(second, ones)));
        out.sums[i * out.stride + b] = dx * static_cast<float>(total);
      }
    }
}

// The vectors of a tile: 512 bits on the AVX-512 copies, 256 on AVX2 (a block's 32 words are one register
// there, two here).
#if defined(__AVX512F__)
typedef __m512 FloatVec;
inline FloatVec float_zero() { return _mm512_setzero_ps(); }
inline FloatVec float_load(const float* at) { return _mm512_loadu_ps(at); }
inline void float_store(float* at, FloatVec v) { _mm512_store_ps(at, v); }
inline FloatVec float_fma(FloatVec a, FloatVec b, FloatVec c) { return _mm512_fmadd_ps(a, b, c); }
inline FloatVec float_mul(FloatVec a, FloatVec b) { return _mm512_mul_ps(a, b); }
#else
typedef __m256 FloatVec;
inline FloatVec float_zero() { return _mm256_setzero_ps(); }
inline FloatVec float_load(const float* at) { return _mm256_loadu_ps(at); }
inline void float_store(float* at, FloatVec v) { _mm256_store_ps(at, v); }
inline FloatVec float_fma(FloatVec a, FloatVec b, FloatVec c) { return _mm256_fmadd_ps(a, b, c); }
inline FloatVec float_mul(FloatVec a, FloatVec b) { return _mm256_mul_ps(a, b); }
#endif

#if defined(__AVX512F__)
// A q8 block's 32 weights as 16-bit integers in element order, one register (int16_format: the AVX-512
// copies multiply only q8 this way).
struct Words {
  __m512i all;
};

template <Format F>
inline Words block_words(const Problem& p, int64_t n, int64_t b) {
  static_assert(F == Format::q8, "int16_format: q8 only on the AVX-512 copies");
  const uint8_t* bytes = block_bytes<F>(p, n, b);
  prefetch_ahead(bytes);
  return {_mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)))};
}

// acc += the block's integer products with the row's qx (``x``: its 32), scaled by ``scale[0]``.
template <Format F>
inline void add_block(FloatVec& acc, const Words& w, const int16_t* x, const float* scale) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(w.all, _mm512_loadu_si512(x))),
                        _mm512_set1_ps(scale[0]), acc);
}
#else
// A block's 32 weights as 16-bit integers, elements 0..15 in ``low`` and 16..31 in ``high``: q4's q,
// q6's q − 32, q8's q.
struct Words {
  __m256i low, high;
};

template <Format F>
inline Words block_words(const Problem& p, int64_t n, int64_t b) {
  __m256i low, high;
  const uint8_t* bytes = block_bytes<F>(p, n, b);
  prefetch_ahead(bytes);
  if constexpr (F == Format::q4) {  // word j: byte j, whose low nibble is element j and high one j + 16
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
    low = _mm256_and_si256(w, _mm256_set1_epi16(15));
    high = _mm256_srli_epi16(w, 4);
  } else if constexpr (F == Format::q6) {
    // As words from the start: the nibbles as q4's, then the 8 bytes of high bits in both halves of a
    // register (word j: byte j % 8, whose bits 2t..2t+1 belong to element j % 8 + 8t) moved to bits 4..5
    // by a multiply (a shift per word, which AVX2 lacks) and a mask: 15 instructions a block where bytes
    // first, then words, took 19 (Gemma 3's and Qwen2.5-Coder's 6-bit matrices at one row).
    const uint8_t* top = p.high + n * (p.k / 4) + b * (kBlock / 4);
    prefetch_ahead(top, kPrefetch / 2);
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
    int64_t eight;
    std::memcpy(&eight, top, sizeof eight);
    const __m256i tops = _mm256_cvtepu8_epi16(_mm_set1_epi64x(eight));
    const __m256i mask = _mm256_set1_epi16(0x30), centre = _mm256_set1_epi16(32);
    // elements 0..7: bits 0..1 (x 16), 8..15: bits 2..3 (x 4); 16..23: bits 4..5 (x 4 >> 2), 24..31: 6..7 (>> 2)
    const __m256i top_low = _mm256_and_si256(_mm256_mullo_epi16(tops, _mm256_setr_epi16(
        16, 16, 16, 16, 16, 16, 16, 16, 4, 4, 4, 4, 4, 4, 4, 4)), mask);
    const __m256i top_high = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(tops, _mm256_setr_epi16(
        4, 4, 4, 4, 4, 4, 4, 4, 1, 1, 1, 1, 1, 1, 1, 1)), 2), mask);
    low = _mm256_sub_epi16(_mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi16(15)), top_low), centre);
    high = _mm256_sub_epi16(_mm256_or_si256(_mm256_srli_epi16(w, 4), top_high), centre);
  } else {
    low = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
    high = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 16)));
  }
  return {low, high};
}

template <Format F>
inline void add_block(FloatVec& acc, const Words& w, const int16_t* x, const float* scale) {
  const __m256i first = _mm256_madd_epi16(w.low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  const __m256i second = _mm256_madd_epi16(w.high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16)));
  if constexpr (F == Format::q6) {  // a scale per group of 16
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(first), _mm256_broadcast_ss(scale), acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(second), _mm256_broadcast_ss(scale + 1), acc);
  } else {
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(first, second)), _mm256_broadcast_ss(scale), acc);
  }
}

// acc += two consecutive q8 blocks' products (scales ``scale[0]`` and ``scale[1]``), their
// integer sums paired before the conversion: each 128-bit lane of hadd holds [b, b, b + 1, b + 1] pair
// sums, so one conversion and one multiply-add serve both blocks. On an AMD Zen 3 madds, conversions and
// FMAs each issue two a cycle: q8 ran 1.1x as fast at eight rows of Qwen2.5-Coder-1.5B's shapes (the
// head and 6-bit matrices there), q4 no faster, so it keeps a conversion a block. A lane then sums eight
// products, which can pass 2^24 (|q| <= 127) and lose their last bit in the conversion: less than the
// float sums' own rounding.
template <Format F>
inline void add_pair(FloatVec& acc, const Words& w0, const Words& w1, const int16_t* x0, const int16_t* x1,
                     const float* scale) {
  static_assert(F == Format::q8, "q8 only: q4 gained nothing, q6 has a scale per group of 16");
  const __m256i block0 = _mm256_add_epi32(
      _mm256_madd_epi16(w0.low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0))),
      _mm256_madd_epi16(w0.high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + 16))));
  const __m256i block1 = _mm256_add_epi32(
      _mm256_madd_epi16(w1.low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1))),
      _mm256_madd_epi16(w1.high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1 + 16))));
  const __m256 two = _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(scale)));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_hadd_epi32(block0, block1)), _mm256_unpacklo_ps(two, two), acc);
}
#endif

// Rows [0, ROWS) x outputs [n0, n1), OUTS at a time; the scales (and q4's offsets) kLanes at a time, as
// float_tile has them: kLanes blocks, or kLanes groups of 16 for q6. ``q``: the first row's integers (row
// stride K); ``dx``: its dx per scale, ``sums`` its block sums (q4), both with row stride ``stride``.
template <Format F, int ROWS, int OUTS>
void int16_tile(const Problem& p, const int16_t* q, const float* dx, const float* sums, int64_t stride,
                int64_t n0, int64_t n1) {
  constexpr int64_t per_block = F == Format::q6 ? 2 : 1;  // scales a block
  const int64_t scales = per_block * (p.k / kBlock);
  int64_t n = n0;
  for (; n + OUTS <= n1; n += OUTS) {
    FloatVec acc[OUTS][ROWS];
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) acc[r][i] = float_zero();
    for (int64_t s0 = 0; s0 < scales; s0 += kLanes) {
      const int64_t count = std::min<int64_t>(kLanes, scales - s0);  // q6: even, two groups a block
      alignas(sizeof(FloatVec)) float scale[OUTS][ROWS][kLanes];  // d·dx of each scale
      for (int r = 0; r < OUTS; ++r) {
        const int64_t at = (n + r) * scales + s0;
        prefetch_ahead(p.scale + at, F == Format::q6 ? kPrefetch / 4 : kPrefetch / 8);
        const FloatVec d = load_halves(p.scale + at, count);  // f32v is FloatVec's width
        if constexpr (F == Format::q4) {
          prefetch_scales(p.shift + at);
          const FloatVec m = load_halves(p.shift + at, count);
          for (int i = 0; i < ROWS; ++i) acc[r][i] = float_fma(m, float_load(sums + i * stride + s0), acc[r][i]);
        }
        for (int i = 0; i < ROWS; ++i) float_store(scale[r][i], float_mul(d, float_load(dx + i * stride + s0)));
      }
      const auto scale_step = [&](int64_t s) {  // the blocks of scale s (q6: of scales s, s + 1)
        for (int r = 0; r < OUTS; ++r) {
          const int64_t b = (s0 + s) / per_block;
          const Words w = block_words<F>(p, n + r, b);
          for (int i = 0; i < ROWS; ++i) add_block<F>(acc[r][i], w, q + i * p.k + b * kBlock, &scale[r][i][s]);
        }
      };
#if !defined(__AVX512F__)
      if constexpr (F == Format::q8) {  // blocks two at a time (add_pair), a last odd one alone
        const auto pair_step = [&](int64_t s) {
          for (int r = 0; r < OUTS; ++r) {
            const int64_t b = s0 + s;
            const Words w0 = block_words<F>(p, n + r, b), w1 = block_words<F>(p, n + r, b + 1);
            for (int i = 0; i < ROWS; ++i)
              add_pair<F>(acc[r][i], w0, w1, q + i * p.k + b * kBlock, q + i * p.k + (b + 1) * kBlock,
                          &scale[r][i][s]);
          }
        };
        if (count == kLanes) {
          for (int64_t s = 0; s < kLanes; s += 2) pair_step(s);
        } else {
          int64_t s = 0;
          for (; s + 2 <= count; s += 2) pair_step(s);
          if (s < count) scale_step(s);
        }
        continue;
      }
#endif
      // A whole vector of scales, the common case, runs a loop of known length: no test a block
      if (count == kLanes)
        for (int64_t s = 0; s < kLanes; s += per_block) scale_step(s);
      else
        for (int64_t s = 0; s < count; s += per_block) scale_step(s);
    }
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) {
        f32v total;
        std::memcpy(&total, &acc[r][i], sizeof total);
        p.y[i * p.n + n + r] = sum(total);
      }
  }
  if (n < n1) int16_tile<F, ROWS, 1>(p, q, dx, sums, stride, n, n1);
}

// 16 vector registers: a row's accumulator for each output of the tile, at most 8 (AVX-512's 32 would
// hold 16: 8 rows x 2 outputs measured no different from 8 x 1 on an AMD Zen 4, within its noise).
template <Format F>
struct Int16Tile {
  template <int ROWS, int OUTS>
  static void run(const Problem& p, const int16_t* q, const float* dx, const float* sums, int64_t stride,
                  int64_t n0, int64_t n1) {
    int16_tile<F, ROWS, std::max(1, std::min(OUTS, 8 / ROWS))>(p, q, dx, sums, stride, n0, n1);
  }
};

// Outputs [n0, n1) of every row, eight rows at a time whatever the batch.
template <Format F>
void int16_rows(const Problem& problem, const Rows16& xs, int64_t n0, int64_t n1) {
  const bool groups = F == Format::q6;
  const int64_t stride = groups ? 2 * xs.stride : xs.stride;
  const float* dx = groups ? xs.scale16.data() : xs.scale.data();
  for (int64_t row = 0; row < problem.m; row += 8) {
    Problem chunk = problem;
    chunk.y += row * problem.n;
    chunk.m = std::min<int64_t>(8, problem.m - row);
    by_rows<Int16Tile<F>>(chunk.m, chunk, xs.q.data() + row * problem.k, dx + row * stride,
                          xs.sums.data() + row * xs.stride, stride, n0, n1);
  }
}

void run_int16(ffi::ThreadPool& pool, const Problem& problem, Format format) {
  Rows16 xs;
  rows_to_int16(problem, format, xs);
  over_outputs(pool, problem, 4, [&problem, &xs, format](int64_t n0, int64_t n1) {
    if constexpr (int16_format(Format::q4) && int16_format(Format::q6)) {
      if (format == Format::q4) return int16_rows<Format::q4>(problem, xs, n0, n1);
      if (format == Format::q6) return int16_rows<Format::q6>(problem, xs, n0, n1);
    }
    return int16_rows<Format::q8>(problem, xs, n0, n1);
  });
}
#endif
#endif

}  // namespace

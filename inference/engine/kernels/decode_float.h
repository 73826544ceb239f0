// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// q4 and q6 decode rows in float32 (the copies whose products are float32).

#pragma once

namespace {

#if !defined(__AVX512BF16__)
// ---- q4 and q6 decode rows in float32 (the copies whose products are float32) -----------------------
//   Σ_j (d·q_j + m)·x_j = d·Σ_j q_j·x_j + m·Σ_j x_j
// A decode batch's q4 products, as the exact path above has them: the nibbles widened to the floats
// 0..15 and multiplied with x as they are (no d·q + m per weight), d applied once per block and m once per
// kLanes blocks to each row's block sums, the scales converted a vector at a time. At batch 1 that is
// about half the vector instructions of decoding d·q + m (the panel path's weights), which made the
// products bound by widening the nibbles, not by the bytes read. A row's bits depend only on its own
// values, whatever the decode batch; a prefill sums the same products in another arrangement.

// ``count`` (<= kLanes) float16 values from ``at`` as floats, the lanes past them zero, never reading past
// them (a matrix's last scales may end its buffer). A short count is a masked load: the lane-by-lane fill
// it replaced stored floats one at a time and read them back as a vector, a failed store forward (about
// ten cycles) twice an output where K is not a multiple of kLanes blocks (q4 at one row, K = 576, AMD
// Zen 3: a fifth of the tile's time).
inline f32v load_halves(const uint16_t* at, int64_t count) {
  f32v out;
#if defined(__AVX512F__)
  const __mmask16 lanes = static_cast<__mmask16>((uint32_t{1} << count) - 1);
  const __m512 wide = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, at));
  std::memcpy(&out, &wide, sizeof out);
  return out;
#elif defined(__AVX2__) && defined(__F16C__)
  __m128i words;
  if (count == kLanes) {
    words = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
  } else {  // whole pairs by a masked 32-bit load, an odd last value blended into its lane
    const __m128i pairs = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(count / 2)), _mm_setr_epi32(0, 1, 2, 3));
    words = _mm_maskload_epi32(reinterpret_cast<const int*>(at), pairs);
    if (count & 1) {
      const __m128i last = _mm_cmpeq_epi16(_mm_set1_epi16(static_cast<int16_t>(count - 1)),
                                           _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
      words = _mm_blendv_epi8(words, _mm_set1_epi16(static_cast<int16_t>(at[count - 1])), last);
    }
  }
  const __m256 wide = _mm256_cvtph_ps(words);
  std::memcpy(&out, &wide, sizeof out);
  return out;
#else
  alignas(64) float values[kLanes] = {};
  for (int64_t t = 0; t < count; ++t) values[t] = half_to_float(at[t]);
  std::memcpy(&out, values, sizeof out);
  return out;
#endif
}

struct BlockSums {
  std::vector<float> sums;  // (M, stride): each row's sums of ``group`` values, zero past K (whole vectors)
  int64_t stride = 0;
};

// ``group``: 32 (a q4 block) or 16 (a q6 scale's group), a whole number of vectors.
void block_sums(const Problem& p, int64_t group, BlockSums& out) {
  const int64_t groups = p.k / group;
  out.stride = (groups + kLanes - 1) / kLanes * kLanes;
  out.sums.assign(p.m * out.stride, 0.0f);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = p.x + i * p.k + g * group;
      f32v total = load(x);
      for (int64_t j = kLanes; j < group; j += kLanes) total += load(x + j);
      out.sums[i * out.stride + g] = sum(total);
    }
}

// Rows [0, ROWS) x outputs [n0, n1), OUTS at a time; each output's scales (and q4's offsets) kLanes at a
// time: kLanes blocks, or kLanes groups of 16 for q6. ``sums``: each row's sums of x per block (q4) or per
// group (q6), row stride ``stride``; q8 needs none.
//   q4: Σ (d·q + m)·x = d·Σ q·x + m·Σx            (q 0..15 unscaled, d once per block)
//   q6: Σ d·(q − 32)·x = Σ (d·q)·x − 32·d·Σx      (q 0..63, d·q exact in float32)
//   q8: Σ (d·q)·x                                 (the panel path's arithmetic: a prefill's bits)
template <Format F, int ROWS, int OUTS>
void float_tile(const Problem& p, const float* xs, const float* sums, int64_t stride, int64_t n0, int64_t n1) {
  constexpr int64_t per_block = F == Format::q6 ? 2 : 1;  // scales a block
  const int64_t scales = per_block * (p.k / kBlock);
  int64_t n = n0;
  for (; n + OUTS <= n1; n += OUTS) {
    f32v acc[OUTS][ROWS] = {};
    for (int64_t s0 = 0; s0 < scales; s0 += kLanes) {
      const int64_t count = std::min<int64_t>(kLanes, scales - s0);  // q6: even, two groups a block
      alignas(64) float d[OUTS][kLanes];
      for (int r = 0; r < OUTS; ++r) {
        const int64_t at = (n + r) * scales + s0;
        prefetch_ahead(p.scale + at, F == Format::q6 ? kPrefetch / 4 : kPrefetch / 8);
        const f32v scale = load_halves(p.scale + at, count);
        std::memcpy(d[r], &scale, sizeof scale);
        if constexpr (F != Format::q8) {
          if constexpr (F == Format::q4) prefetch_scales(p.shift + at);
          const f32v offset = F == Format::q4 ? load_halves(p.shift + at, count) : scale * -32.0f;
          for (int i = 0; i < ROWS; ++i) acc[r][i] += offset * load(sums + i * stride + s0);
        }
      }
      for (int64_t s = 0; s < count; s += per_block)
        for (int r = 0; r < OUTS; ++r) {
          const int64_t b = (s0 + s) / per_block;
          const uint8_t* bytes = block_bytes<F>(p, n + r, b);
          prefetch_ahead(bytes);
          Weights w;
          if constexpr (F == Format::q4) {
            q4_integers(bytes, w);
          } else if constexpr (F == Format::q6) {
            const uint8_t* high = p.high + (n + r) * (p.k / 4) + b * (kBlock / 4);
            prefetch_ahead(high, kPrefetch / 2);
            q6_unsigned(bytes, high, w);
          } else {
            q8_integers(reinterpret_cast<const int8_t*>(bytes), w);
          }
          if constexpr (F != Format::q4)
            for (int64_t j = 0; j < kParts; ++j) w.v[j] = w.v[j] * d[r][s + (j < kParts / per_block ? 0 : 1)];
          for (int i = 0; i < ROWS; ++i) {
            const float* x = xs + i * p.k + b * kBlock;
            if constexpr (F == Format::q4) {
              f32v dot = w.v[0] * load(x);
              for (int64_t j = 1; j < kParts; ++j) dot += w.v[j] * load(x + j * kLanes);
              acc[r][i] += dot * d[r][s];
            } else {
              for (int64_t j = 0; j < kParts; ++j) acc[r][i] += w.v[j] * load(x + j * kLanes);
            }
          }
        }
    }
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) p.y[i * p.n + n + r] = sum(acc[r][i]);
  }
  if (n < n1) float_tile<F, ROWS, 1>(p, xs, sums, stride, n, n1);
}

// With 16 vector registers (AVX2, SSE2), at most 8 accumulators: 4 x 4 or 2 x 8 and the block's 4 vectors
// spilled (8 rows on AVX2: 1.4x slower than the weights decoded as d·q + m).
constexpr int kFloatAccumulators = kLanes == 16 ? 16 : 8;

template <Format F>
struct FloatTile {
  template <int ROWS, int OUTS>
  static void run(const Problem& p, const float* xs, const float* sums, int64_t stride, int64_t n0, int64_t n1) {
    constexpr int outs = std::max(1, std::min(OUTS, kFloatAccumulators / ROWS));
    float_tile<F, ROWS, outs>(p, xs, sums, stride, n0, n1);
  }
};

// Outputs [n0, n1) of every row, eight rows at a time whatever the batch.
template <typename Tile>
void float_rows(const Problem& problem, const BlockSums& xs, int64_t n0, int64_t n1) {
  for (int64_t row = 0; row < problem.m; row += 8) {
    Problem chunk = problem;
    chunk.y += row * problem.n;
    chunk.m = std::min<int64_t>(8, problem.m - row);
    by_rows<Tile>(chunk.m, chunk, problem.x + row * problem.k, xs.sums.data() + row * xs.stride, xs.stride, n0, n1);
  }
}
#endif

}  // namespace

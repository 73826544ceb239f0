// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// vector types, the block formats and their decoding, the generic decode and prefill tiles.

#pragma once

namespace {

constexpr int64_t kBlock = 32;     // weights per scale
// Floats per vector: the machine's own register width (a wider GCC vector than the registers spills to
// the stack on every broadcast; measured 4x slower on AVX2 with 16 lanes).
#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
#elif defined(__AVX__)
constexpr int64_t kLanes = 8;
#else
constexpr int64_t kLanes = 4;      // SSE2, NEON
#endif
constexpr int64_t kParts = kBlock / kLanes;  // vectors per block of weights
// A prefill's register tile (rows x outputs), one accumulator each: AVX-512 has 32 vector registers;
// AVX2 and SSE2 have 16, where 4 x 4 accumulators spill: 4 x 3 was the fastest of 4x4, 4x3, 3x4, 4x2,
// 2x4, 3x3, 5x2, 5x3, 6x2, 2x6 (q4, 100 rows, SmolLM2's shapes, AMD EPYC AVX2: 1.3-1.4x over 4 x 4).
// The AVX2 copy has since left these tiles for outer products over a k-major panel (run_outer_int16).
#if defined(__AVX512F__)
constexpr int kTileRows = 4, kTileCols = 4;
#else
constexpr int kTileRows = 4, kTileCols = 3;
#endif
constexpr int64_t kSmallRows = 16;  // up to this many rows (a decode batch): float32, weights decoded in registers
constexpr int64_t kPanel = 16;     // more rows (a prefill): decode this many outputs into a float panel

typedef float f32v __attribute__((vector_size(kLanes * sizeof(float))));

inline f32v load(const float* p) {
  f32v v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float sum(f32v v) {
#if defined(__AVX512F__)
  __m512 wide;
  std::memcpy(&wide, &v, sizeof wide);
  return _mm512_reduce_add_ps(wide);
#elif defined(__AVX__)  // a tree: a lane-by-lane chain was eight dependent adds an output
  __m256 whole;
  std::memcpy(&whole, &v, sizeof whole);
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(whole), _mm256_extractf128_ps(whole, 1));
  four = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
#else
  float total = 0.0f;
  for (int64_t i = 0; i < kLanes; ++i) total += v[i];
  return total;
#endif
}

// e^x lane by lane for x <= 0 (softmax weights): x = n ln2 + r with |r| <= ln2/2, e^r by its degree-6
// Taylor polynomial (relative error ~2e-7), times 2^n built in the exponent bits.
inline f32v exp_nonpositive(f32v x) {
  typedef int32_t i32v __attribute__((vector_size(kLanes * sizeof(int32_t))));
  const f32v lowest = f32v{} - 87.0f;
  x = x < lowest ? lowest : x;  // also maps -inf (padding lanes) to e^-87, about 1.6e-38
  const f32v n = __builtin_convertvector(__builtin_convertvector(x * 1.44269504088896341f - 0.5f, i32v), f32v);
  const f32v r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  f32v p = r * (1.0f / 720) + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const i32v bits = (__builtin_convertvector(n, i32v) + 127) << 23;
  f32v scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float half_to_float(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    uint32_t m = mantissa;
    while (!(m & 0x400u)) { m <<= 1; ++shift; }
    bits = sign | ((113 - shift) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The block formats: q8 (int8, a float16 scale per 32: Q8_0), q4 (nibbles, a float16 scale and offset
// per 32: Q4_1) and q6 (6-bit q, w = d·(q − 32) with a float16 d per 16 weights: a Q6_K file's values).
// A q6 block of 32 keeps its low nibbles as q4 does (byte i: element i, then element i + 16) and its
// 2 high bits in 8 bytes (byte j, bits 2t..2t+1: element j + 8t).
enum class Format { q8, q4, q6 };

struct Problem {
  const float* x;         // (M, K)
  const uint8_t* w;       // (N, K) int8, or (N, K/2) packed nibbles (q4, q6's low ones)
  const uint16_t* scale;  // (N, K/32) float16; q6: (N, K/16)
  const uint16_t* shift;  // (N, K/32) float16, q4 only
  float* y;               // (M, N)
  int64_t m, k, n;
  const uint8_t* high = nullptr;  // (N, K/4) q6 only: the 2 high bits of each weight
};

constexpr int64_t kQ6Group = 16;  // q6 weights per scale

// The 32 weights of a block, as kParts vectors in element order.
struct Weights {
  f32v v[kParts];
};

#if defined(__AVX2__)
// A q6 block's 32 integers q (0..63) as bytes, assembled from its nibbles and high bits in 16-byte
// registers (three ports on Intel, where AVX-512's dword lanes have two): elements 0..15 in ``first``,
// 16..31 in ``second``.
inline void q6_bytes(const uint8_t* low, const uint8_t* high, __m128i& first, __m128i& second) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(low));
  const __m128i fifteen = _mm_set1_epi8(15), three = _mm_set1_epi8(3);
  const __m128i tops = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(high)),
                                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(high)));
  // byte j of ``tops`` in both halves; a 64-bit shift by 2t then & 3 leaves bits 2t..2t+1 of each byte
  const __m128i top_lo = _mm_and_si128(_mm_srlv_epi64(tops, _mm_set_epi64x(2, 0)), three);  // elements 0..15
  const __m128i top_hi = _mm_and_si128(_mm_srlv_epi64(tops, _mm_set_epi64x(6, 4)), three);  // 16..31
  first = _mm_or_si128(_mm_and_si128(bytes, fifteen), _mm_slli_epi16(top_lo, 4));
  second = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(bytes, 4), fifteen), _mm_slli_epi16(top_hi, 4));
}
#endif

// A q6 block's 32 integers q (0..63) as floats, in element order: its bytes (q6_bytes), then one widening
// per vector.
inline void q6_unsigned(const uint8_t* low, const uint8_t* high, Weights& w) {
#if defined(__AVX2__)
  __m128i first, second;
  q6_bytes(low, high, first, second);
#if defined(__AVX512F__)
  const __m512 parts[2] = {_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(first)),
                           _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(second))};
#else
  const __m256 parts[4] = {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(first)),
                           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(first, 8))),
                           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(second)),
                           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(second, 8)))};
#endif
#else
  float parts[kBlock];
  for (int64_t e = 0; e < kBlock; ++e) {
    const int nibble = e < kBlock / 2 ? (low[e] & 15) : (low[e - kBlock / 2] >> 4);
    parts[e] = static_cast<float>(nibble + 16 * ((high[e % 8] >> (2 * (e / 8))) & 3));
  }
#endif
  std::memcpy(&w.v, &parts, sizeof w.v);
}

// The 32 nibbles of a q4 block (``bytes``: its 16) as the floats 0..15, in element order.
inline void q4_integers(const uint8_t* bytes, Weights& w) {
#if defined(__AVX512F__)
  const __m512i wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  const __m512 parts[2] = {_mm512_cvtepi32_ps(_mm512_and_si512(wide, _mm512_set1_epi32(15))),
                           _mm512_cvtepi32_ps(_mm512_srli_epi32(wide, 4))};
#elif defined(__AVX2__)
  const __m128i all = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  const __m256i first = _mm256_cvtepu8_epi32(all), second = _mm256_cvtepu8_epi32(_mm_srli_si128(all, 8));
  const __m256i nibble = _mm256_set1_epi32(15);
  const __m256 parts[4] = {  // elements 0..15 are the low nibbles of bytes 0..15, 16..31 the high ones
      _mm256_cvtepi32_ps(_mm256_and_si256(first, nibble)), _mm256_cvtepi32_ps(_mm256_and_si256(second, nibble)),
      _mm256_cvtepi32_ps(_mm256_srli_epi32(first, 4)), _mm256_cvtepi32_ps(_mm256_srli_epi32(second, 4))};
#else
  float parts[kBlock];
  for (int64_t i = 0; i < kBlock / 2; ++i) {
    parts[i] = static_cast<float>(bytes[i] & 15);
    parts[i + kBlock / 2] = static_cast<float>(bytes[i] >> 4);
  }
#endif
  std::memcpy(&w.v, &parts, sizeof w.v);
}

// The 32 int8 weights of a q8 block as floats, in element order.
inline void q8_integers(const int8_t* q, Weights& w) {
#if defined(__AVX512F__)
  const __m512 parts[2] = {
      _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)))),
      _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16))))};
#elif defined(__AVX2__)
  const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i second = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
  const __m256 parts[4] = {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(first)),
                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(first, 8))),
                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(second)),
                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(second, 8)))};
#else
  float parts[kBlock];
  for (int64_t i = 0; i < kBlock; ++i) parts[i] = static_cast<float>(q[i]);
#endif
  std::memcpy(&w.v, &parts, sizeof w.v);
}

// The 32 weights of block b of output n (GCC scalarizes a vector-extension conversion from 8-bit
// integers, one instruction per lane, hence the intrinsics; the scalar copy widens them by a loop).
template <Format F>
inline void decode(const Problem& p, int64_t n, int64_t b, Weights& w) {
  const int64_t blocks = p.k / kBlock;
  if constexpr (F == Format::q6) {
    q6_unsigned(p.w + n * (p.k / 2) + b * (kBlock / 2), p.high + n * (p.k / 4) + b * (kBlock / 4), w);
    const uint16_t* scales = p.scale + n * 2 * blocks + 2 * b;
    const float d0 = half_to_float(scales[0]), d1 = half_to_float(scales[1]);
    for (int64_t j = 0; j < kParts; ++j) w.v[j] = (w.v[j] - 32.0f) * (j < kParts / 2 ? d0 : d1);
    return;
  }
  const float d = half_to_float(p.scale[n * blocks + b]);
  if constexpr (F == Format::q4) {
    const float m = half_to_float(p.shift[n * blocks + b]);
    q4_integers(p.w + n * (p.k / 2) + b * (kBlock / 2), w);
    for (int64_t j = 0; j < kParts; ++j) w.v[j] = w.v[j] * d + m;
  } else {
    q8_integers(reinterpret_cast<const int8_t*>(p.w) + n * p.k + b * kBlock, w);
    for (int64_t j = 0; j < kParts; ++j) w.v[j] = w.v[j] * d;
  }
}

// More rows (a prefill): decode kPanel outputs once into a panel, then sweep every row over it in 4 x 4
// register tiles (the AVX2 copy: outer products of integer pairs instead, run_outer_int16). With
// AVX512-BF16 the panel and the rows are rounded to bfloat16 and multiplied with float32 accumulation
// (twice the float32 rate; the precision of XLA's bfloat16 dot), else in float32.
#if defined(__AVX512BF16__)
typedef uint16_t Scalar;  // bfloat16 bits
constexpr int64_t kStep = 32;

typedef __m512bh Block;  // 32 decoded weights

inline Block to_block(const Weights& w) {
  __m512 lo, hi;
  std::memcpy(&lo, &w.v[0], sizeof lo);
  std::memcpy(&hi, &w.v[1], sizeof hi);
  return _mm512_cvtne2ps_pbh(hi, lo);  // lo -> elements 0..15, hi -> 16..31
}

inline void store_row(Scalar* out, const Weights& w) {
  const Block block = to_block(w);
  std::memcpy(out, &block, sizeof block);
}

struct Acc {
  __m512 v = _mm512_setzero_ps();
  void add(const Scalar* a, const Scalar* b) {
    Block y;
    std::memcpy(&y, b, sizeof y);
    add_block(a, y);
  }
  void add_block(const Scalar* a, const Block& y) {  // 32 products
    __m512bh x;
    std::memcpy(&x, a, sizeof x);
    v = _mm512_dpbf16_ps(v, x, y);
  }
  float total() const { return _mm512_reduce_add_ps(v); }
};

inline void rows_to_product_type(const Problem& p, std::vector<Scalar>& rows) {
  rows.resize(p.m * p.k);
  for (int64_t i = 0; i < p.m * p.k; i += kStep) store_row(&rows[i], Weights{{load(p.x + i), load(p.x + i + kLanes)}});
}
#else
typedef float Scalar;
constexpr int64_t kStep = kLanes;

inline void store_row(Scalar* out, const Weights& w) { std::memcpy(out, &w.v, sizeof w.v); }

typedef Weights Block;

inline const Block& to_block(const Weights& w) { return w; }

struct Acc {
  f32v v = {};
  void add(const Scalar* a, const Scalar* b) { v += load(a) * load(b); }
  void add_block(const Scalar* a, const Block& w) {  // 32 products, kParts fused multiply-adds
    for (int64_t j = 0; j < kParts; ++j) v += w.v[j] * load(a + j * kLanes);
  }
  float total() const { return sum(v); }
};

inline void rows_to_product_type(const Problem& p, std::vector<Scalar>& rows) {
  rows.assign(p.x, p.x + p.m * p.k);
}
#endif

// The first byte of block b of output n's weights (q6: its low nibbles).
template <Format F>
inline const uint8_t* block_bytes(const Problem& p, int64_t n, int64_t b) {
  return F == Format::q8 ? p.w + n * p.k + b * kBlock : p.w + n * (p.k / 2) + b * (kBlock / 2);
}

// A decode batch reads each weight once, in a few short streams (a tile's outputs), too short for the
// hardware prefetcher to ramp up: ask for the bytes kPrefetch ahead of each block (AMD Zen 5, Qwen2.5's
// 151936 x 1536 head at batch 1: q4 7.5 -> 5.5 ms; 1024 and 4096 bytes were slower than 2048). The
// avx512bf16 copy asks for them as non-temporal (read once: they need not displace the rows' values
// from L1 nor anything from L2): on an AMD Zen 4, q4 products of Qwen2.5-Coder-1.5B's gate/up and down
// shapes 0.8-0.9x the time at one and eight rows, its eight-row step ~0.9x; the avx2 copy there came
// out either way from run to run, so the other copies keep T0.
constexpr int64_t kPrefetch = 2048;

inline void prefetch_ahead(const void* at, int64_t distance = kPrefetch) {
  const char* target = static_cast<const char*>(at) + distance;
#if defined(__AVX512BF16__)
  _mm_prefetch(target, _MM_HINT_NTA);
#elif defined(__x86_64__)
  _mm_prefetch(target, _MM_HINT_T0);
#else
  __builtin_prefetch(target);
#endif
}

// The scales and offsets, as far ahead as the weights they go with (2 bytes per 16 or 32).
inline void prefetch_scales(const uint16_t* scales) { prefetch_ahead(scales, kPrefetch / 8); }

// Every stream block b of output n reads, ahead (the scales once per 16 blocks: a cache line's worth).
template <Format F>
inline void prefetch_block(const Problem& p, int64_t n, int64_t b) {
  const int64_t blocks = p.k / kBlock;
  prefetch_ahead(block_bytes<F>(p, n, b));
  if constexpr (F == Format::q6) {
    prefetch_ahead(p.high + n * (p.k / 4) + b * (kBlock / 4), kPrefetch / 2);
    if (b % 8 == 0) prefetch_ahead(p.scale + n * 2 * blocks + 2 * b, kPrefetch / 4);
  } else if (b % 16 == 0) {
    prefetch_scales(p.scale + n * blocks + b);
    if constexpr (F == Format::q4) prefetch_scales(p.shift + n * blocks + b);
  }
}

// A decode batch: rows [0, ROWS) x outputs [n0, n1), OUTS outputs at a time; each block of weights is
// decoded once, in registers, and used by every row. The products and the order of the sums are the
// panel path's, so a row gets the same bits in a step as in a prefill, whatever the batch (the exact q4
// path below, where compiled, replaces this one for q4 and matches a prefill only within rounding).
template <Format F, int ROWS, int OUTS>
void small_tile(const Problem& p, const Scalar* xs, int64_t n0, int64_t n1) {
  const int64_t blocks = p.k / kBlock;
  int64_t n = n0;
  for (; n + OUTS <= n1; n += OUTS) {
    Acc acc[OUTS][ROWS];
    for (int64_t b = 0; b < blocks; ++b) {
      for (int r = 0; r < OUTS; ++r) {
        prefetch_block<F>(p, n + r, b);
        Weights decoded;
        decode<F>(p, n + r, b, decoded);
        const Block w = to_block(decoded);
        for (int i = 0; i < ROWS; ++i) acc[r][i].add_block(xs + i * p.k + b * kBlock, w);
      }
    }
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) p.y[i * p.n + n + r] = acc[r][i].total();
  }
  if (n < n1) small_tile<F, ROWS, 1>(p, xs, n, n1);
}

// A decode chunk of up to 8 rows through Tile::run<ROWS, OUTS>: 4 outputs at a time up to 4 rows, 2 beyond
// (the accumulators must stay in registers), or, up to kNarrowRows rows (decode batches of up to
// ``narrow_rows`` rows, a per-process setting), one output at a time, so that a thread reads its outputs'
// weights as one stream. Which is faster depends on the CPU, not on the arithmetic: 4 outputs' interleaved
// short rows (1-3 KB each) were the faster order on the AMD Zen 5 and Intel CPUs the table was tuned on;
// on an AMD Zen 4 one output at a time read 1.35-1.8x faster at one row. ``weights = "auto"`` times both
// (inference/engine/weight_policy.py). Either way each output's sums run in the same order, so the
// setting changes no bits. Every decode tile (float and exact 4-bit) uses this table.
constexpr int kNarrowRows = 4;
std::atomic<int> narrow_rows{0};

template <typename Tile, typename... Args>
void by_rows(int64_t rows, Args... args) {
  if (rows <= narrow_rows.load(std::memory_order_relaxed)) {
    switch (rows) {
      case 1: return Tile::template run<1, 1>(args...);
      case 2: return Tile::template run<2, 1>(args...);
      case 3: return Tile::template run<3, 1>(args...);
      default: return Tile::template run<kNarrowRows, 1>(args...);
    }
  }
  switch (rows) {
    case 1: return Tile::template run<1, 4>(args...);
    case 2: return Tile::template run<2, 4>(args...);
    case 3: return Tile::template run<3, 4>(args...);
    case 4: return Tile::template run<4, 4>(args...);
    case 5: return Tile::template run<5, 2>(args...);
    case 6: return Tile::template run<6, 2>(args...);
    case 7: return Tile::template run<7, 2>(args...);
    default: return Tile::template run<8, 2>(args...);
  }
}

template <Format F>
struct SmallTile {
  template <int ROWS, int OUTS>
  static void run(const Problem& p, const Scalar* xs, int64_t n0, int64_t n1) {
    small_tile<F, ROWS, OUTS>(p, xs, n0, n1);
  }
};

template <Format F>
void panel_rows(const Problem& p, int64_t n0, int64_t n1, std::vector<Scalar>& panel,
                const std::vector<Scalar>& xs) {
  const int64_t blocks = p.k / kBlock;
  panel.resize(kPanel * p.k);
  for (int64_t n = n0; n < n1; n += kPanel) {
    const int64_t width = std::min(kPanel, n1 - n);
    for (int64_t r = 0; r < width; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        Weights decoded;
        decode<F>(p, n + r, b, decoded);
        store_row(&panel[r * p.k + b * kBlock], decoded);
      }
    int64_t row = 0;
    for (; row + kTileRows <= p.m; row += kTileRows) {
      int64_t c = 0;
      for (; c + kTileCols <= width; c += kTileCols) {
        Acc acc[kTileRows][kTileCols];
        for (int64_t k = 0; k < p.k; k += kStep)
          for (int i = 0; i < kTileRows; ++i)
            for (int j = 0; j < kTileCols; ++j) acc[i][j].add(&xs[(row + i) * p.k + k], &panel[(c + j) * p.k + k]);
        for (int i = 0; i < kTileRows; ++i)
          for (int j = 0; j < kTileCols; ++j) p.y[(row + i) * p.n + n + c + j] = acc[i][j].total();
      }
      for (; c < width; ++c)
        for (int i = 0; i < kTileRows; ++i) {
          Acc acc;
          for (int64_t k = 0; k < p.k; k += kStep) acc.add(&xs[(row + i) * p.k + k], &panel[c * p.k + k]);
          p.y[(row + i) * p.n + n + c] = acc.total();
        }
    }
    for (; row < p.m; ++row)
      for (int64_t c = 0; c < width; ++c) {
        Acc acc;
        for (int64_t k = 0; k < p.k; k += kStep) acc.add(&xs[row * p.k + k], &panel[c * p.k + k]);
        p.y[row * p.n + n + c] = acc.total();
      }
  }
}

// Outputs [n0, n1) for every row.
template <Format F>
void run_part(const Problem& p, const std::vector<Scalar>& xs, int64_t n0, int64_t n1) {
  if (p.m <= kSmallRows) {
    for (int64_t row = 0; row < p.m; row += 8) {  // eight rows at a time, whatever the batch
      Problem chunk = p;
      chunk.y += row * p.n;
      chunk.m = std::min<int64_t>(8, p.m - row);
      by_rows<SmallTile<F>>(chunk.m, chunk, xs.data() + row * p.k, n0, n1);
    }
    return;
  }
  thread_local std::vector<Scalar> panel;
  panel_rows<F>(p, n0, n1, panel, xs);
}

}  // namespace

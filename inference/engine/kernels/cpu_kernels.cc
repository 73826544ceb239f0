// y = x · Wᵀ for float32 activations x (M, K) and block-quantized weights W (N, K), the layouts of
// llama.cpp's Q8_0 and Q4_1: every run of 32 weights along K shares a float16 scale d (and, for q4, a
// float16 offset m), and a weight is d·q (q8: q int8) or d·q + m (q4: q in 0..15, two per byte, element
// j in the low nibble of byte j and element j+16 in the high one). Each output's weights are contiguous,
// so one output is one pass over its bytes: decode on a small CPU is bound by the bytes of weights read
// per token, and these read 1.06 (q8) or 0.63 (q4) bytes per weight against bfloat16's 2.
//
// XLA FFI custom calls for the CPU backend (inference/engine/kernels/__init__.py builds this file for the
// machine it runs on and registers it with JAX). It is compiled once per instruction set (scalar, avx2,
// avx512, avx512bf16 on x86-64; the architecture's baseline elsewhere) and the copy the CPU runs best is
// chosen at run time. Arithmetic uses GCC's vector extensions, so the compiler picks AVX-512, AVX2, SSE2
// or NEON from the target flags; only the widening of the weights is spelled out with intrinsics. Work is
// split over the outputs, as many parts as XLA's intra-op pool has threads: a decode step's calls run on
// the calling thread and a crew of threads of our own, a prefill's (or any call while another holds the
// crew) on that pool; the caller claims parts too, so a busy crew or pool delays a call, never deadlocks it.

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

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
// The AVX2 copy has since left these tiles for outer products over a k-major panel (run_outer).
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
// register tiles (the AVX2 copy: outer products, run_outer). With AVX512-BF16 the panel and the rows are rounded to bfloat16 and multiplied with
// float32 accumulation (twice the float32 rate; the precision of XLA's bfloat16 dot), else in float32.
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

// Threads of our own that run parts of one call beside its caller: they spin a while after each call
// (the next matmul of a step comes microseconds later) and then sleep until woken. XLA's intra-op pool
// also served here, but its idle workers keep spinning to steal work: on two cores a matmul's two parts
// then shared them with a third thread that did nothing (AMD Zen 3, SmolLM2 at one row: a tenth of
// the samples in the pool's steal loop). One call at a time holds the crew; a call that finds it held
// (another device's program, another model's step) goes to XLA's pool (parallel_parts).
class Crew {
 public:
  // job(part) for every part in [0, parts), on the caller and on up to parts - 1 crew threads; false
  // (nothing run) when another call holds the crew.
  template <typename Job>
  bool run(int64_t parts, Job& job) {
    std::unique_lock<std::mutex> hold(busy_, std::try_to_lock);
    if (!hold.owns_lock()) return false;
    while (static_cast<int64_t>(threads_) < parts - 1) {
      std::thread(&Crew::loop, this).detach();
      ++threads_;
    }
    call_ = [](void* context, int64_t part) { (*static_cast<Job*>(context))(part); };
    context_ = &job;
    parts_ = parts;
    next_.store(0);
    done_.store(0);
    open_.store(true);
    {
      std::lock_guard<std::mutex> lock(sleep_);
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    claim();
    for (int64_t spins = 0; done_.load() < parts; ++spins) pause(spins);
    open_.store(false);
    for (int64_t spins = 0; active_.load() > 0; ++spins) pause(spins);  // nobody still reads this job
    return true;
  }

 private:
  // A short wait spins; a long one (a crew thread descheduled mid-part) gives its core away.
  static void pause(int64_t spins) {
#if defined(__x86_64__)
    if (spins < 4096) return _mm_pause();
#endif
    std::this_thread::yield();
  }

  void claim() {
    for (int64_t part; (part = next_.fetch_add(1)) < parts_;) {
      call_(context_, part);
      done_.fetch_add(1);
    }
  }

  void loop() {
    uint64_t seen = generation_.load();
    for (;;) {
      const auto start = std::chrono::steady_clock::now();
      for (int64_t spins = 0; generation_.load() == seen; ++spins) {
        if ((spins & 255) == 0 && std::chrono::steady_clock::now() - start > kSpin) {
          std::unique_lock<std::mutex> lock(sleep_);
          wake_.wait(lock, [&] { return generation_.load() != seen; });
          break;
        }
        pause(0);  // bounded by kSpin, not by the count
      }
      seen = generation_.load();
      active_.fetch_add(1);
      if (open_.load() && generation_.load() == seen) claim();
      active_.fetch_sub(1);
    }
  }

  static constexpr std::chrono::microseconds kSpin{200};
  std::mutex busy_, sleep_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_{0}, done_{0}, active_{0};
  std::atomic<bool> open_{false};
  void (*call_)(void*, int64_t) = nullptr;
  void* context_ = nullptr;
  int64_t parts_ = 0;
  size_t threads_ = 0;
};

Crew& crew() {
  static Crew* one = new Crew;  // never destroyed: its threads outlive any static destructor order
  return *one;
}

// Runs body(part) for every part in [0, parts): on the calling thread and on parts - 1 tasks scheduled
// on XLA's intra-op pool. Every runner claims parts until none is left, so a pool that is busy (or runs
// tasks on the caller) delays a call but never deadlocks it; the caller then waits only for parts
// already being run. A task that starts after the call returned finds nothing to claim.
template <typename Body>
void pool_parts(ffi::ThreadPool& pool, int64_t parts, Body body) {
  struct State {
    Body body;
    int64_t parts;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    State(Body b, int64_t n) : body(std::move(b)), parts(n) {}
    void work() {
      for (int64_t part; (part = next.fetch_add(1, std::memory_order_relaxed)) < parts;) {
        body(part);
        done.fetch_add(1, std::memory_order_release);
      }
    }
  };
  auto state = std::make_shared<State>(std::move(body), parts);
  for (int64_t i = 1; i < parts; ++i) pool.Schedule([state] { state->work(); });
  state->work();
  while (state->done.load(std::memory_order_acquire) < parts) std::this_thread::yield();
}

// Runs body(part) for every part in [0, parts): a decode step's call (``step``) on the calling thread
// and the crew, else (a prefill, or another call holds the crew: several models stepping at once on a
// many-core machine) on XLA's pool as before. A prefill's XLA operations are big enough for XLA to run
// them on its pool too, where a crew thread spinning beside them cost SmolLM2's 100-token prefill 1.2x.
template <typename Body>
void parallel_parts(ffi::ThreadPool& pool, int64_t parts, bool step, Body body) {
  if (parts <= 1) {
    if (parts == 1) body(0);
  } else if (!step || !crew().run(parts, body)) {
    pool_parts(pool, parts, std::move(body));
  }
}

// body(n0, n1) for consecutive runs of outputs, whole multiples of ``unit``, one per thread (one in all
// below ~64k multiply-adds, where a second thread costs more to wake than it saves). The caller's
// frame outlives every part that runs (parallel_parts), so body may capture it by reference.
template <typename Body>
void over_outputs(ffi::ThreadPool& pool, const Problem& problem, int64_t unit, Body body) {
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const bool tiny = problem.m * problem.n * problem.k < (int64_t{1} << 16);
  const int64_t units = (problem.n + unit - 1) / unit;
  const int64_t parts = std::min<int64_t>(tiny ? 1 : threads, units);
  parallel_parts(pool, parts, problem.m <= kSmallRows, [&problem, &body, unit, units, parts](int64_t part) {
    const int64_t n0 = std::min(problem.n, units * part / parts * unit);
    const int64_t n1 = std::min(problem.n, units * (part + 1) / parts * unit);
    if (n0 < n1) body(n0, n1);
  });
}

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

// ---- q4 decode rows as exact 4-bit integers (AVX512-BF16 + VBMI) -----------------------------------
// A decode batch (up to kSmallRows rows) on a 4-bit matrix is bound by the work of widening the nibbles,
// not by the bytes read (19.5 GB/s from memory where q8 streams 32 on an AMD Zen 5). This path widens
// them in two instructions: one multishift picks each nibble into the low byte of a 16-bit lane, one
// ternary-logic op keeps it and sets the high byte to 0x43, which makes the lane the bfloat16 number
// 128 + q exactly. Then
//   Σ_j (d·q_j + m)·x_j = d·Σ_j (128 + q_j)·x_j + (m − 128·d)·Σ_j x_j
// with x rounded to bfloat16 (as the other paths round it), the first sum one dpbf16 per block (two
// blocks at a time: widen_q4_pair), d and m applied in float32: the 4-bit weights are multiplied
// exactly, not rounded to bfloat16 as d·q + m.
// x is rounded and reordered once per call to the nibbles' lane order (kNibbleOrder). A row's bits
// depend only on its own values, whatever the decode batch; a prefill (the panel path) sums the same
// products in another arrangement, within float32 reordering of these (tests/inference/test_kernels.py).
#if defined(__AVX512BF16__) && defined(__AVX512VBMI__)
#define FIXIT_EXACT_Q4 1

// Lane p of a block's 32 bfloat16 lanes holds element kNibbleOrder[p]: the 16 bytes are broadcast to
// every 128-bit lane (qwords A = bytes 0..7, B = bytes 8..15, alternating), and qword i of the result
// takes its four nibbles from qword i of that: low nibbles (elements 0..15) in qwords 0..3, high ones
// (elements 16..31) in qwords 4..7.
constexpr int kNibbleOrder[32] = {0,  1,  2,  3,  8,  9,  10, 11, 4,  5,  6,  7,  12, 13, 14, 15,
                                  16, 17, 18, 19, 24, 25, 26, 27, 20, 21, 22, 23, 28, 29, 30, 31};

// The multishift's control: the low byte of 16-bit lane k (0..3) of qword i takes the 8 bits at offset
// base[i] + 8k of that qword (a nibble in the low 4 bits, which bfloat16_lanes keeps).
inline __m512i lane_control(const int (&base)[8]) {
  alignas(64) uint8_t control[64] = {};
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 4; ++k) control[i * 8 + 2 * k] = static_cast<uint8_t>(base[i] + 8 * k);
  return _mm512_load_si512(control);
}

inline __m512i nibble_control() { return lane_control({0, 0, 32, 32, 4, 4, 36, 36}); }  // widen_q4's lanes

inline __m512bh bfloat16_lanes(__m512i picked) {  // each 16-bit lane's low nibble q as bfloat16 128 + q
  const __m512i lanes =
      _mm512_ternarylogic_epi32(picked, _mm512_set1_epi16(0x000F), _mm512_set1_epi16(0x4300), 0xEA);  // (a & b) | c
  __m512bh out;
  std::memcpy(&out, &lanes, sizeof out);
  return out;
}

// The block's 32 weights as bfloat16 128 + q, in kNibbleOrder.
inline __m512bh widen_q4(const uint8_t* bytes, __m512i control) {
  const __m512i source = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  return bfloat16_lanes(_mm512_multishift_epi64_epi8(control, source));
}

// Two blocks b, b + 1 at once (their 32 bytes, contiguous): ``low`` holds both blocks' low nibbles
// (elements 0..15: lanes 0..15 block b's, 16..31 block b + 1's, each in kNibbleOrder[0..15]) and ``high``
// their high ones (kNibbleOrder[16..31]), so that one dpbf16 of each, chained, sums block b in dword
// lanes 0..7 and block b + 1 in lanes 8..15, and a single multiply-add applies both blocks' scales: three
// vector products per row and pair of blocks instead of four (1.2x at one row on an AMD Zen 4). The
// 32 bytes are spread to qwords (b: A, B, A, B; b + 1: A, B, A, B), which the multishift picks from as
// widen_q4's broadcast is.
inline __m512i pair_control(int shift) {  // the low (shift 0) or high (shift 4) nibbles of both blocks
  return lane_control({shift, shift, 32 + shift, 32 + shift, shift, shift, 32 + shift, 32 + shift});
}

inline void widen_q4_pair(const uint8_t* bytes, __m512i low_control, __m512i high_control, __m512bh& low,
                          __m512bh& high) {
  const __m512i spread = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
  const __m256i both = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
  const __m512i source = _mm512_permutexvar_epi64(spread, _mm512_castsi256_si512(both));
  low = bfloat16_lanes(_mm512_multishift_epi64_epi8(low_control, source));
  high = bfloat16_lanes(_mm512_multishift_epi64_epi8(high_control, source));
}

// Word p's low byte takes element order[p]'s 2 high bits into bits 4..5 (multishift control).
inline __m512i top_control(const int (&order)[32]) {
  alignas(64) uint8_t control[64] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int e = order[lane], at = 8 * (e % 8) + 2 * (e / 8);  // its bits in the 8 high bytes
    control[2 * lane] = static_cast<uint8_t>((at - 4) & 63);
  }
  return _mm512_load_si512(control);
}

inline __m512i top_control() { return top_control(kNibbleOrder); }  // widen_q6's lanes

inline __m512bh q6_lanes(__m512i picked, __m512i top) {  // nibbles and high bits merged, as bfloat16 128 + q
  const __m512i both = _mm512_ternarylogic_epi32(picked, top, _mm512_set1_epi16(0x000F), 0xE4);  // c ? a : b
  const __m512i lanes =
      _mm512_ternarylogic_epi32(both, _mm512_set1_epi16(0x003F), _mm512_set1_epi16(0x4300), 0xEA);  // (a & b) | c
  __m512bh out;
  std::memcpy(&out, &lanes, sizeof out);
  return out;
}

// q6's 32 integers as bfloat16 128 + q (q = low nibble + 16 · high bits, 0..63), in kNibbleOrder: the
// nibbles picked as q4's are, the high bits by a second multishift into bits 4..5 of the same bytes
// (``tops``: top_control), merged and topped with 0x43 by q6_lanes.
inline __m512bh widen_q6(const uint8_t* low, const uint8_t* high, __m512i nibbles, __m512i tops) {
  const __m512i source = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(low)));
  const __m512i picked = _mm512_multishift_epi64_epi8(nibbles, source);
  int64_t bits;
  std::memcpy(&bits, high, sizeof bits);
  return q6_lanes(picked, _mm512_multishift_epi64_epi8(tops, _mm512_set1_epi64(bits)));
}

// Two q6 blocks b, b + 1 at once, as widen_q4_pair does q4's, but so that each group of 16 (one scale)
// fills four dword lanes: ``low`` holds elements 0..7 and 16..23 of block b, then of block b + 1
// (kQ6PairOrder[0..15]), ``high`` elements 8..15 and 24..31, so that one dpbf16 of each, chained, sums
// group 2b in lanes 0..3, 2b + 1 in 4..7, 2b + 2 in 8..11 and 2b + 3 in 12..15, and one multiply-add
// applies the four groups' scales: three vector products per row and pair of blocks instead of four (the
// fused multiply-adds were a third of an eight-row step's products on q6). Elements 0..7 and 16..23 are
// the low and high nibbles of bytes 0..7 (qword A), the rest those of qword B, so each vector's nibbles
// come from one qword per block, spread to its four qwords.
constexpr int kQ6PairOrder[32] = {0, 1, 2,  3,  4,  5,  6,  7,  16, 17, 18, 19, 20, 21, 22, 23,
                                  8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};

// Each block's 16 elements kQ6PairOrder[from .. from + 15], for both blocks of a pair (words 0..15, 16..31).
inline __m512i pair_tops(int from) {
  int order[32];
  for (int p = 0; p < 32; ++p) order[p] = kQ6PairOrder[from + p % 16];
  return top_control(order);
}

struct Q6PairControls {
  __m512i nibbles = lane_control({0, 32, 4, 36, 0, 32, 4, 36});  // per block: elements 0..3, 4..7, 16..19, 20..23 of a qword
  __m512i low_tops = pair_tops(0), high_tops = pair_tops(16);
};

inline void widen_q6_pair(const uint8_t* low_bytes, const uint8_t* high_bytes, const Q6PairControls& c,
                          __m512bh& low, __m512bh& high) {
  const __m512i both = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low_bytes)));
  const __m512i a = _mm512_permutexvar_epi64(_mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0), both);  // b.A x4, (b+1).A x4
  const __m512i b = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 3, 3, 3, 1, 1, 1, 1), both);  // the B qwords
  const __m512i bits = _mm512_permutexvar_epi64(
      _mm512_set_epi64(1, 1, 1, 1, 0, 0, 0, 0),
      _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(high_bytes))));
  low = q6_lanes(_mm512_multishift_epi64_epi8(c.nibbles, a), _mm512_multishift_epi64_epi8(c.low_tops, bits));
  high = q6_lanes(_mm512_multishift_epi64_epi8(c.nibbles, b), _mm512_multishift_epi64_epi8(c.high_tops, bits));
}

struct ExactRows {
  std::vector<uint16_t> x;  // (M, K) bfloat16 in the tiles' lane orders (below)
  std::vector<float> sums;  // (M, K/32), q4 only: each block's sum of those bfloat16 values
  std::vector<float> halves;  // (M, K/16), q6 only: each half block's (q6's scale groups)
};

inline __m512i word_permutation(const int (&order)[32]) {
  alignas(64) uint16_t words[32];
  for (int i = 0; i < 32; ++i) words[i] = static_cast<uint16_t>(order[i]);
  return _mm512_load_si512(words);
}

// Each row's blocks 2j and 2j + 1 as the pair widenings' lanes: the first 16 values of block 2j, the
// first 16 of block 2j + 1, then the last 16 of each, in kNibbleOrder (q4) or kQ6PairOrder (q6); a last
// block without a pair in kNibbleOrder, as widen_q4 and widen_q6 have it.
// Only the sums the format's tile reads are made: each is a horizontal reduction, and q4 needs one a
// block where three were made (no difference measurable on a noisy AMD Zen 4: one SmolLM2 layer at one
// row, 93-153 µs either way).
void exact_rows(const Problem& p, ExactRows& out, Format format) {
  const bool q4 = format == Format::q4;
  const int64_t blocks = p.m * (p.k / kBlock), per_row = p.k / kBlock;
  out.x.resize(p.m * p.k);
  if (q4)
    out.sums.resize(blocks);
  else
    out.halves.resize(2 * blocks);
  const __m512i single = word_permutation(kNibbleOrder);
  const __m512i paired = q4 ? single : word_permutation(kQ6PairOrder);
  const int64_t last = per_row % 2 == 1 ? per_row - 1 : per_row;  // a row's block without a pair, if any
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = p.x + b * kBlock;
    const __m512bh rounded = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    __m512i words;
    std::memcpy(&words, &rounded, sizeof words);
    const bool alone = b % per_row == last;
    _mm512_storeu_si512(&out.x[b * kBlock], _mm512_permutexvar_epi16(alone ? single : paired, words));
    const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(words)), 16));
    const __m512 hi =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(words, 1)), 16));
    if (q4) {
      out.sums[b] = _mm512_reduce_add_ps(_mm512_add_ps(lo, hi));
    } else {
      out.halves[2 * b] = _mm512_reduce_add_ps(lo);
      out.halves[2 * b + 1] = _mm512_reduce_add_ps(hi);
    }
  }
  for (int64_t row = 0; row < p.m; ++row)
    for (int64_t b = 0; b + 1 < per_row; b += 2) {
      uint16_t* pair = &out.x[(row * per_row + b) * kBlock];
      std::swap_ranges(pair + 16, pair + 32, pair + 32);
    }
}

// acc[i] += scale · (row i's two blocks at x + i·stride times the widened weights ``low`` and ``high``:
// two dpbf16 chained, one multiply-add), for the exact tiles' pairs of blocks.
template <int ROWS>
inline void pair_products(__m512 (&acc)[ROWS], const uint16_t* x, int64_t stride, __m512bh low, __m512bh high,
                          __m512 scale) {
  const __m512 zero = _mm512_setzero_ps();
  for (int i = 0; i < ROWS; ++i) {
    __m512bh x_low, x_high;
    std::memcpy(&x_low, x + i * stride, sizeof x_low);
    std::memcpy(&x_high, x + i * stride + kBlock, sizeof x_high);
    acc[i] = _mm512_fmadd_ps(_mm512_dpbf16_ps(_mm512_dpbf16_ps(zero, x_low, low), x_high, high), scale, acc[i]);
  }
}

// The same for a row's last block alone (widen_q4, widen_q6).
template <int ROWS>
inline void block_products(__m512 (&acc)[ROWS], const uint16_t* x, int64_t stride, __m512bh w, __m512 scale) {
  const __m512 zero = _mm512_setzero_ps();
  for (int i = 0; i < ROWS; ++i) {
    __m512bh row;
    std::memcpy(&row, x + i * stride, sizeof row);
    acc[i] = _mm512_fmadd_ps(_mm512_dpbf16_ps(zero, row, w), scale, acc[i]);
  }
}

// Rows [0, ROWS) x outputs [n0, n1), OUTS at a time; each output's scales and offsets 16 blocks at a time.
template <int ROWS, int OUTS>
void exact_q4_tile(const Problem& p, const uint16_t* xs, const float* sums, int64_t n0, int64_t n1) {
  const int64_t blocks = p.k / kBlock;
  const __m512i control = nibble_control(), low_control = pair_control(0), high_control = pair_control(4);
  const __m512i halfway = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512 zero = _mm512_setzero_ps(), minus128 = _mm512_set1_ps(-128.0f);
  int64_t n = n0;
  for (; n + OUTS <= n1; n += OUTS) {
    __m512 acc[OUTS][ROWS];
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) acc[r][i] = zero;
    for (int64_t b0 = 0; b0 < blocks; b0 += 16) {
      const int64_t count = std::min<int64_t>(16, blocks - b0);
      const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
      alignas(64) float d[OUTS][16];
      for (int r = 0; r < OUTS; ++r) {
        const int64_t at = (n + r) * blocks + b0;
        prefetch_scales(p.scale + at);
        prefetch_scales(p.shift + at);
        const __m512 scale = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p.scale + at));
        const __m512 shift = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p.shift + at));
        _mm512_store_ps(d[r], scale);
        const __m512 offset = _mm512_fmadd_ps(scale, minus128, shift);  // m − 128·d, zero past the end
        for (int i = 0; i < ROWS; ++i)
          acc[r][i] = _mm512_fmadd_ps(offset, _mm512_maskz_loadu_ps(mask, sums + i * blocks + b0), acc[r][i]);
      }
      int64_t b = 0;
      for (; b + 2 <= count; b += 2) {  // pairs of blocks (widen_q4_pair)
        const __m512i pair = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(b)), halfway);
        for (int r = 0; r < OUTS; ++r) {
          const uint8_t* bytes = p.w + (n + r) * (p.k / 2) + (b0 + b) * (kBlock / 2);
          prefetch_ahead(bytes);
          __m512bh low, high;
          widen_q4_pair(bytes, low_control, high_control, low, high);
          const __m512 scale = _mm512_permutexvar_ps(pair, _mm512_load_ps(d[r]));  // b in lanes 0..7, b + 1 in 8..15
          pair_products<ROWS>(acc[r], xs + (b0 + b) * kBlock, blocks * kBlock, low, high, scale);
        }
      }
      for (; b < count; ++b) {  // the row's last block, where it has no pair
        for (int r = 0; r < OUTS; ++r) {
          const uint8_t* bytes = p.w + (n + r) * (p.k / 2) + (b0 + b) * (kBlock / 2);
          const __m512bh w = widen_q4(bytes, control);
          block_products<ROWS>(acc[r], xs + (b0 + b) * kBlock, blocks * kBlock, w, _mm512_set1_ps(d[r][b]));
        }
      }
    }
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) p.y[i * p.n + n + r] = _mm512_reduce_add_ps(acc[r][i]);
  }
  if (n < n1) exact_q4_tile<ROWS, 1>(p, xs, sums, n, n1);
}

struct ExactQ4Tile {
  template <int ROWS, int OUTS>
  static void run(const Problem& p, const uint16_t* xs, const float* sums, int64_t n0, int64_t n1) {
    exact_q4_tile<ROWS, OUTS>(p, xs, sums, n0, n1);
  }
};

// q6: Σ_j d·(q_j − 32)·x_j = d·Σ_j (128 + q_j)·x_j − 160·d·Σ_j x_j per group of 16, the first sum a
// quarter of a pair's two chained dpbf16 (widen_q6_pair: four lanes a group; a row's last block without a
// pair half of one dpbf16, widen_q6: lanes 0..7 its first 16 elements, 8..15 the others), each output's
// 16 scales (8 blocks) one vector.
template <int ROWS, int OUTS>
void exact_q6_tile(const Problem& p, const uint16_t* xs, const float* halves, int64_t n0, int64_t n1) {
  const int64_t blocks = p.k / kBlock, groups = 2 * blocks;
  const __m512i nibbles = nibble_control(), tops = top_control();
  const Q6PairControls controls;
  const __m512i halfway = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i fourfold = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512 zero = _mm512_setzero_ps(), minus160 = _mm512_set1_ps(-160.0f);
  int64_t n = n0;
  for (; n + OUTS <= n1; n += OUTS) {
    __m512 acc[OUTS][ROWS];
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) acc[r][i] = zero;
    for (int64_t b0 = 0; b0 < blocks; b0 += 8) {
      const int64_t count = std::min<int64_t>(8, blocks - b0);
      const __mmask16 mask = static_cast<__mmask16>((1u << (2 * count)) - 1);
      __m512 scale[OUTS];
      for (int r = 0; r < OUTS; ++r) {
        const int64_t at = (n + r) * groups + 2 * b0;
        prefetch_ahead(p.scale + at, kPrefetch / 4);
        scale[r] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p.scale + at));
        const __m512 offset = _mm512_mul_ps(scale[r], minus160);  // zero past the end
        for (int i = 0; i < ROWS; ++i)
          acc[r][i] = _mm512_fmadd_ps(offset, _mm512_maskz_loadu_ps(mask, halves + i * groups + 2 * b0), acc[r][i]);
      }
      int64_t b = 0;
      for (; b + 2 <= count; b += 2) {  // pairs of blocks (widen_q6_pair): four groups a product
        const __m512i quad = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(2 * b)), fourfold);
        for (int r = 0; r < OUTS; ++r) {
          const uint8_t* low = p.w + (n + r) * (p.k / 2) + (b0 + b) * (kBlock / 2);
          const uint8_t* high = p.high + (n + r) * (p.k / 4) + (b0 + b) * (kBlock / 4);
          prefetch_ahead(low);
          prefetch_ahead(high, kPrefetch / 2);
          __m512bh w_low, w_high;
          widen_q6_pair(low, high, controls, w_low, w_high);
          const __m512 d = _mm512_permutexvar_ps(quad, scale[r]);  // groups 2b .. 2b + 3, four lanes each
          pair_products<ROWS>(acc[r], xs + (b0 + b) * kBlock, blocks * kBlock, w_low, w_high, d);
        }
      }
      for (; b < count; ++b) {  // the row's last block, where it has no pair
        const __m512i pair = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(2 * b)), halfway);
        for (int r = 0; r < OUTS; ++r) {
          const uint8_t* low = p.w + (n + r) * (p.k / 2) + (b0 + b) * (kBlock / 2);
          const uint8_t* high = p.high + (n + r) * (p.k / 4) + (b0 + b) * (kBlock / 4);
          const __m512bh w = widen_q6(low, high, nibbles, tops);
          const __m512 d = _mm512_permutexvar_ps(pair, scale[r]);  // group 2b in lanes 0..7, 2b + 1 in 8..15
          block_products<ROWS>(acc[r], xs + (b0 + b) * kBlock, blocks * kBlock, w, d);
        }
      }
    }
    for (int r = 0; r < OUTS; ++r)
      for (int i = 0; i < ROWS; ++i) p.y[i * p.n + n + r] = _mm512_reduce_add_ps(acc[r][i]);
  }
  if (n < n1) exact_q6_tile<ROWS, 1>(p, xs, halves, n, n1);
}

struct ExactQ6Tile {
  template <int ROWS, int OUTS>
  static void run(const Problem& p, const uint16_t* xs, const float* halves, int64_t n0, int64_t n1) {
    exact_q6_tile<ROWS, OUTS>(p, xs, halves, n0, n1);
  }
};

// Outputs [n0, n1) of every row, eight rows at a time whatever the batch; ``sums``: each row's
// ``per_row`` block sums the tile needs (q4: per block, q6: per half block).
template <typename Tile>
void exact_part(const Problem& p, const uint16_t* x, const float* sums, int64_t per_row, int64_t n0, int64_t n1) {
  for (int64_t row = 0; row < p.m; row += 8) {
    Problem chunk = p;
    chunk.y += row * p.n;
    chunk.m = std::min<int64_t>(8, p.m - row);
    by_rows<Tile>(chunk.m, chunk, x + row * p.k, sums + row * per_row, n0, n1);
  }
}

void run_exact(ffi::ThreadPool& pool, const Problem& problem, Format format) {
  ExactRows xs;
  exact_rows(problem, xs, format);
  const int64_t blocks = problem.k / kBlock;
  over_outputs(pool, problem, 4, [&problem, &xs, format, blocks](int64_t n0, int64_t n1) {
    if (format == Format::q6)
      exact_part<ExactQ6Tile>(problem, xs.x.data(), xs.halves.data(), 2 * blocks, n0, n1);
    else
      exact_part<ExactQ4Tile>(problem, xs.x.data(), xs.sums.data(), blocks, n0, n1);
  });
}
#endif

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
// with d·dx (two for q6's two scales): 1.6-2.2x the float path's rate at one row. The rounding's error is
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

// The same float operations as kernels.quantize_activations(x, levels=32767): inverse = 32767 / amax,
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

// A decode batch's products on a float copy (q8 needs no sums).
void run_float(ffi::ThreadPool& pool, const Problem& problem, Format format) {
#if defined(FIXIT_INT16_ROWS)
  if (int16_format(format)) return run_int16(pool, problem, format);
#endif
  BlockSums xs;
  if (format != Format::q8) block_sums(problem, format == Format::q6 ? kQ6Group : kBlock, xs);
  over_outputs(pool, problem, 4, [&problem, &xs, format](int64_t n0, int64_t n1) {
    switch (format) {
      case Format::q4: return float_rows<FloatTile<Format::q4>>(problem, xs, n0, n1);
      case Format::q6: return float_rows<FloatTile<Format::q6>>(problem, xs, n0, n1);
      default: return float_rows<FloatTile<Format::q8>>(problem, xs, n0, n1);
    }
  });
}
#endif

void run(ffi::ThreadPool& pool, const Problem& problem, Format format) {
#if defined(FIXIT_EXACT_Q4)
  if (format != Format::q8 && problem.m <= kSmallRows) return run_exact(pool, problem, format);
#elif !defined(__AVX512BF16__)
  if (problem.m <= kSmallRows) return run_float(pool, problem, format);
#endif
#if defined(FIXIT_OUTER_PANEL)
  run_outer(pool, problem, format);
#else
  std::vector<Scalar> xs;  // the rows in the products' number type
  rows_to_product_type(problem, xs);
  over_outputs(pool, problem, problem.m <= kSmallRows ? 4 : kPanel, [&problem, &xs, format](int64_t n0, int64_t n1) {
    switch (format) {
      case Format::q4: return run_part<Format::q4>(problem, xs, n0, n1);
      case Format::q6: return run_part<Format::q6>(problem, xs, n0, n1);
      default: return run_part<Format::q8>(problem, xs, n0, n1);
    }
  });
#endif
}


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

ffi::Error check(const ffi::Buffer<ffi::F32>& x, int64_t n, int64_t row_bytes, int64_t bytes_per_row,
                 const ffi::Buffer<ffi::F16>& scale) {
  const auto xd = x.dimensions(), sd = scale.dimensions();
  if (xd.size() != 2 || sd.size() != 2) return ffi::Error::InvalidArgument("block matmul: operands must be 2-D");
  const int64_t k = xd[1];
  if (k % kBlock != 0 || row_bytes != bytes_per_row || sd[0] != n || sd[1] != k / kBlock)
    return ffi::Error::InvalidArgument("block matmul: shapes must be x (M, K), weights (N, K or K/2), "
                                       "scales (N, K/32), with K a multiple of 32");
  return ffi::Error::Success();
}

// Rows from ``valid`` on are padding (a prompt padded to its length bucket): left out, their outputs zero.
int64_t valid_rows(const ffi::Buffer<ffi::F32>& x, const ffi::Buffer<ffi::S32>& valid, float* y, int64_t n) {
  const int64_t m = x.dimensions()[0];
  const int64_t rows = std::clamp<int64_t>(valid.element_count() ? valid.typed_data()[0] : m, 0, m);
  std::fill(y + rows * n, y + m * n, 0.0f);
  return rows;
}

ffi::Error q8_matmul(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S32> valid,
                     ffi::Buffer<ffi::S8> w, ffi::Buffer<ffi::F16> scale, int64_t int8_activations,
                     ffi::ResultBuffer<ffi::F32> y) {
  const auto wd = w.dimensions();
  if (wd.size() != 2) return ffi::Error::InvalidArgument("q8 matmul: weights must be 2-D");
  const int64_t k = x.dimensions().back();
  if (ffi::Error e = check(x, wd[0], wd[1], k, scale); e.failure()) return e;
  const Problem p{x.typed_data(), reinterpret_cast<const uint8_t*>(w.typed_data()),
                  reinterpret_cast<const uint16_t*>(scale.typed_data()), nullptr, y->typed_data(),
                  valid_rows(x, valid, y->typed_data(), wd[0]), k, wd[0]};
  if (p.m > 0 && p.n > 0) int8_activations ? run_int8(pool, p, false) : run(pool, p, Format::q8);
  return ffi::Error::Success();
}

ffi::Error q4_matmul(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S32> valid,
                     ffi::Buffer<ffi::U8> w,
                     ffi::Buffer<ffi::F16> scale, ffi::Buffer<ffi::F16> shift, int64_t int8_activations,
                     ffi::ResultBuffer<ffi::F32> y) {
  const auto wd = w.dimensions();
  if (wd.size() != 2) return ffi::Error::InvalidArgument("q4 matmul: weights must be 2-D");
  const int64_t k = x.dimensions().back();
  if (ffi::Error e = check(x, wd[0], wd[1] * 2, k, scale); e.failure()) return e;
  if (shift.dimensions().size() != 2 || shift.dimensions()[0] != wd[0] || shift.dimensions()[1] != k / kBlock)
    return ffi::Error::InvalidArgument("q4 matmul: offsets must have the scales' shape");
  const Problem p{x.typed_data(), w.typed_data(), reinterpret_cast<const uint16_t*>(scale.typed_data()),
                  reinterpret_cast<const uint16_t*>(shift.typed_data()), y->typed_data(),
                  valid_rows(x, valid, y->typed_data(), wd[0]), k, wd[0]};
  if (p.m > 0 && p.n > 0) int8_activations ? run_int8(pool, p, true) : run(pool, p, Format::q4);
  return ffi::Error::Success();
}

ffi::Error q6_matmul(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S32> valid,
                     ffi::Buffer<ffi::U8> low, ffi::Buffer<ffi::U8> high, ffi::Buffer<ffi::F16> scale,
                     ffi::ResultBuffer<ffi::F32> y) {
  const auto xd = x.dimensions(), ld = low.dimensions(), hd = high.dimensions(), sd = scale.dimensions();
  if (xd.size() != 2 || ld.size() != 2 || hd.size() != 2 || sd.size() != 2)
    return ffi::Error::InvalidArgument("q6 matmul: operands must be 2-D");
  const int64_t k = xd[1], n = ld[0];
  if (k % kBlock != 0 || ld[1] * 2 != k || hd[0] != n || hd[1] * 4 != k || sd[0] != n || sd[1] * kQ6Group != k)
    return ffi::Error::InvalidArgument("q6 matmul: shapes must be x (M, K), low nibbles (N, K/2), high bits "
                                       "(N, K/4), scales (N, K/16), with K a multiple of 32");
  Problem p{x.typed_data(), low.typed_data(), reinterpret_cast<const uint16_t*>(scale.typed_data()), nullptr,
            y->typed_data(), valid_rows(x, valid, y->typed_data(), n), k, n};
  p.high = high.typed_data();
  if (p.m > 0 && p.n > 0) run(pool, p, Format::q6);
  return ffi::Error::Success();
}


// ---- attention ------------------------------------------------------------------------------------
// T new tokens per row (T = 1 in a decode step, a padded prompt in a prefill): write their keys/values at
// the row's own slots index[b] .. index[b]+T-1 of the cache (in place: the cache buffers are aliased to
// the outputs), then let each query, at position p = index[b] + t, attend over the slots it can see,
// (p - window, p], and nothing else. Tokens from ``valid`` on are padding: neither written nor computed
// (their outputs are zero). XLA runs ~10 small ops per layer over the whole cache instead. The cache is
// every layer's, stacked (layers, B, KV, S, hd); a call reads and writes only its own layer's. It holds
// float32 or float16 (``Half``: what a step reads of it halves, and at long contexts a step reads more of
// the cache than of the weights); either way the arithmetic is float32.

// A float16 value's bits, as XLA's convert rounds it (to nearest, ties to even).
struct Half {
  uint16_t bits;
};

inline f32v load_cached(const float* p) { return load(p); }
inline f32v load_cached(const Half* p) {
  f32v out;
#if defined(__AVX512F__)
  const __m512 wide = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  std::memcpy(&out, &wide, sizeof out);
#elif defined(__AVX2__) && defined(__F16C__)
  const __m256 wide = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  std::memcpy(&out, &wide, sizeof out);
#else
  for (int64_t i = 0; i < kLanes; ++i) out[i] = half_to_float(p[i].bits);
#endif
  return out;
}
inline float cached_value(float v) { return v; }
inline float cached_value(Half h) { return half_to_float(h.bits); }
inline void store_cached(float* at, const float* from, int64_t n) { std::memcpy(at, from, n * sizeof(float)); }
inline void store_cached(Half* at, const float* from, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const _Float16 h = static_cast<_Float16>(from[i]);
    std::memcpy(&at[i].bits, &h, sizeof h);
  }
}

template <typename T>
inline float dot(const float* a, const T* b, int64_t n) {
  f32v acc = {};
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) acc += load(a + d) * load_cached(b + d);
  float total = sum(acc);
  for (; d < n; ++d) total += a[d] * cached_value(b[d]);
  return total;
}

template <typename T>
struct Attention {
  const float* q;        // (B, T, H, hd)
  const float* k_new;    // (B, T, KV, hd)
  const float* v_new;    // (B, T, KV, hd)
  const int32_t* index;  // (B,)
  T* keys;               // (B, KV, S, hd), aliased in and out
  T* values;
  float* out;            // (B, T, H, hd)
  int64_t batch, tokens, valid, heads, kv_heads, slots, hd, window;
  float scale, soft_cap;
};

constexpr int64_t kKeyRun = 4;     // keys scored together: four independent chains of multiply-adds
constexpr int64_t kSlotTile = 64;  // slots whose values every query head of a group takes in turn

// q · key for kKeyRun consecutive keys (rows hd apart), each summed in dot's order (the same bits). One key
// at a time was one chain of dependent multiply-adds and a horizontal sum a key.
template <typename T>
inline void dots(const float* q, const T* keys, int64_t hd, float* out) {
  f32v acc[kKeyRun] = {};
  int64_t d = 0;
  for (; d + kLanes <= hd; d += kLanes) {
    const f32v qv = load(q + d);
    for (int64_t i = 0; i < kKeyRun; ++i) acc[i] += qv * load_cached(keys + i * hd + d);
  }
  for (int64_t i = 0; i < kKeyRun; ++i) {
    float total = sum(acc[i]);
    for (int64_t e = d; e < hd; ++e) total += q[e] * cached_value(keys[i * hd + e]);
    out[i] = total;
  }
}

// o[0 .. V vectors) += Σ_s w[s] · values[s] over slots [s0, s1) (rows hd apart), in order of s: V
// independent chains whose sums stay in registers for the whole run of slots.
template <int V, typename T>
inline void weighted_values(const float* w, const T* values, int64_t hd, int64_t s0, int64_t s1, float* o) {
  f32v acc[V];
  for (int j = 0; j < V; ++j) acc[j] = load(o + j * kLanes);
  for (int64_t s = s0; s < s1; ++s) {
    const f32v weight = f32v{} + w[s];
    for (int j = 0; j < V; ++j) acc[j] += weight * load_cached(values + s * hd + j * kLanes);
  }
  for (int j = 0; j < V; ++j) std::memcpy(o + j * kLanes, &acc[j], sizeof acc[j]);
}

// Query token t of row b, every query head sharing key/value head h (the group's heads are adjacent in q
// and out). Keys are read in runs of kKeyRun for every head of the group while they sit in L1, values in
// tiles of kSlotTile slots; each output still sums its slots in order, so the bits are one head at a
// time's.
template <typename T>
void attend_one(const Attention<T>& a, int64_t b, int64_t t, int64_t h, std::vector<float>& scores) {
  const int64_t pos = std::clamp<int64_t>(a.index[b] + t, 0, a.slots - 1);
  const int64_t first = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
  const int64_t hd = a.hd, groups = a.heads / a.kv_heads, count = pos - first + 1;
  const int64_t padded = (count + kLanes - 1) / kLanes * kLanes;
  const T* keys = a.keys + ((b * a.kv_heads + h) * a.slots + first) * hd;
  const T* values = a.values + ((b * a.kv_heads + h) * a.slots + first) * hd;
  const float* q = a.q + ((b * a.tokens + t) * a.heads + h * groups) * hd;
  float* out = a.out + ((b * a.tokens + t) * a.heads + h * groups) * hd;
  scores.resize(groups * padded);
  int64_t s = 0;
  for (; s + kKeyRun <= count; s += kKeyRun)
    for (int64_t g = 0; g < groups; ++g) dots(q + g * hd, keys + s * hd, hd, &scores[g * padded + s]);
  for (; s < count; ++s)
    for (int64_t g = 0; g < groups; ++g) scores[g * padded + s] = dot(q + g * hd, keys + s * hd, hd);
  for (int64_t g = 0; g < groups; ++g) {  // softmax: each head's scores become its weights
    float* row = &scores[g * padded];
    float best = -INFINITY;
    for (int64_t i = 0; i < count; ++i) {
      float score = row[i] * a.scale;
      if (a.soft_cap > 0) score = std::tanh(score / a.soft_cap) * a.soft_cap;
      row[i] = score;
      best = std::max(best, score);
    }
    std::fill(row + count, row + padded, -INFINITY);  // e^-inf = 0 in the padding lanes
    f32v totals = {};
    for (int64_t i = 0; i < padded; i += kLanes) {
      const f32v e = exp_nonpositive(load(row + i) - best);
      std::memcpy(row + i, &e, sizeof e);
      totals += e;
    }
    const float total = sum(totals);
    for (int64_t i = 0; i < padded; i += kLanes) {
      const f32v weight = load(row + i) / total;
      std::memcpy(row + i, &weight, sizeof weight);
    }
  }
  std::fill(out, out + groups * hd, 0.0f);
  for (int64_t s0 = 0; s0 < count; s0 += kSlotTile) {
    const int64_t s1 = std::min(count, s0 + kSlotTile);
    for (int64_t g = 0; g < groups; ++g) {
      const float* w = &scores[g * padded];
      float* o = out + g * hd;
      int64_t d = 0;
      for (; d + 8 * kLanes <= hd; d += 8 * kLanes) weighted_values<8>(w, values + d, hd, s0, s1, o + d);
      for (; d + 4 * kLanes <= hd; d += 4 * kLanes) weighted_values<4>(w, values + d, hd, s0, s1, o + d);
      for (; d + kLanes <= hd; d += kLanes) weighted_values<1>(w, values + d, hd, s0, s1, o + d);
      for (; d < hd; ++d)
        for (int64_t i = s0; i < s1; ++i) o[d] += w[i] * cached_value(values[i * hd + d]);
    }
  }
}

// Work items: (row, key/value head, token), token fastest; a part is a contiguous run of items.
template <typename T>
void attention_items(const Attention<T>& a, int64_t first, int64_t last) {
  thread_local std::vector<float> scores;
  for (int64_t item = first; item < last; ++item) {
    const int64_t t = item % a.valid, pair = item / a.valid;
    attend_one(a, pair / a.kv_heads, t, pair % a.kv_heads, scores);
  }
}

template <typename T>
void write_new_tokens(const Attention<T>& a) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t t = 0; t < a.valid; ++t) {
      const int64_t pos = a.index[b] + t;
      if (pos < 0 || pos >= a.slots) continue;
      for (int64_t h = 0; h < a.kv_heads; ++h) {
        const int64_t at = ((b * a.kv_heads + h) * a.slots + pos) * a.hd;
        const int64_t from = ((b * a.tokens + t) * a.kv_heads + h) * a.hd;
        store_cached(a.keys + at, a.k_new + from, a.hd);
        store_cached(a.values + at, a.v_new + from, a.hd);
      }
    }
}

// C: the cache's element type (F32, or F16 stored as Half).
template <ffi::DataType C>
ffi::Error attention(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> k_new,
                     ffi::Buffer<ffi::F32> v_new, ffi::Buffer<ffi::S32> index, ffi::Buffer<ffi::S32> valid,
                     ffi::Buffer<C> keys, ffi::Buffer<C> values, int64_t layer, int64_t window, float scale,
                     float soft_cap, ffi::ResultBuffer<ffi::F32> out, ffi::ResultBuffer<C> keys_out,
                     ffi::ResultBuffer<C> values_out) {
  using T = std::conditional_t<C == ffi::DataType::F32, float, Half>;
  const auto qd = q.dimensions(), cd = keys.dimensions(), nd = k_new.dimensions();
  if (qd.size() != 4 || cd.size() != 5 || nd.size() != 4 || static_cast<int64_t>(index.element_count()) != qd[0] ||
      cd[1] != qd[0] || cd[4] != qd[3] || nd[0] != qd[0] || nd[1] != qd[1] || nd[2] != cd[2] ||
      nd[3] != qd[3] || qd[2] % cd[2] != 0 || values.element_count() != keys.element_count() ||
      v_new.element_count() != k_new.element_count() || layer < 0 || layer >= cd[0])
    return ffi::Error::InvalidArgument("attention: q (B, T, H, hd), k/v new (B, T, KV, hd), index (B,), "
                                       "cache (layers, B, KV, S, hd), 0 <= layer < layers");
  const int64_t tokens = qd[1];
  const int64_t real = std::clamp<int64_t>(valid.element_count() ? valid.typed_data()[0] : tokens, 0, tokens);
  const int64_t at = layer * cd[1] * cd[2] * cd[3] * cd[4];  // the layer's cache in the stacked one
  Attention<T> a{q.typed_data(), k_new.typed_data(), v_new.typed_data(), index.typed_data(),
                 reinterpret_cast<T*>(keys_out->typed_data()) + at,
                 reinterpret_cast<T*>(values_out->typed_data()) + at, out->typed_data(),
                 qd[0], tokens, real, qd[2], cd[2], cd[3], qd[3], window, scale, soft_cap};
  // The outputs alias the cache inputs; should XLA have given fresh buffers, start from the inputs.
  if (keys_out->untyped_data() != keys.untyped_data())
    std::memcpy(keys_out->untyped_data(), keys.untyped_data(), keys.size_bytes());
  if (values_out->untyped_data() != values.untyped_data())
    std::memcpy(values_out->untyped_data(), values.untyped_data(), values.size_bytes());
  write_new_tokens(a);
  if (real < tokens)  // padding: zero, as the matmuls leave it
    for (int64_t b = 0; b < a.batch; ++b)
      std::fill(a.out + (b * tokens + real) * a.heads * a.hd, a.out + (b + 1) * tokens * a.heads * a.hd, 0.0f);
  const int64_t items = a.batch * a.kv_heads * real;
  if (items == 0) return ffi::Error::Success();
  const int64_t work = items * a.slots * a.hd * (a.heads / a.kv_heads);
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t parts = std::min<int64_t>(work < (int64_t{1} << 17) ? 1 : threads, items);
  parallel_parts(pool, parts, a.batch * a.tokens <= kSmallRows, [&a, items, parts](int64_t part) {
    attention_items(a, items * part / parts, items * (part + 1) / parts);
  });
  return ffi::Error::Success();
}

// ---- a step's candidates: each row's k best logits and its log-normaliser ------------------------------
// What the host samples from (inference/engine/fast_engine.py): the k largest logits of a row, largest
// first (equal values: lower id first, as lax.top_k orders them), and logsumexp(logits / temperature).
// XLA's top_k sorts partially over the whole vocabulary: 1.4 ms a row on Gemma 3's 262144 tokens (AMD
// Zen 3), 11 ms a step at batch 8. Here one pass keeps a heap of the k best so far, whose worst is the
// bar a logit must beat (after the first few thousand, almost none does: a compare and a branch each),
// and a second, vectorized pass sums exp((x − max) / T).
struct Candidate {
  int32_t key;  // the logit's order as a signed integer (total_order)
  int32_t id;
};

// A float's place in IEEE's total order as a signed integer: as lax.top_k orders them (+0 above −0).
inline int32_t total_order(float value) {
  int32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits ^ ((bits >> 31) & 0x7FFFFFFF);
}

inline bool better(const Candidate& a, const Candidate& b) {
  return a.key > b.key || (a.key == b.key && a.id < b.id);
}

void row_candidates(const float* x, int64_t vocab, int64_t k, float temperature, float* values, int32_t* ids,
                    float* norm) {
  std::vector<Candidate> heap(k);  // worst first (std heap under ``better``)
  for (int64_t i = 0; i < k; ++i) heap[i] = {total_order(x[i]), static_cast<int32_t>(i)};
  std::make_heap(heap.begin(), heap.end(), better);
  int32_t bar = heap.front().key;
  for (int64_t i = k; i < vocab; ++i) {
    const int32_t key = total_order(x[i]);
    if (key <= bar) continue;  // an equal logit has a higher id than every kept one: not better
    std::pop_heap(heap.begin(), heap.end(), better);
    heap.back() = {key, static_cast<int32_t>(i)};
    std::push_heap(heap.begin(), heap.end(), better);
    bar = heap.front().key;
  }
  std::sort_heap(heap.begin(), heap.end(), better);  // best first
  for (int64_t i = 0; i < k; ++i) values[i] = x[heap[i].id], ids[i] = heap[i].id;
  const float top = values[0], inverse = 1.0f / temperature;
  f32v total = {};
  int64_t i = 0;
  for (; i + kLanes <= vocab; i += kLanes) total += exp_nonpositive((load(x + i) - top) * inverse);
  float sum_exp = sum(total);
  for (; i < vocab; ++i) sum_exp += std::exp((x[i] - top) * inverse);
  *norm = top * inverse + std::log(sum_exp);
}

ffi::Error candidates(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> logits, ffi::Buffer<ffi::F32> temperatures,
                      ffi::ResultBuffer<ffi::F32> values, ffi::ResultBuffer<ffi::S32> ids,
                      ffi::ResultBuffer<ffi::F32> norm) {
  const auto ld = logits.dimensions(), vd = values->dimensions();
  if (ld.size() != 2 || vd.size() != 2 || vd[0] != ld[0] || vd[1] < 1 || vd[1] > ld[1] ||
      static_cast<int64_t>(temperatures.element_count()) != ld[0])
    return ffi::Error::InvalidArgument("candidates: logits (B, V), temperatures (B,), 1 <= k <= V");
  const int64_t batch = ld[0], vocab = ld[1], k = vd[1];
  const float* x = logits.typed_data();
  const float* t = temperatures.typed_data();
  float* v = values->typed_data();
  int32_t* id = ids->typed_data();
  float* n = norm->typed_data();
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t parts = std::min<int64_t>(batch * vocab < (int64_t{1} << 17) ? 1 : threads, batch);
  parallel_parts(pool, parts, batch <= kSmallRows, [=](int64_t part) {
    for (int64_t row = batch * part / parts; row < batch * (part + 1) / parts; ++row)
      row_candidates(x + row * vocab, vocab, k, t[row], v + row * k, id + row * k, n + row);
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(FixitQ8Matmul, q8_matmul,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S8>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Attr<int64_t>("int8_activations")
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(FixitQ4Matmul, q4_matmul,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Attr<int64_t>("int8_activations")
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(FixitQ6Matmul, q6_matmul,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::F16>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// The attention's binding for a cache of element type C.
template <ffi::DataType C>
auto attention_binding() {
  return ffi::Ffi::Bind()
      .Ctx<ffi::ThreadPool>()
      .Arg<ffi::Buffer<ffi::F32>>()
      .Arg<ffi::Buffer<ffi::F32>>()
      .Arg<ffi::Buffer<ffi::F32>>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .template Arg<ffi::Buffer<C>>()
      .template Arg<ffi::Buffer<C>>()
      .template Attr<int64_t>("layer")
      .template Attr<int64_t>("window")
      .template Attr<float>("scale")
      .template Attr<float>("soft_cap")
      .template Ret<ffi::Buffer<ffi::F32>>()
      .template Ret<ffi::Buffer<C>>()
      .template Ret<ffi::Buffer<C>>();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(FixitAttention, attention<ffi::F32>, attention_binding<ffi::F32>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(FixitAttentionF16, attention<ffi::F16>, attention_binding<ffi::F16>());

// The number type the matmuls multiply in: "bfloat16" (rows and weights rounded, float32 sums; with
// AVX512-BF16) or "float32".
extern "C" const char* fixit_product_type() {
#if defined(__AVX512BF16__)
  return "bfloat16";
#else
  return "float32";
#endif
}

// 1 when a decode batch's q4 products multiply the 4-bit integers exactly (bfloat16 128 + q, scale and
// offset applied in float32; AVX512-BF16 + VBMI), 0 when the weights are rounded to the product type.
extern "C" int fixit_exact_q4() {
#if defined(FIXIT_EXACT_Q4)
  return 1;
#else
  return 0;
#endif
}

// 1 when the weights are widened with vector instructions (AVX-512 or AVX2); 0 when by scalar loops,
// which are correct but slow (weights = "auto" measures before it chooses them).
extern "C" int fixit_vector_decode() {
#if defined(__AVX512F__) || defined(__AVX2__)
  return 1;
#else
  return 0;
#endif
}

// The block formats whose decode batches round the rows to int16 per block of 32 and multiply the
// weights' integers exactly (run_int16), bit f for Format f (q8 1, q4 2, q6 4): all three on the AVX2
// copy, q8 on the avx512 copy (int16_format), none elsewhere.
extern "C" int fixit_int16_rows() {
#if defined(FIXIT_INT16_ROWS)
  int formats = 0;
  for (const Format format : {Format::q8, Format::q4, Format::q6})
    if (int16_format(format)) formats |= 1 << static_cast<int>(format);
  return formats;
#else
  return 0;
#endif
}

// Decode batches of up to ``rows`` rows (clamped to 0..kNarrowRows) read one output at a time (by_rows);
// 0, the default, keeps the wide tiles for every batch. Returns the setting now in force.
extern "C" int fixit_set_narrow_rows(int rows) {
  narrow_rows.store(std::max(0, std::min(rows, kNarrowRows)), std::memory_order_relaxed);
  return narrow_rows.load(std::memory_order_relaxed);
}

extern "C" int fixit_narrow_rows() { return narrow_rows.load(std::memory_order_relaxed); }

// The instruction set this copy was compiled for (kernels/__init__.py builds one copy per set).
extern "C" const char* fixit_isa() {
#if defined(__AVX512BF16__)
  return "avx512bf16";
#elif defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "scalar";
#endif
}

// 1 when this CPU runs this copy's instructions. Compiled for the architecture's baseline, so that asking
// cannot itself fault on an older CPU; the loader asks before it registers anything.
#if defined(__x86_64__)
#define FIXIT_BASELINE __attribute__((target("arch=x86-64")))
#else
#define FIXIT_BASELINE
#endif
extern "C" FIXIT_BASELINE int fixit_runnable() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  bool ok = true;
#if defined(__AVX2__)
  ok = ok && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#if defined(__F16C__)
  ok = ok && __builtin_cpu_supports("f16c");
#endif
#if defined(__AVX512F__)
  ok = ok && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
#if defined(__AVX512VNNI__)
  ok = ok && __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__AVX512VBMI__)
  ok = ok && __builtin_cpu_supports("avx512vbmi");
#endif
#if defined(__AVX512BF16__)
  ok = ok && __builtin_cpu_supports("avx512bf16");
#endif
  return ok ? 1 : 0;
#else
  return 1;
#endif
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(FixitCandidates, candidates,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// decode rows as exact 4- and 6-bit integers with bfloat16 products (AVX512-BF16 + VBMI).

#pragma once

namespace {

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

}  // namespace

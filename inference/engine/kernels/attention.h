// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// attention over each row's own slots of the KV cache.

#pragma once

namespace {

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

}  // namespace

// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// a step's candidates: each row's k best logits and its log-normaliser.

#pragma once

namespace {

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

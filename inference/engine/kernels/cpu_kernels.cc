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
//
// This file is the one translation unit: it includes its parts, one concern each, in order (a later part
// uses the earlier ones), and defines the handlers and the C functions Python asks about the build.
//   blocks.h            vector types, the block formats, decoding a block, the generic decode/prefill tiles
//   crew.h              the kernels' own threads; spreading a call's parts over them or XLA's pool
//   decode_bf16.h       a decode batch on the avx512bf16 copy (exact 4/6-bit integers, bfloat16 products)
//   decode_float.h      a decode batch on the float copies (q4/q6 integers times float rows)
//   decode_int16.h      a decode batch on the AVX2 copy (rows rounded to int16, integer products)
//   prefill_avx2.h      a prefill on the AVX2 copy (int16 pair products over a k-major panel)
//   activations_int8.h  8-bit activations and integer products (llama.cpp's approach; opt-in formats)
//   matmul.h            which path serves a block matmul call; the handlers' checks
//   attention.h         attention over each row's own slots of the KV cache
//   candidates.h        a step's candidates: each row's best logits and its log-normaliser

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

#include "blocks.h"
#include "crew.h"
#include "decode_bf16.h"
#include "decode_float.h"
#include "decode_int16.h"
#include "prefill_avx2.h"
#include "activations_int8.h"
#include "matmul.h"
#include "attention.h"
#include "candidates.h"


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

// 1 where a prefill (more than kSmallRows rows) rounds the rows to int16 per block as a decode batch does
// and multiplies the weights' integers exactly, every block format (run_outer_int16: the AVX2 copy), else 0.
extern "C" int fixit_int16_prefill() {
#if defined(FIXIT_OUTER_INT16)
  return 1;
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

// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// a block matmul call: which path serves it, and the handlers' checks.

#pragma once

namespace {

#if !defined(__AVX512BF16__)
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
#if defined(FIXIT_OUTER_INT16)
  run_outer_int16(pool, problem, format);
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

}  // namespace

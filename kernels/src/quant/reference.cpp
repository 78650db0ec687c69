// The CPU references the parity gate compares against. They favour being obviously right:
// exact integer block dots and f64 sums (MMQ), exact f16*f16 products summed in f64 (f16 path).
// They are still fast enough for a 7B shape: output rows go to threads in panels whose weights
// are unpacked once into an element-major layout, so inner loops vectorize across rows
// without reordering any row's floating-point sum.
#include "qgate/quant/reference.h"

#include <algorithm>
#include <vector>

#include "detail/parallel_for.h"
#include "qgate/quant/half.h"
#include "qgate/quant/mmq_math.h"
#include "qgate/quant/quantize.h"

namespace qgate::quant {

namespace {

// Output rows per work item. A panel's weights are laid out element-major ([element][row]), so
// the inner loops run across the panel's rows: each row's sum still adds its terms strictly in
// element order (no reassociation), and the compiler can vectorize across rows.
constexpr int kPanelRows = 8;

int64_t panel_count(int64_t od) { return (od + kPanelRows - 1) / kPanelRows; }

// One panel of MMQ weights: q as f32 (small integers, exact), scales per block and row.
// Rows past the end of the matrix are zero and never written out.
struct MmqPanel {
  std::vector<float> q;    // [k][kPanelRows]
  std::vector<float> ds0;  // [blocks][kPanelRows]
  std::vector<float> ds1;
  std::vector<float> dm;
  std::vector<MmqWeightBlock> row;  // scratch: one unpacked row

  void load(WeightType type, const uint8_t* weights, size_t weight_row_bytes, int64_t o0,
            int64_t od, int64_t k) {
    const int64_t blocks = k / kQK;
    q.assign(static_cast<size_t>(k * kPanelRows), 0.0f);
    ds0.assign(static_cast<size_t>(blocks * kPanelRows), 0.0f);
    ds1.assign(ds0.size(), 0.0f);
    dm.assign(ds0.size(), 0.0f);
    row.resize(static_cast<size_t>(blocks));
    for (int r = 0; r < kPanelRows && o0 + r < od; ++r) {
      unpack_row_mmq(type, weights + (o0 + r) * weight_row_bytes, k, row.data());
      for (int64_t b = 0; b < blocks; ++b) {
        for (int i = 0; i < kQK; ++i) q[(b * kQK + i) * kPanelRows + r] = row[b].q[i];
        ds0[b * kPanelRows + r] = row[b].ds[0];
        ds1[b * kPanelRows + r] = row[b].ds[1];
        dm[b * kPanelRows + r] = row[b].dm;
      }
    }
  }
};

// y[t][o0..] = sum_b da * (ds * dot + dm * sa). The block dots are integers below 2^20 (32
// products of at most 2^14), so summing them in f32 is exact: they are the exact integer dots.
// Everything after them is f64.
template <bool kTwoHalves>
void mmq_panel_token(const MmqPanel& p, const float* aq, const float* ad, const int32_t* asum,
                     int64_t blocks, double out[kPanelRows]) {
  for (int r = 0; r < kPanelRows; ++r) out[r] = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* w = p.q.data() + b * kQK * kPanelRows;
    const float* a = aq + b * kQK;
    float low[kPanelRows] = {}, high[kPanelRows] = {};
    for (int i = 0; i < kQK / 2; ++i) {
      for (int r = 0; r < kPanelRows; ++r) low[r] += w[i * kPanelRows + r] * a[i];
    }
    for (int i = kQK / 2; i < kQK; ++i) {
      for (int r = 0; r < kPanelRows; ++r) high[r] += w[i * kPanelRows + r] * a[i];
    }
    const double da = ad[b];
    const double sa = asum[b];
    for (int r = 0; r < kPanelRows; ++r) {
      const size_t s = static_cast<size_t>(b * kPanelRows + r);
      double scaled;
      if constexpr (kTwoHalves) {
        scaled = static_cast<double>(p.ds0[s]) * low[r] + static_cast<double>(p.ds1[s]) * high[r];
      } else {
        scaled = static_cast<double>(p.ds0[s]) * (static_cast<double>(low[r]) + high[r]);
      }
      out[r] += da * (scaled + static_cast<double>(p.dm[s]) * sa);
    }
  }
}

template <bool kTwoHalves>
void mmq_reference(WeightType type, const uint8_t* weights, int64_t od, int64_t k,
                   const Q8Activations& a, int64_t nt, double* y, int threads) {
  const int64_t blocks = k / kQK;
  const size_t weight_row_bytes = row_bytes(type, k);
  // Activation quants as f32 once (exact), so the block dots run entirely in f32 lanes.
  const std::vector<float> aq(a.q.begin(), a.q.end());
  parallel_for(panel_count(od), threads, [&](int64_t begin, int64_t end) {
    MmqPanel panel;
    for (int64_t p = begin; p < end; ++p) {
      const int64_t o0 = p * kPanelRows;
      panel.load(type, weights, weight_row_bytes, o0, od, k);
      for (int64_t t = 0; t < nt; ++t) {
        double out[kPanelRows];
        mmq_panel_token<kTwoHalves>(panel, aq.data() + t * k, a.d.data() + t * blocks,
                                    a.sum.data() + t * blocks, blocks, out);
        for (int r = 0; r < kPanelRows && o0 + r < od; ++r) y[t * od + o0 + r] = out[r];
      }
    }
  });
}

}  // namespace

void reference_mmq(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y) {
  reference_mmq(type, weights, od, k, x, nt, y, 0);
}

void reference_f16(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y) {
  reference_f16(type, weights, od, k, x, nt, y, 0);
}

void reference_mmq(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y, int threads) {
  const Q8Activations activations = quantize_activations_q8(x, nt, k);
  const auto* bytes = static_cast<const uint8_t*>(weights);
  if (type == WeightType::q6_K) {
    mmq_reference<true>(type, bytes, od, k, activations, nt, y, threads);
  } else {
    mmq_reference<false>(type, bytes, od, k, activations, nt, y, threads);
  }
}

void reference_f16(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y, int threads) {
  const size_t weight_row_bytes = row_bytes(type, k);
  std::vector<float> xr(static_cast<size_t>(nt * k));
  for (int64_t i = 0; i < nt * k; ++i) xr[i] = round_to_f16(x[i]);

  parallel_for(panel_count(od), threads, [&](int64_t begin, int64_t end) {
    // The panel's weights, dequantized and rounded to f16 (exact in f32), element-major.
    std::vector<float> panel(static_cast<size_t>(k * kPanelRows));
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t p = begin; p < end; ++p) {
      const int64_t o0 = p * kPanelRows;
      std::fill(panel.begin(), panel.end(), 0.0f);
      for (int r = 0; r < kPanelRows && o0 + r < od; ++r) {
        dequantize_row(type, static_cast<const uint8_t*>(weights) + (o0 + r) * weight_row_bytes,
                       row.data(), k);
        for (int64_t i = 0; i < k; ++i) panel[i * kPanelRows + r] = round_to_f16(row[i]);
      }
      for (int64_t t = 0; t < nt; ++t) {
        const float* xt = xr.data() + t * k;
        // f16 x f16 products are exact in f32 (11-bit significands, no overflow or underflow),
        // so only the f64 sum rounds, and it adds in element order.
        double out[kPanelRows] = {};
        for (int64_t i = 0; i < k; ++i) {
          for (int r = 0; r < kPanelRows; ++r) {
            out[r] += static_cast<double>(panel[i * kPanelRows + r] * xt[i]);
          }
        }
        for (int r = 0; r < kPanelRows && o0 + r < od; ++r) y[t * od + o0 + r] = out[r];
      }
    }
  });
}

}  // namespace qgate::quant

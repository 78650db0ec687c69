// The CPU backend: both GEMM paths on host memory, multi-threaded and cache-blocked.
// MMQ keeps the weights unpacked in MMQ form and quantizes activations to q8 per call, the same
// math as the CUDA MMQ kernel with f32 rescale-accumulate. The f16 path keeps an f16 copy of
// the dequantized weights and multiplies f16-rounded activations with f32 accumulation.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/gemm_backend.h"
#include "detail/parallel_for.h"
#include "qgate/quant/half.h"
#include "qgate/quant/mmq_math.h"
#include "qgate/quant/quantize.h"

namespace qgate::kernels {

namespace {

using quant::kQK;
using quant::MmqWeightBlock;
using quant::WeightType;

// f16 path: rows per tile chosen so the tile's f32 copy (reused by every token) stays in L2.
constexpr int64_t kF16TargetTileBytes = 256 * 1024;

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return -1;  // unknown: only the allocator decides
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page_size);
}

// Checks a resident size before allocating it: an absurd size must fail cleanly, not take the
// machine into swap or the OOM killer. `elements` * `bytes_each` is computed without overflow.
CallResult check_resident_size(int64_t elements, int64_t bytes_each, int64_t* bytes_out) {
  const int64_t physical = physical_memory_bytes();
  const int64_t limit = physical > 0 ? physical : INT64_MAX;
  if (elements < 0 || (elements > 0 && bytes_each > limit / elements)) {
    return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY,
                            "resident weights would exceed the host's physical memory (" +
                                std::to_string(physical) + " bytes)");
  }
  *bytes_out = elements * bytes_each;
  return CallResult::ok();
}

// Runs a body and maps the failures a host computation can have to ABI statuses.
template <typename Body>
CallResult guarded(const char* what, Body body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY, std::string(what) + ": out of host memory");
  } catch (const std::length_error&) {
    return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY, std::string(what) + ": allocation too large");
  } catch (const std::exception& e) {
    return CallResult::fail(QGATE_ERR_INTERNAL, std::string(what) + ": " + e.what());
  }
}

CallResult check_run_arguments(const float* x, int64_t nt, const float* y, int64_t max_nt) {
  if (x == nullptr || y == nullptr) {
    return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT, "run: x and y must not be null");
  }
  if (nt < 1 || nt > max_nt) {
    return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT,
                            "run: nt = " + std::to_string(nt) + " is outside [1, max_nt = " +
                                std::to_string(max_nt) + "]");
  }
  return CallResult::ok();
}

// ---------------------------------------------------------------------------------------------
// MMQ path

// Rows per panel. A panel's quants are converted once per run to f32 in element-major order
// ([element][row]); the inner loops then run across rows, which vectorizes without reordering
// any sum. Block dots summed in f32 are exact: 32 products of at most 2^14 stay below 2^24.
constexpr int kMmqPanelRows = 8;

struct MmqPanel {
  std::vector<float> q;    // [k][kMmqPanelRows]
  std::vector<float> ds0;  // [blocks][kMmqPanelRows]
  std::vector<float> ds1;
  std::vector<float> dm;

  // Rows past od are zero (scales included) and never written out.
  void load(const MmqWeightBlock* weights, int64_t o0, int64_t od, int64_t k) {
    const int64_t blocks = k / kQK;
    q.assign(static_cast<size_t>(k * kMmqPanelRows), 0.0f);
    ds0.assign(static_cast<size_t>(blocks * kMmqPanelRows), 0.0f);
    ds1.assign(ds0.size(), 0.0f);
    dm.assign(ds0.size(), 0.0f);
    for (int r = 0; r < kMmqPanelRows && o0 + r < od; ++r) {
      const MmqWeightBlock* row = weights + (o0 + r) * blocks;
      for (int64_t b = 0; b < blocks; ++b) {
        for (int i = 0; i < kQK; ++i) q[(b * kQK + i) * kMmqPanelRows + r] = row[b].q[i];
        ds0[b * kMmqPanelRows + r] = row[b].ds[0];
        ds1[b * kMmqPanelRows + r] = row[b].ds[1];
        dm[b * kMmqPanelRows + r] = row[b].dm;
      }
    }
  }
};

// out[r] = sum_b da * (ds * dot + dm * sa) in f32, blocks in order, as the GPU rescale does.
template <bool kTwoHalves>
void mmq_panel_token(const MmqPanel& p, const float* aq, const float* ad, const int32_t* asum,
                     int64_t blocks, float out[kMmqPanelRows]) {
  for (int r = 0; r < kMmqPanelRows; ++r) out[r] = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* w = p.q.data() + b * kQK * kMmqPanelRows;
    const float* a = aq + b * kQK;
    float low[kMmqPanelRows] = {}, high[kMmqPanelRows] = {};
    for (int i = 0; i < kQK / 2; ++i) {
      for (int r = 0; r < kMmqPanelRows; ++r) low[r] += w[i * kMmqPanelRows + r] * a[i];
    }
    for (int i = kQK / 2; i < kQK; ++i) {
      for (int r = 0; r < kMmqPanelRows; ++r) high[r] += w[i * kMmqPanelRows + r] * a[i];
    }
    const float da = ad[b];
    const float sa = static_cast<float>(asum[b]);
    const float* ds0 = p.ds0.data() + b * kMmqPanelRows;
    const float* ds1 = p.ds1.data() + b * kMmqPanelRows;
    const float* dm = p.dm.data() + b * kMmqPanelRows;
    for (int r = 0; r < kMmqPanelRows; ++r) {
      const float scaled = kTwoHalves ? ds0[r] * low[r] + ds1[r] * high[r] : ds0[r] * (low[r] + high[r]);
      out[r] += da * (scaled + dm[r] * sa);
    }
  }
}

class CpuMmqGemm final : public PreparedGemm {
 public:
  CpuMmqGemm(WeightType type, int64_t od, int64_t k, int64_t max_nt, int threads,
             std::vector<MmqWeightBlock> weights)
      : type_(type), od_(od), k_(k), max_nt_(max_nt), threads_(threads),
        weights_(std::move(weights)) {}

  CallResult run(const float* x, int64_t nt, float* y, void* /*stream*/) override {
    if (CallResult r = check_run_arguments(x, nt, y, max_nt_); !r) return r;
    return guarded("mmq run", [&] {
      const quant::Q8Activations a = quant::quantize_activations_q8(x, nt, k_);
      if (type_ == WeightType::q6_K) {
        compute<true>(a, nt, y);
      } else {
        compute<false>(a, nt, y);
      }
      return CallResult::ok();
    });
  }

  int64_t resident_bytes() const override {
    return static_cast<int64_t>(weights_.size() * sizeof(MmqWeightBlock));
  }

 private:
  template <bool kTwoHalves>
  void compute(const quant::Q8Activations& a, int64_t nt, float* y) const {
    const int64_t blocks = k_ / kQK;
    // Activation quants as f32 once per run (exact small integers).
    std::vector<float> aq(a.q.size());
    quant::parallel_for(nt, threads_, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin * k_; i < end * k_; ++i) aq[i] = a.q[i];
    });
    const int64_t panels = (od_ + kMmqPanelRows - 1) / kMmqPanelRows;
    // Each work item converts one panel of weights and streams every token past it.
    quant::parallel_for(panels, threads_, [&](int64_t begin, int64_t end) {
      MmqPanel panel;
      for (int64_t p = begin; p < end; ++p) {
        const int64_t o0 = p * kMmqPanelRows;
        panel.load(weights_.data(), o0, od_, k_);
        for (int64_t t = 0; t < nt; ++t) {
          float out[kMmqPanelRows];
          mmq_panel_token<kTwoHalves>(panel, aq.data() + t * k_, a.d.data() + t * blocks,
                                      a.sum.data() + t * blocks, blocks, out);
          for (int r = 0; r < kMmqPanelRows && o0 + r < od_; ++r) y[t * od_ + o0 + r] = out[r];
        }
      }
    });
  }

  WeightType type_;
  int64_t od_, k_, max_nt_;
  int threads_;
  std::vector<MmqWeightBlock> weights_;  // [od][k/32]
};

// ---------------------------------------------------------------------------------------------
// f16 path

// f32 dot with 16 independent lanes: vectorizable without reassociation, and a fixed order.
inline float f32_dot(const float* w, const float* x, int64_t k) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  for (int64_t i = 0; i < k; i += kLanes) {  // k is a multiple of 32
    for (int j = 0; j < kLanes; ++j) lanes[j] += w[i + j] * x[i + j];
  }
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

class CpuF16Gemm final : public PreparedGemm {
 public:
  CpuF16Gemm(int64_t od, int64_t k, int64_t max_nt, int threads, std::vector<uint16_t> weights)
      : od_(od), k_(k), max_nt_(max_nt), threads_(threads), weights_(std::move(weights)) {}

  CallResult run(const float* x, int64_t nt, float* y, void* /*stream*/) override {
    if (CallResult r = check_run_arguments(x, nt, y, max_nt_); !r) return r;
    return guarded("f16 run", [&] {
      std::vector<float> xr(static_cast<size_t>(nt * k_));
      quant::parallel_for(nt, threads_, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin * k_; i < end * k_; ++i) xr[i] = quant::round_to_f16(x[i]);
      });
      compute(xr.data(), nt, y);
      return CallResult::ok();
    });
  }

  int64_t resident_bytes() const override {
    return static_cast<int64_t>(weights_.size() * sizeof(uint16_t));
  }

 private:
  void compute(const float* xr, int64_t nt, float* y) const {
    // Rows per tile so that the tile's f32 copy stays near kF16TargetTileBytes.
    const int64_t row_tile =
        std::clamp<int64_t>(kF16TargetTileBytes / (k_ * static_cast<int64_t>(sizeof(float))), 4, 64);
    const int64_t tiles = (od_ + row_tile - 1) / row_tile;
    quant::parallel_for(tiles, threads_, [&](int64_t begin, int64_t end) {
      std::vector<float> tile_f32(static_cast<size_t>(row_tile * k_));
      for (int64_t tile = begin; tile < end; ++tile) {
        const int64_t o0 = tile * row_tile;
        const int64_t rows = std::min(od_, o0 + row_tile) - o0;
        // Convert this tile's f16 weights once; every token reuses the f32 copy.
        const uint16_t* src = weights_.data() + o0 * k_;
        for (int64_t i = 0; i < rows * k_; ++i) tile_f32[i] = quant::f16_to_f32(src[i]);
        for (int64_t t = 0; t < nt; ++t) {
          const float* xt = xr + t * k_;
          for (int64_t r = 0; r < rows; ++r) {
            y[t * od_ + o0 + r] = f32_dot(tile_f32.data() + r * k_, xt, k_);
          }
        }
      }
    });
  }

  int64_t od_, k_, max_nt_;
  int threads_;
  std::vector<uint16_t> weights_;  // [od][k] f16 bits
};

// ---------------------------------------------------------------------------------------------

class CpuBackend final : public GemmBackend {
 public:
  CpuBackend(GemmPath path, int threads) : path_(path), threads_(quant::resolve_thread_count(threads)) {}

  CallResult prepare(WeightType type, int64_t od, int64_t k, const void* weight_blocks,
                     int64_t max_nt, std::unique_ptr<PreparedGemm>* out) override {
    if (out == nullptr || weight_blocks == nullptr) {
      return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT, "prepare: null pointer argument");
    }
    if (!quant::is_valid_type_id(static_cast<int32_t>(type))) {
      return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT, "prepare: unknown weight type");
    }
    const int block_elems = quant::traits(type).block_elems;
    if (od < 1 || k < 1 || max_nt < 1 || k % block_elems != 0) {
      return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT,
                              "prepare: od, k and max_nt must be positive and k a multiple of " +
                                  std::to_string(block_elems));
    }
    out->reset();
    if (path_ == GemmPath::mmq) return prepare_mmq(type, od, k, weight_blocks, max_nt, out);
    return prepare_f16(type, od, k, weight_blocks, max_nt, out);
  }

 private:
  CallResult prepare_mmq(WeightType type, int64_t od, int64_t k, const void* weight_blocks,
                         int64_t max_nt, std::unique_ptr<PreparedGemm>* out) {
    const int64_t blocks = k / kQK;
    int64_t bytes = 0;
    if (od > INT64_MAX / blocks) {
      return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY, "prepare: od * k overflows");
    }
    if (CallResult r = check_resident_size(od * blocks, sizeof(MmqWeightBlock), &bytes); !r) return r;
    return guarded("mmq prepare", [&] {
      std::vector<MmqWeightBlock> unpacked(static_cast<size_t>(od * blocks));
      const size_t src_row_bytes = quant::row_bytes(type, k);
      quant::parallel_for(od, threads_, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          quant::unpack_row_mmq(type, static_cast<const uint8_t*>(weight_blocks) + o * src_row_bytes,
                                k, unpacked.data() + o * blocks);
        }
      });
      *out = std::make_unique<CpuMmqGemm>(type, od, k, max_nt, threads_, std::move(unpacked));
      return CallResult::ok();
    });
  }

  CallResult prepare_f16(WeightType type, int64_t od, int64_t k, const void* weight_blocks,
                         int64_t max_nt, std::unique_ptr<PreparedGemm>* out) {
    int64_t bytes = 0;
    if (od > INT64_MAX / k) {
      return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY, "prepare: od * k overflows");
    }
    if (CallResult r = check_resident_size(od * k, sizeof(uint16_t), &bytes); !r) return r;
    return guarded("f16 prepare", [&] {
      std::vector<uint16_t> weights(static_cast<size_t>(od * k));
      const size_t src_row_bytes = quant::row_bytes(type, k);
      quant::parallel_for(od, threads_, [&](int64_t begin, int64_t end) {
        std::vector<float> row(static_cast<size_t>(k));
        for (int64_t o = begin; o < end; ++o) {
          quant::dequantize_row(type, static_cast<const uint8_t*>(weight_blocks) + o * src_row_bytes,
                                row.data(), k);
          uint16_t* dst = weights.data() + o * k;
          for (int64_t i = 0; i < k; ++i) dst[i] = quant::f32_to_f16(row[i]);
        }
      });
      *out = std::make_unique<CpuF16Gemm>(od, k, max_nt, threads_, std::move(weights));
      return CallResult::ok();
    });
  }

  GemmPath path_;
  int threads_;
};

}  // namespace

std::unique_ptr<GemmBackend> make_cpu_backend(GemmPath path, int threads) {
  return std::make_unique<CpuBackend>(path, threads);
}

}  // namespace qgate::kernels

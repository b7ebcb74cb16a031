// The front door of the MaxK-GNN ops (maxk, maxk_backward, cbsr_spgemm, cbsr_sspmm): every
// argument is checked here, outputs are allocated, and the work goes to one backend.
//
// OpOptions.schedule.strategy picks the backend (one kernel per device):
//   auto     the data's device: gpu for CUDA tensors (the CBSR products: with the tuned
//            parameters from the tuning cache when it has the problem), cpu for host tensors
//   cpu_ref  float64-accumulating reference, each output summed in edge order (the test
//            oracle; independent rows in parallel, which changes no result)
//   cpu      OpenMP
//   gpu      CUDA kernels (maxk.cu, cbsr_spgemm.cu, cbsr_sspmm.cu)
// Only the CBSR products' `gpu` takes parameters, declared in the registry (OpKind::cbsr_spgemm
// and cbsr_sspmm in src/dispatch/registry.cpp: warps, segment, vec, private_rows, regs, flat,
// smem_buffer), which `spgnn tune --op cbsr_spgemm|cbsr_sspmm` searches.
#include <cstdint>
#include <string>

#include "dispatch/half.hpp"
#include "dispatch/registry.hpp"
#include "kernels/cpu/maxk_cpu.hpp"
#include "dispatch/problem.hpp"
#include "spgnn/ops.hpp"
#if SPGNN_WITH_CUDA
#include "kernels/cuda/maxk_kernels.hpp"
#endif

namespace spgnn {

namespace {

// u16 indices reach column 65535.
constexpr int64_t kMaxF = int64_t{1} << 16;

enum class Backend { cpu_ref, cpu, gpu };

// prod: the CBSR product's shape (nullptr for maxk and maxk_backward, which take no
// parameters). Its `gpu` parameters are checked against the registry's declaration, and `auto`
// on a GPU takes a tuned schedule from the tuning cache when there is one. `run` receives the
// schedule the backend runs (the caller's, or the tuned one).
Backend pick_backend(const OpOptions& options, Device data_device, const char* op,
                     const detail::CbsrProblem* prod = nullptr, Schedule* run = nullptr) {
  const Schedule& s = options.schedule;
  const std::string& name = s.strategy;
  Backend b;
  if (name == "auto") b = data_device.is_cuda() ? Backend::gpu : Backend::cpu;
  else if (name == "cpu_ref") b = Backend::cpu_ref;
  else if (name == "cpu") b = Backend::cpu;
  else if (name == "gpu") b = Backend::gpu;
  else
    throw InvalidArgument(std::string(op) + ": unknown strategy '" + name +
                          "' in options.schedule; expected auto, cpu_ref, cpu or gpu");
  if (!prod) {
    for (const auto& [key, value] : s.params)
      throw InvalidArgument(std::string(op) + ": strategy '" + name + "' has no parameter '" +
                            key + "' (" + op + " takes none; the CBSR products' 'gpu' does)");
  } else if (name != "auto") {
    try {
      if (name == "gpu" && !SPGNN_WITH_CUDA)  // not registered: check against the declaration
        detail::check_params(StrategyInfo{"gpu", prod->op, DeviceType::cuda, "",
                                          detail::cbsr_gpu_params(prod->op)},
                             s);
      else
        check_schedule(prod->op, s);
    } catch (const InvalidArgument& ex) {
      throw InvalidArgument(std::string(op) + ": " + ex.what());
    }
  }
  if (b == Backend::gpu) {
    SPGNN_CHECK(SPGNN_WITH_CUDA, Unsupported, op,
                ": strategy 'gpu' needs a build with CUDA (this one has none)");
    SPGNN_CHECK(data_device.is_cuda(), Unsupported, op, ": strategy 'gpu' needs the data on a "
                "CUDA device, but it is on ", data_device.str(),
                name == "auto" ? "" : " (use auto or cpu)");
  } else {
    SPGNN_CHECK(!data_device.is_cuda(), Unsupported, op, ": strategy '", name,
                "' runs on the CPU, but the data is on ", data_device.str(),
                " (use auto or gpu)");
  }
  if (run) *run = s;
  if (prod && name == "auto") {
    // A tuned schedule names the data's device's kernel (the cache key holds the device), or
    // cpu_ref; an entry that does not validate was skipped by the lookup.
    const Schedule tuned = detail::auto_cbsr_schedule(*prod);
    if (run) *run = tuned;
    if (tuned.strategy == "cpu_ref") b = Backend::cpu_ref;
  }
  return b;
}

#if SPGNN_WITH_CUDA
detail::CbsrParams cbsr_params(const Schedule& s) {
  detail::CbsrParams p;
  if (auto it = s.params.find("warps"); it != s.params.end()) p.warps = it->second;
  if (auto it = s.params.find("segment"); it != s.params.end()) p.segment = it->second;
  if (auto it = s.params.find("smem_buffer"); it != s.params.end()) p.smem_buffer = it->second != 0;
  if (auto it = s.params.find("vec"); it != s.params.end()) p.vec = it->second;
  if (auto it = s.params.find("private_rows"); it != s.params.end()) p.private_rows = it->second;
  if (auto it = s.params.find("regs"); it != s.params.end()) p.regs = it->second;
  if (auto it = s.params.find("flat"); it != s.params.end()) p.flat = it->second;
  if (auto it = s.params.find("stream_edges"); it != s.params.end()) p.stream_edges = it->second;
  return p;
}
#endif

DType index_dtype_for(int64_t F) { return F <= 256 ? DType::u8 : DType::u16; }

void check_f32_matrix(const Tensor& t, const char* arg, const char* op, int64_t rows,
                      const char* rows_name, int64_t cols, const char* cols_name, Device dev) {
  SPGNN_CHECK(t.defined(), InvalidArgument, op, ": argument '", arg, "' is required");
  SPGNN_CHECK(t.dtype() == DType::f32, InvalidArgument, op, ": '", arg,
              "' must be float32, got ", dtype_name(t.dtype()));
  SPGNN_CHECK(t.device() == dev, InvalidArgument, op, ": '", arg, "' is on ", t.device().str(),
              ", expected ", dev.str());
  SPGNN_CHECK(t.ndim() == 2 && t.dim(0) == rows && t.dim(1) == cols, InvalidArgument, op, ": '",
              arg, "' must have shape [", rows_name, " = ", rows, ", ", cols_name, " = ", cols,
              "], got ", t.shape_str());
}

void prepare_output(Tensor& out, const char* arg, const char* op, int64_t rows, int64_t cols,
                    Device dev) {
  if (!out.defined()) {
    out = Tensor::empty({rows, cols}, DType::f32, dev);
    return;
  }
  SPGNN_CHECK(out.dtype() == DType::f32, InvalidArgument, op, ": output '", arg,
              "' must be float32, got ", dtype_name(out.dtype()));
  SPGNN_CHECK(out.device() == dev, InvalidArgument, op, ": output '", arg, "' is on ",
              out.device().str(), ", expected ", dev.str());
  SPGNN_CHECK(out.ndim() == 2 && out.dim(0) == rows && out.dim(1) == cols, InvalidArgument, op,
              ": output '", arg, "' has shape ", out.shape_str(), ", expected [", rows, ", ", cols,
              "]");
}

template <class IdxT>
void check_index_values_t(const Tensor& index, int64_t F, const char* arg, const char* op) {
  const IdxT* p = index.data<IdxT>();
  for (int64_t i = 0; i < index.numel(); ++i)
    SPGNN_CHECK(int64_t(p[i]) < F, InvalidArgument, op, ": '", arg, "' entry ", i, " (row ",
                i / index.dim(1), ") is column ", int64_t(p[i]), ", outside [0, F = ", F, ")");
}

// A CBSR operand: F and k in range, data/index of shape [rows, k], index dtype fixed by F. On the
// host the column entries are checked too (< F); a device check would cost a round trip, so the
// GPU kernels instead skip entries >= F (they never touch memory outside the row).
void check_cbsr(const Cbsr& x, const char* arg, const char* op, int64_t rows,
                const char* rows_name, Device dev) {
  SPGNN_CHECK(x.F >= 1 && x.F <= kMaxF, InvalidArgument, op, ": '", arg, ".F' must be in [1, ",
              kMaxF, "], got ", x.F);
  SPGNN_CHECK(x.k >= 1 && x.k <= x.F, InvalidArgument, op, ": '", arg, ".k' must be in [1, F = ",
              x.F, "], got ", x.k);
  const std::string data_name = std::string(arg) + ".data";
  check_f32_matrix(x.data, data_name.c_str(), op, rows, rows_name, x.k, "k", dev);
  const std::string index_name = std::string(arg) + ".index";
  const DType want = index_dtype_for(x.F);
  SPGNN_CHECK(x.index.defined(), InvalidArgument, op, ": argument '", index_name, "' is required");
  SPGNN_CHECK(x.index.dtype() == want, InvalidArgument, op, ": '", index_name, "' must be ",
              dtype_name(want), " for F = ", x.F, " (u8 when F <= 256, else u16), got ",
              dtype_name(x.index.dtype()));
  SPGNN_CHECK(x.index.device() == dev, InvalidArgument, op, ": '", index_name, "' is on ",
              x.index.device().str(), ", expected ", dev.str());
  SPGNN_CHECK(x.index.ndim() == 2 && x.index.dim(0) == rows && x.index.dim(1) == x.k,
              InvalidArgument, op, ": '", index_name, "' must have shape [", rows_name, " = ",
              rows, ", k = ", x.k, "], got ", x.index.shape_str());
  if (!dev.is_cuda()) {
    if (want == DType::u8) check_index_values_t<uint8_t>(x.index, x.F, index_name.c_str(), op);
    else check_index_values_t<uint16_t>(x.index, x.F, index_name.c_str(), op);
  }
}

// Edge weights: `e` ([nnz] or [nnz, 1]), else the graph's values, else none (1 per edge).
const float* edge_weights(const Graph& g, const Tensor& e, const char* op) {
  const Tensor* w = e.defined() ? &e : g.has_values() ? &g.val : nullptr;
  if (!w) return nullptr;
  const char* arg = e.defined() ? "e" : "graph values";
  SPGNN_CHECK(w->dtype() == DType::f32, InvalidArgument, op, ": '", arg,
              "' must be float32, got ", dtype_name(w->dtype()));
  SPGNN_CHECK(w->device() == g.device(), InvalidArgument, op, ": '", arg, "' is on ",
              w->device().str(), " but the graph is on ", g.device().str());
  SPGNN_CHECK((w->ndim() == 1 && w->dim(0) == g.nnz()) ||
                  (w->ndim() == 2 && w->dim(0) == g.nnz() && w->dim(1) == 1),
              InvalidArgument, op, ": '", arg, "' must have shape [nnz] or [nnz, 1] with nnz = ",
              g.nnz(), ", got ", w->shape_str());
  return w->data<float>();
}

// A CBSR operand with its values in float32 (the same index).
Cbsr as_f32(const Cbsr& x, void* stream) {
  return Cbsr{detail::as_f32(x.data, stream), x.index, x.F, x.k};
}

}  // namespace

void maxk(const Tensor& x, int64_t k, Cbsr& out, const OpOptions& options) {
  constexpr const char* kOp = "maxk";
  SPGNN_CHECK(x.defined(), InvalidArgument, kOp, ": argument 'x' is required");
  // Half input: the selection on the exact float32 values (same order, same ties), the kept
  // values stored back in the input's dtype (exact: they are the input's own values).
  if (const DType h = detail::half_operands(kOp, {{&x, "x"}}); is_half(h)) {
    Cbsr r;
    if (x.ndim() == 2 && (out.data.defined() || out.index.defined())) {
      r.data = Tensor::empty({x.dim(0), k}, DType::f32, x.device());
      r.index = out.index;  // checked, and written in place, by the float32 call
    }
    maxk(detail::as_f32(x, options.stream), k, r, options);
    detail::store_half(r.data, out.data, h, kOp, "out.data", options.stream);
    out.index = r.index;
    out.F = r.F;
    out.k = r.k;
    return;
  }
  SPGNN_CHECK(x.dtype() == DType::f32, InvalidArgument, kOp, ": 'x' must be float32, got ",
              dtype_name(x.dtype()));
  SPGNN_CHECK(x.ndim() == 2, InvalidArgument, kOp, ": 'x' must be 2-D [n, F], got shape ",
              x.shape_str());
  const int64_t n = x.dim(0), F = x.dim(1);
  SPGNN_CHECK(F >= 1 && F <= kMaxF, InvalidArgument, kOp, ": 'x' width F must be in [1, ", kMaxF,
              "] (CBSR indices are u8/u16), got ", F);
  SPGNN_CHECK(k >= 1 && k <= F, InvalidArgument, kOp, ": 'k' must be in [1, F = ", F, "], got ",
              k);
  const Backend b = pick_backend(options, x.device(), kOp);
  const DType idx = index_dtype_for(F);
  if (!out.data.defined() && !out.index.defined()) {
    out.data = Tensor::empty({n, k}, DType::f32, x.device());
    out.index = Tensor::empty({n, k}, idx, x.device());
  } else {
    check_f32_matrix(out.data, "out.data", kOp, n, "n (rows of x)", k, "k", x.device());
    SPGNN_CHECK(out.index.defined() && out.index.dtype() == idx &&
                    out.index.device() == x.device() && out.index.ndim() == 2 &&
                    out.index.dim(0) == n && out.index.dim(1) == k,
                InvalidArgument, kOp, ": output 'out.index' must be ", dtype_name(idx), " [", n,
                ", ", k, "] on ", x.device().str(), ", got ",
                out.index.defined() ? dtype_name(out.index.dtype()) + std::string(" ") +
                                          out.index.shape_str() + " on " +
                                          out.index.device().str()
                                    : std::string("undefined"));
  }
  out.F = F;
  out.k = k;
  if (n == 0) return;
  if (b == Backend::gpu) {
#if SPGNN_WITH_CUDA
    detail::cuda_maxk(x, k, out.data, out.index, options.stream);
#endif
  } else {
    detail::cpu_maxk(x, k, out.data, out.index, b == Backend::cpu_ref);
  }
}

Cbsr maxk(const Tensor& x, int64_t k, const OpOptions& options) {
  Cbsr out;
  maxk(x, k, out, options);
  return out;
}

void maxk_backward(const Cbsr& kept, const Tensor& d_data, Tensor& dx, const OpOptions& options) {
  constexpr const char* kOp = "maxk_backward";
  SPGNN_CHECK(kept.data.defined() || kept.index.defined(), InvalidArgument, kOp,
              ": argument 'kept' is empty (pass the Cbsr that maxk returned)");
  SPGNN_CHECK(d_data.defined(), InvalidArgument, kOp, ": argument 'd_data' is required");
  if (const DType h = detail::half_operands(kOp, {{&kept.data, "kept.data"}, {&d_data, "d_data"}});
      is_half(h)) {
    Tensor r;
    maxk_backward(as_f32(kept, options.stream), detail::as_f32(d_data, options.stream), r, options);
    return detail::store_half(r, dx, h, kOp, "dx", options.stream);
  }
  const Device dev = d_data.device();
  const int64_t n = d_data.ndim() == 2 ? d_data.dim(0) : -1;
  SPGNN_CHECK(n >= 0, InvalidArgument, kOp, ": 'd_data' must be 2-D [n, k], got shape ",
              d_data.shape_str());
  check_cbsr(kept, "kept", kOp, n, "n (rows of d_data)", dev);
  check_f32_matrix(d_data, "d_data", kOp, n, "n", kept.k, "kept.k", dev);
  const Backend b = pick_backend(options, dev, kOp);
  prepare_output(dx, "dx", kOp, n, kept.F, dev);
  if (n == 0) return;
  if (b == Backend::gpu) {
#if SPGNN_WITH_CUDA
    detail::cuda_maxk_backward(d_data, kept.index, kept.F, dx, options.stream);
#endif
  } else {
    detail::cpu_maxk_backward(d_data, kept.index, kept.F, dx);
  }
}

Tensor maxk_backward(const Cbsr& kept, const Tensor& d_data, const OpOptions& options) {
  Tensor dx;
  maxk_backward(kept, d_data, dx, options);
  return dx;
}

void cbsr_spgemm(const Graph& g, const Cbsr& x, const Tensor& e, Tensor& out,
                 const OpOptions& options) {
  constexpr const char* kOp = "cbsr_spgemm";
  if (const DType h = detail::half_operands(kOp, {{&x.data, "x.data"}, {&e, "e"}}); is_half(h)) {
    Tensor r;
    cbsr_spgemm(g, as_f32(x, options.stream), detail::as_f32(e, options.stream), r, options);
    return detail::store_half(r, out, h, kOp, "out", options.stream);
  }
  detail::check_graph_arrays(g, kOp);
  check_cbsr(x, "x", kOp, g.n_cols, "n_cols", g.device());
  const float* w = edge_weights(g, e, kOp);
  prepare_output(out, "out", kOp, g.n_rows, x.F, g.device());
  const detail::CbsrProblem prod{&g, OpKind::cbsr_spgemm, x.k, x.F, w != nullptr};
  Schedule run;
  const Backend b = pick_backend(options, g.device(), kOp, &prod, &run);
  if (g.n_rows == 0) return;
  if (b == Backend::gpu) {
#if SPGNN_WITH_CUDA
    detail::cuda_cbsr_spgemm(g, w, x, out, cbsr_params(run), options.stream);
#endif
  } else {
    detail::cpu_cbsr_spgemm(g, w, x, out, b == Backend::cpu_ref);
  }
}

void cbsr_sspmm(const Graph& g, const Tensor& e, const Tensor& d_out, const Cbsr& x,
                Tensor& d_data, const OpOptions& options) {
  constexpr const char* kOp = "cbsr_sspmm";
  if (const DType h = detail::half_operands(
          kOp, {{&e, "e"}, {&d_out, "d_out"}, {&x.data, "x.data"}});
      is_half(h)) {
    Tensor r;
    cbsr_sspmm(g, detail::as_f32(e, options.stream), detail::as_f32(d_out, options.stream),
               as_f32(x, options.stream), r, options);
    return detail::store_half(r, d_data, h, kOp, "d_data", options.stream);
  }
  detail::check_graph_arrays(g, kOp);
  check_cbsr(x, "x", kOp, g.n_cols, "n_cols", g.device());
  check_f32_matrix(d_out, "d_out", kOp, g.n_rows, "n_rows", x.F, "x.F", g.device());
  const float* w = edge_weights(g, e, kOp);
  prepare_output(d_data, "d_data", kOp, g.n_cols, x.k, g.device());
  const detail::CbsrProblem prod{&g, OpKind::cbsr_sspmm, x.k, x.F, w != nullptr};
  Schedule run;
  const Backend b = pick_backend(options, g.device(), kOp, &prod, &run);
  if (g.n_cols == 0) return;
  if (b == Backend::gpu) {
#if SPGNN_WITH_CUDA
    detail::cuda_cbsr_sspmm(g, w, d_out, x, d_data, cbsr_params(run), options.stream);
#endif
  } else {
    detail::cpu_cbsr_sspmm(g, w, d_out, x, d_data, b == Backend::cpu_ref);
  }
}

}  // namespace spgnn

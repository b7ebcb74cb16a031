// spgnn bench maxk: for each graph, width F and k, times (median of CUDA-event timings after
// warm-up, on the GPU; steady clock on the CPU)
//   maxk         top-k of a random [n, F] matrix into CBSR,
//   cbsr_spgemm  out = A * X_cbsr (forward),
//   cbsr_sspmm   d_data = (A^T * d_out) sampled at X's pattern (backward),
// and cuSPARSE SpMM (u_mul_e / sum, best of its algorithms) on the dense [n, F] matrix, in the
// same process. Every result is first checked against cpu_ref (float64) on sampled rows (maxk
// and SpGEMM: sampled output rows; SSpMM: sampled source vertices with all their in-edges).
// Prints ms, the speedups of SpGEMM and SSpMM over SpMM, and maxk's share of the SpGEMM time.
#include "spgnn/cmd_bench_maxk.hpp"
#include "spgnn/bench_util.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/timing.hpp"
#include "spgnn/common.hpp"
#if SPGNN_WITH_CUDA
#include "kernels/cuda/maxk_kernels.hpp"
#endif
#include "spgnn/ops.hpp"

namespace spgnn::cli {

namespace {


OpOptions with_strategy(const std::string& s, std::map<std::string, int64_t> params = {}) {
  OpOptions o;
  o.schedule.strategy = s;
  o.schedule.params = std::move(params);
  return o;
}

std::vector<int64_t> sample_ids(int64_t n, int64_t max_count, uint64_t seed, int64_t always) {
  std::vector<int64_t> ids;
  if (n <= max_count) {
    for (int64_t i = 0; i < n; ++i) ids.push_back(i);
    return ids;
  }
  ids.push_back(always);
  std::mt19937_64 rng(seed);
  while (int64_t(ids.size()) < max_count) ids.push_back(int64_t(rng() % uint64_t(n)));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}


// The reference problems on samples of the graph, built once per graph:
//   rows: the sampled rows with all their edges (SpGEMM's output rows),
//   cols: every edge whose source is a sampled vertex, sources renumbered (SSpMM's d_data rows).
struct Samples {
  std::vector<int64_t> rows, cols;
  Graph row_graph, col_graph;  // weights as values
};

template <class I>
Samples make_samples(const Graph& g, const float* w, int64_t max_rows, uint64_t seed) {
  Samples s;
  const I* rp = g.rowptr.data<I>();
  const I* col = g.col.data<I>();
  int64_t big = 0;
  for (int64_t i = 0; i < g.n_rows; ++i)
    if (rp[i + 1] - rp[i] > rp[big + 1] - rp[big]) big = i;
  s.rows = sample_ids(g.n_rows, max_rows, seed, big);
  s.cols = sample_ids(g.n_cols, max_rows, seed + 1, 0);
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  keep.index_width = IndexWidth::i64;
  std::vector<int64_t> r, c;
  std::vector<float> v;
  for (size_t k = 0; k < s.rows.size(); ++k)
    for (I e = rp[s.rows[k]]; e < rp[s.rows[k] + 1]; ++e) {
      r.push_back(int64_t(k));
      c.push_back(col[e]);
      v.push_back(w[e]);
    }
  s.row_graph = graph_from_edges(int64_t(s.rows.size()), g.n_cols, r, c, v, keep);
  std::vector<int64_t> slot(size_t(g.n_cols), -1);
  for (size_t k = 0; k < s.cols.size(); ++k) slot[size_t(s.cols[k])] = int64_t(k);
  r.clear();
  c.clear();
  v.clear();
  for (int64_t row = 0; row < g.n_rows; ++row)
    for (I e = rp[row]; e < rp[row + 1]; ++e)
      if (slot[size_t(col[e])] >= 0) {
        r.push_back(row);
        c.push_back(slot[size_t(col[e])]);
        v.push_back(w[e]);
      }
  s.col_graph = graph_from_edges(g.n_rows, int64_t(s.cols.size()), r, c, v, keep);
  return s;
}


bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

struct MaxkRow {
  std::string graph;
  int64_t n = 0, nnz = 0, F = 0, k = 0;
  double maxk_ms = NAN, spgemm_ms = NAN, sspmm_ms = NAN, spmm_ms = NAN;
  double spgemm_err = NAN, sspmm_err = NAN, spmm_err = NAN;
  bool maxk_ok = true;
  std::string spmm_strategy;
  bool failed() const {
    auto bad = [](double e) { return std::isfinite(e) ? e >= 1e-4 : !std::isnan(e); };
    return !maxk_ok || bad(spgemm_err) || bad(sspmm_err) || bad(spmm_err);
  }
};

}  // namespace

void run_bench_maxk(const MaxkBenchArgs& o) {
  const Device dev = bench_device(o.device);
  check_bench_names(o.graphs, o.names);
  SPGNN_CHECK(!o.ks.empty(), InvalidArgument, "--k: give at least one k");
  for (int64_t k : o.ks) SPGNN_CHECK(k >= 1, InvalidArgument, "--k: every k must be >= 1, got ", k);
  // A (k, F) pair with k > F is skipped (MaxK keeps at most F values a row); a k above every
  // width would print an empty table and succeed.
  const int64_t widest = o.dims.empty() ? 0 : *std::max_element(o.dims.begin(), o.dims.end());
  for (int64_t k : o.ks)
    SPGNN_CHECK(k <= widest, InvalidArgument, "--k ", k, " exceeds every --dim (the widest is ",
                widest, "): MaxK keeps at most F values a row");
  const OpOptions ref_opt = with_strategy("cpu_ref");
  // The CBSR products run `auto` (their device's kernel), or `gpu` with the --param values; the
  // ops check the names and ranges before any timing.
  OpOptions prod_opt;
  if (!o.params.empty()) {
    std::string text = "gpu";
    for (size_t i = 0; i < o.params.size(); ++i) text += (i ? "," : ":") + o.params[i];
    prod_opt.schedule = parse_schedule(text);
  }
  std::vector<MaxkRow> rows;
  for (size_t gi = 0; gi < o.graphs.size(); ++gi) {
    const std::string gname = o.names.empty() ? o.graphs[gi] : o.names[gi];
    Graph host = load_with_flags(o.graphs[gi], o.flags);
    // The layer's normalised adjacency has values; a pattern-only graph gets random weights.
    if (!host.has_values()) host.val = random_values({host.nnz()}, o.seed + 7, 0.5f, 1.5f);
    const Graph g = dev.is_cuda() ? host.to(dev) : host;
    Samples smp;
    if (!o.no_check)
      smp = host.index_dtype() == DType::i32
                ? make_samples<int32_t>(host, host.val.data<float>(), o.check_rows, o.seed)
                : make_samples<int64_t>(host, host.val.data<float>(), o.check_rows, o.seed);
    for (int64_t F : o.dims) {
      const Tensor x_h = o.input == "normal"
                             ? random_normal({host.n_cols, F}, o.seed + 1)
                             : random_values({host.n_cols, F}, o.seed + 1, -1.f, 1.f);
      const Tensor d_out_h = random_values({host.n_rows, F}, o.seed + 2, -1.f, 1.f);
      const Tensor x = dev.is_cuda() ? x_h.to(dev) : x_h;
      const Tensor d_out = dev.is_cuda() ? d_out_h.to(dev) : d_out_h;

      // Baseline: SpMM on the dense matrix (cuSPARSE, best algorithm; CPU: auto).
      double spmm_ms = NAN, spmm_err = NAN;
      std::string spmm_name;
      {
        Tensor ref;
        if (!o.no_check)
          gspmm(smp.row_graph, SpmmOp::u_mul_e, Reduce::sum, x_h, Tensor(), ref, ref_opt);
        std::vector<Schedule> cands;
        if (dev.is_cuda()) {
          for (const auto& p : find_strategy(OpKind::spmm, "cusparse").params)
            if (p.name == "alg")
              for (int64_t a : p.values) cands.push_back(Schedule{"cusparse", {{"alg", a}}});
        } else {
          cands.push_back(Schedule{});
        }
        for (const Schedule& s : cands) {
          OpOptions opt;
          opt.schedule = s;
          Tensor out = Tensor::empty({host.n_rows, F}, DType::f32, dev);
          auto call = [&] { gspmm(g, SpmmOp::u_mul_e, Reduce::sum, x, Tensor(), out, opt); };
          try {
            out.fill_(NAN);
            call();
            detail::synchronize(dev);
            double err = NAN;
            if (!o.no_check) err = rel_err(gather_rows(out.to(Device::cpu()), smp.rows), ref);
            const double ms = detail::time_runs(call, dev, o.warmup, o.reps).median;
            if (std::isnan(spmm_ms) || ms < spmm_ms) {
              spmm_ms = ms;
              spmm_err = err;
              spmm_name = s.str();
            }
          } catch (const Unsupported&) {
          }
        }
      }

      for (int64_t k : o.ks) {
        if (k > F) continue;
        MaxkRow r;
        r.graph = gname;
        r.n = host.n_rows;
        r.nnz = host.nnz();
        r.F = F;
        r.k = k;
        r.spmm_ms = spmm_ms;
        r.spmm_err = spmm_err;
        r.spmm_strategy = spmm_name;

        // maxk: exact on sampled rows.
        Cbsr xs = maxk(x, k);
        detail::synchronize(dev);
        const Cbsr xs_h{xs.data.to(Device::cpu()), xs.index.to(Device::cpu()), F, k};
        if (!o.no_check) {
          const Cbsr ref = maxk(gather_rows(x_h, smp.rows), k, ref_opt);
          r.maxk_ok = same_bytes(gather_rows(xs_h.data, smp.rows), ref.data) &&
                      same_bytes(gather_rows(xs_h.index, smp.rows), ref.index);
        }
        // The kernel alone, into the CBSR tensors already allocated (each maxk() call would
        // add two device allocations, which are not the kernel's cost).
        auto run_maxk = [&] {
#if SPGNN_WITH_CUDA
          if (dev.is_cuda()) return detail::cuda_maxk(x, k, xs.data, xs.index, nullptr);
#endif
          xs = maxk(x, k);
        };
        r.maxk_ms = detail::time_runs(run_maxk, dev, o.warmup, o.reps).median;

        // SpGEMM forward.
        Tensor out = Tensor::empty({host.n_rows, F}, DType::f32, dev);
        out.fill_(NAN);
        cbsr_spgemm(g, xs, Tensor(), out, prod_opt);
        detail::synchronize(dev);
        if (!o.no_check) {
          Tensor ref;
          cbsr_spgemm(smp.row_graph, xs_h, Tensor(), ref, ref_opt);
          r.spgemm_err = rel_err(gather_rows(out.to(Device::cpu()), smp.rows), ref);
        }
        r.spgemm_ms = detail::time_runs([&] { cbsr_spgemm(g, xs, Tensor(), out, prod_opt); },
                                        dev, o.warmup, o.reps).median;

        // SSpMM backward.
        Tensor dd = Tensor::empty({host.n_cols, k}, DType::f32, dev);
        dd.fill_(NAN);
        cbsr_sspmm(g, Tensor(), d_out, xs, dd, prod_opt);
        detail::synchronize(dev);
        if (!o.no_check) {
          const Cbsr sub{gather_rows(xs_h.data, smp.cols), gather_rows(xs_h.index, smp.cols), F, k};
          Tensor ref;
          cbsr_sspmm(smp.col_graph, Tensor(), d_out_h, sub, ref, ref_opt);
          r.sspmm_err = rel_err(gather_rows(dd.to(Device::cpu()), smp.cols), ref);
        }
        r.sspmm_ms =
            detail::time_runs([&] { cbsr_sspmm(g, Tensor(), d_out, xs, dd, prod_opt); }, dev,
                              o.warmup, o.reps).median;
        rows.push_back(r);
        if (o.format == "table")
          std::cerr << "  " << gname << " F=" << F << " k=" << k << " done\n";
      }
    }
  }

  bool any_failed = false;
  for (const auto& r : rows) any_failed = any_failed || r.failed();
  const std::string base = dev.is_cuda() ? "cusparse" : "spmm";
  if (o.format == "json") {
    auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows)
      j.push_back({{"kernel", "maxk"}, {"device", dev.str()}, {"graph", r.graph},
                   {"input", o.input}, {"n", r.n},
                   {"nnz", r.nnz}, {"F", r.F}, {"k", r.k}, {"maxk_ms", num(r.maxk_ms)},
                   {"spgemm_ms", num(r.spgemm_ms)}, {"sspmm_ms", num(r.sspmm_ms)},
                   {"spmm_ms", num(r.spmm_ms)}, {"spmm_strategy", r.spmm_strategy},
                   {"spgemm_speedup", num(r.spmm_ms / r.spgemm_ms)},
                   {"sspmm_speedup", num(r.spmm_ms / r.sspmm_ms)},
                   {"maxk_share_of_spgemm", num(r.maxk_ms / r.spgemm_ms)},
                   {"maxk_exact", r.maxk_ok}, {"spgemm_rel_err", num(r.spgemm_err)},
                   {"sspmm_rel_err", num(r.sspmm_err)}, {"spmm_rel_err", num(r.spmm_err)},
                   {"failed", r.failed()}});
    std::cout << j.dump(2) << "\n";
  } else {
    Table t({"graph", "F", "k", "maxk ms", "spgemm ms", "sspmm ms", base + " ms",
             "spgemm vs " + base, "sspmm vs " + base, "maxk/spgemm", "check"});
    for (const auto& r : rows) {
      auto ms = [](double v) { return std::isfinite(v) ? fixed(v, 4) : std::string("-"); };
      auto x = [](double v) { return std::isfinite(v) ? fixed(v, 2) + "x" : std::string("-"); };
      std::string check = "ok";
      if (!r.maxk_ok) check = "MAXK WRONG";
      else if (r.failed())
        check = "WRONG (err spgemm " + fixed(r.spgemm_err, 7) + ", sspmm " +
                fixed(r.sspmm_err, 7) + ", spmm " + fixed(r.spmm_err, 7) + ")";
      else if (std::isnan(r.spgemm_err)) check = "skipped";
      t.add({r.graph, std::to_string(r.F), std::to_string(r.k), ms(r.maxk_ms), ms(r.spgemm_ms),
             ms(r.sspmm_ms), ms(r.spmm_ms), x(r.spmm_ms / r.spgemm_ms), x(r.spmm_ms / r.sspmm_ms),
             std::isfinite(r.maxk_ms / r.spgemm_ms) ? fixed(100.0 * r.maxk_ms / r.spgemm_ms, 1) + "%"
                                                    : "-",
             check});
    }
    if (o.format == "csv") {
      std::cout << t.csv();
    } else {
      std::cout << "maxk / cbsr_spgemm / cbsr_sspmm vs " << base << " SpMM (u_mul_e, sum"
                << (dev.is_cuda() ? ", best algorithm" : "") << ") on " << dev.str()
                << "; median of " << o.reps << " runs after " << o.warmup
                << " warm-up; checked against cpu_ref on sampled rows"
                << (o.no_check ? " [check skipped]" : "") << "\n"
                << t.str();
    }
  }
  SPGNN_CHECK(!any_failed, Error, "bench maxk: at least one kernel produced a wrong result");
}

}  // namespace spgnn::cli

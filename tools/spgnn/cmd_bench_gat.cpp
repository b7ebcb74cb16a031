// spgnn bench gat: per graph, F and H, times gat_aggregate with the fused kernel (gat_fused) and
// with the unfused composition of spgnn's own ops (gsddmm -> LeakyReLU -> edge_softmax -> gspmm),
// and the fused backward pass in its two variants (gather over the cached transpose; atomics).
// On the CPU: cpu (OpenMP) and unfused. Every forward result is first compared with cpu_ref
// (float64) on sampled rows (out and attention weights); the backward's grad_er is compared on
// the same rows, and the two backward variants' grad_feat / grad_el with each other.
// --dtype f16/bf16: every tensor of the op in that dtype (the fused kernels' half path; the
// unfused composition and the atomic backward convert to float32), checked against the
// reference on the same, exactly converted values within the dtype's rounding; "vs f32" is the
// float32 row's time of the same variant over this row's.
// --attn-dropout p: the weights are dropped out as in training (the mask a hash of the edge; the
// reference draws the whole graph's masks on its sampled rows, so the check stays exact).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/timing.hpp"
#include "kernels/attention_problem.hpp"
#include "kernels/cuda/attention_kernels.hpp"  // gat_bwd_prefers_atomic (plain C++)
#include "spgnn/bench_util.hpp"
#include "spgnn/cmd_bench_gat.hpp"
#include "spgnn/common.hpp"
#include "spgnn/ops.hpp"

namespace spgnn::cli {

namespace {

struct GatRow {
  std::string graph, variant, note, dtype = "f32";
  int64_t n = 0, nnz = 0, H = 0, F = 0;
  double ms = NAN, gbs = NAN, speedup = NAN, err = NAN, vs_f32 = NAN;
  bool failed = false;
};

// Bytes the fused forward must move at least: indices, el per edge-head, er and the output per
// row, one gathered feature row per edge and the attention weights written once.
double forward_bytes(const Graph& g, int64_t H, int64_t F, double elem) {
  const double idx = double(dtype_size(g.index_dtype()));
  const double nnz = double(g.nnz()), n = double(g.n_rows), W = double(H * F);
  return nnz * (idx + elem * (2 * H + W)) + n * (idx + elem * (H + W));
}

}  // namespace

void run_bench_gat(const GatBenchArgs& o) {
  const Device dev = bench_device(o.device);
  check_bench_names(o.graphs, o.names);
  for (int64_t H : o.heads)
    SPGNN_CHECK(H >= 1 && H <= 1024, InvalidArgument, "--heads: each value must be in 1..1024, got ", H);
  const std::string fused = dev.is_cuda() ? "gat_fused" : "cpu";
  // --param values go to the fused strategy (forward and both backward variants); the op checks
  // names and values before any timing.
  Schedule fused_s;
  if (!o.params.empty()) {
    std::string text = fused;
    for (size_t i = 0; i < o.params.size(); ++i) text += (i ? "," : ":") + o.params[i];
    fused_s = parse_schedule(text);
  }
  fused_s.strategy = fused;
  std::vector<GatRow> rows;
  bool any_failed = false;
  for (size_t gi = 0; gi < o.graphs.size(); ++gi) {
    const std::string gname = o.names.empty() ? o.graphs[gi] : o.names[gi];
    Graph host = load_with_flags(o.graphs[gi], o.flags);
    host.val = Tensor();
    const Graph g = dev.is_cuda() ? host.to(dev) : host;
    const RowSample sample = o.no_check ? RowSample{} : sample_rows(host, o.check_rows, o.seed);
    for (int64_t H : o.heads)
      for (int64_t F : o.dims)
      for (const std::string& dtype_text : o.dtypes) {
        const DType vt = feature_dtype(dtype_text);
        // The values in the benchmark's dtype; the reference gets their exact float32 values.
        auto values = [&](std::vector<int64_t> shape, uint64_t seed, float lo, float hi) {
          const Tensor t = random_values(std::move(shape), seed, lo, hi);
          return is_half(vt) ? t.astype(vt).astype(DType::f32) : t;
        };
        const Tensor feat_h = values({host.n_cols, H * F}, o.seed + 1, -1.f, 1.f);
        const Tensor el_h = values({host.n_cols, H}, o.seed + 2, -2.f, 2.f);
        const Tensor er_h = values({host.n_rows, H}, o.seed + 3, -2.f, 2.f);
        const Tensor gout_h = values({host.n_rows, H * F}, o.seed + 4, -1.f, 1.f);
        auto on_dev = [&](const Tensor& t) {
          const Tensor c = is_half(vt) ? t.astype(vt) : t;
          return dev.is_cuda() ? c.to(dev) : c;
        };
        const Tensor feat = on_dev(feat_h), el = on_dev(el_h), er = on_dev(er_h), gout = on_dev(gout_h);
        // float32: 1e-4; halves: the rounding of each result (twice for the backward's inputs,
        // which include the rounded attention weights).
        const double tol = vt == DType::f16 ? 2.0 / 2048 : vt == DType::bf16 ? 2.0 / 256 : 1e-4;
        auto host_f32 = [&](const Tensor& t) {
          return is_half(vt) ? t.to(Device::cpu()).astype(DType::f32) : t;
        };
        GatParams prm;
        prm.heads = H;
        prm.attn_dropout = static_cast<float>(o.attn_dropout);
        prm.dropout_seed = o.seed + 5;
        Tensor out_ref, attn_ref, gf_r, gel_r, ger_ref;
        if (!o.no_check) {
          // The sample's edge k is the graph's edge sample.edges[k], whose dropout mask it draws.
          const Tensor er_s = gather_rows(er_h, sample.rows);
          const Tensor gout_s = gather_rows(gout_h, sample.rows);
          detail::gat_reference_with_edge_ids(sample.graph, Tensor::from_vector(sample.edges),
                                              feat_h, el_h, er_s, gout_s, prm, out_ref, attn_ref,
                                              gf_r, gel_r, ger_ref);
        }
        const double bytes = forward_bytes(host, H, F, double(dtype_size(vt)));
        auto base = [&](const std::string& variant) {
          GatRow r;
          r.graph = gname;
          r.dtype = dtype_text;
          r.variant = variant;
          r.n = host.n_rows;
          r.nnz = host.nnz();
          r.H = H;
          r.F = F;
          return r;
        };
        // ---- forward: fused and unfused ----
        // One forward row: a first call checked against the reference, then the timed runs.
        auto forward_row = [&](const std::string& label, const OpOptions& opt, const GatParams& fp,
                               Tensor& out, Tensor& attn) {
          GatRow r = base(label);
          auto call = [&] { gat_aggregate(g, feat, el, er, fp, out, attn, opt); };
          call();
          detail::synchronize(dev);
          if (!o.no_check) {
            r.err = std::max(rel_err(gather_rows(host_f32(out), sample.rows), out_ref),
                             rel_err(gather_rows(host_f32(attn), sample.edges), attn_ref));
            r.failed = !(r.err < tol);
          }
          const auto t = detail::time_runs(call, dev, o.warmup, o.reps);
          r.ms = t.median;
          r.gbs = bytes / (r.ms * 1e6);
          return r;
        };
        Tensor attn_saved, out_saved;
        // On the GPU also: the fused forward with the rows' softmax state and negative-logit sums,
        // half rows into a float32 out (what spgnn train's GAT layer runs; its backward then
        // walks the edges once, by source).
        Tensor out32, state, neg;
        std::vector<GatRow> fwd;
        for (const std::string& s : {fused, std::string("unfused")}) {
          OpOptions opt;
          opt.schedule.strategy = s;
          if (s == fused) opt.schedule = fused_s;
          Tensor out = Tensor::full({host.n_rows, H * F}, vt, NAN, dev);
          Tensor attn = Tensor::full({host.nnz(), H}, vt, NAN, dev);
          fwd.push_back(forward_row(s + " fwd", opt, prm, out, attn));
          if (s != fused) continue;
          attn_saved = attn;
          out_saved = out;
          if (dev.is_cuda()) {
            out32 = Tensor::full({host.n_rows, H * F}, DType::f32, NAN, dev);
            Tensor attn2;
            GatParams fp = prm;
            fp.softmax_state = &state;
            fp.negative_logit_sums = &neg;
            fwd.push_back(forward_row(fused + (is_half(vt) ? " fwd (f32 out, state, sums)"
                                                           : " fwd (state, sums)"),
                                      opt, fp, out32, attn2));
          }
        }
        for (auto& r : fwd) {
          r.speedup = fwd.back().ms / r.ms;  // unfused (the last) over this one
          rows.push_back(r);
        }
        // ---- backward: gather over the transpose vs atomics (GPU); cpu on the CPU ----
        if (o.backward) {
          // What each variant is given of the fused forward's results: nothing; its out
          // (halves: out32 and the state); or out32, the state and the sums (one walk by source).
          enum class Given { nothing, out, sums };
          struct Variant {
            std::string label;
            OpOptions opt;
            Given given;
          };
          std::vector<Variant> variants;
          OpOptions b0;
          b0.schedule = fused_s;
          // The labelled variants pin bwd_atomic; the last row is the default that training
          // runs (given the forward's state and sums), labelled with the variant it picked.
          const OpOptions b_default = b0;
          if (dev.is_cuda()) b0.schedule.params["bwd_atomic"] = 0;
          variants.push_back({fused + " bwd" + (dev.is_cuda() ? " (gather)" : ""), b0, Given::nothing});
          if (dev.is_cuda()) {
            variants.push_back({fused + " bwd (gather, t from out)", b0, Given::out});
            variants.push_back({fused + " bwd (one walk by source)", b0, Given::sums});
            OpOptions b1 = b0;
            b1.schedule.params["bwd_atomic"] = 1;
            variants.push_back({fused + " bwd (atomic)", b1, Given::nothing});
            const auto set = fused_s.params.find("bwd_atomic");
            const bool atomic =
                set != fused_s.params.end()
                    ? set->second != 0
                    : !is_half(vt) && detail::gat_bwd_prefers_atomic(host.nnz(), host.n_rows, H, F);
            variants.push_back({fused + " bwd (default: " + (atomic ? "atomic" : "one walk") + ")",
                                b_default, Given::sums});
          }
          Tensor gf_first, gel_first;
          double first_ms = NAN;
          for (auto& [label, opt, given] : variants) {
            GatRow r = base(label);
            Tensor gf, gel, ger;
            GatParams bp = prm;
            const bool from32 = is_half(vt) || given == Given::sums;  // out32 and the state
            if (given != Given::nothing) {
              bp.forward_out = from32 ? &out32 : &out_saved;
              if (from32) bp.softmax_state = &state;
            }
            if (given == Given::sums) bp.negative_logit_sums = &neg;
            auto call = [&] {
              gat_aggregate_backward(g, feat, el, er, attn_saved, gout, bp, gf, gel, ger, opt);
            };
            call();  // also builds and caches the transpose, outside the timed runs
            detail::synchronize(dev);
            if (!o.no_check) {
              // grad_er of a row depends on that row's edges only: compare on the sample. The
              // variants' grad_feat / grad_el (sums over whole columns) are compared with each other.
              r.err = rel_err(gather_rows(host_f32(ger), sample.rows), ger_ref);
              if (gf_first.defined())
                r.err = std::max({r.err, rel_err(host_f32(gf), gf_first),
                                  rel_err(host_f32(gel), gel_first)});
              r.failed = !(r.err < 2 * tol);
            }
            if (!gf_first.defined()) {
              gf_first = host_f32(gf.to(Device::cpu()));
              gel_first = host_f32(gel.to(Device::cpu()));
            }
            const auto t = detail::time_runs(call, dev, o.warmup, o.reps);
            r.ms = t.median;
            if (std::isnan(first_ms)) first_ms = r.ms;
            r.speedup = first_ms / r.ms;
            rows.push_back(r);
          }
        }
      }
  }
  for (auto& r : rows) {
    if (r.failed) r.note = "WRONG RESULT (rel err " + fixed(r.err, 8) + ")";
    any_failed = any_failed || r.failed;
    for (const auto& f : rows)
      if (f.dtype == "f32" && r.dtype != "f32" && f.graph == r.graph && f.H == r.H &&
          f.F == r.F && f.variant == r.variant)
        r.vs_f32 = f.ms / r.ms;
  }
  if (o.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
    for (const auto& r : rows)
      j.push_back({{"kernel", "gat"}, {"device", dev.str()}, {"graph", r.graph}, {"n", r.n},
                   {"nnz", r.nnz}, {"H", r.H}, {"F", r.F}, {"dtype", r.dtype},
                   {"variant", r.variant}, {"attn_dropout", o.attn_dropout},
                   {"median_ms", num(r.ms)}, {"gbs", num(r.gbs)},
                   {"ratio", num(r.speedup)}, {"vs_f32", num(r.vs_f32)},
                   {"rel_err", num(r.err)}, {"failed", r.failed}, {"note", r.note}});
    std::cout << j.dump(2) << "\n";
  } else {
    Table t({"graph", "H", "F", "dtype", "variant", "ms", "GB/s", "ratio", "vs f32", "rel err", ""});
    for (const auto& r : rows)
      t.add({r.graph, std::to_string(r.H), std::to_string(r.F), r.dtype, r.variant,
             std::isfinite(r.ms) ? fixed(r.ms, 4) : "-", std::isfinite(r.gbs) ? fixed(r.gbs, 1) : "-",
             std::isfinite(r.speedup) ? fixed(r.speedup, 2) + "x" : "-",
             std::isfinite(r.vs_f32) ? fixed(r.vs_f32, 2) + "x" : "-",
             std::isfinite(r.err) ? fixed(r.err, 9) : "-", r.note});
    if (o.format == "csv") {
      std::cout << t.csv();
    } else {
      std::cout << "gat on " << dev.str() << "; median of " << o.reps << " runs after " << o.warmup
                << " warm-up"
                << (o.attn_dropout > 0 ? "; attention dropout " + fixed(o.attn_dropout, 2) : "")
                << "; forward checked against cpu_ref (float64) on sampled rows"
                << (o.no_check ? " [check skipped]" : "") << "\n"
                << "ratio: forward rows = unfused ms / " << fused
                << " ms (the fused speedup); backward rows = first variant ms / this ms; "
                   "vs f32: the float32 row's ms / this ms\n"
                << t.str();
    }
  }
  SPGNN_CHECK(!any_failed, Error, "bench gat: at least one variant produced a wrong result (see above)");
}

}  // namespace spgnn::cli

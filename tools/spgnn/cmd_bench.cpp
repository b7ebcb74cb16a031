// spgnn bench spmm|sddmm: every requested strategy on every graph and width, each result
// checked against the float64 reference first, then timed (median of CUDA-event or steady-clock
// timings after warm-up). On the GPU, cuSPARSE (best of its algorithms) runs in the same process
// as the baseline of the speedup column. --dtype f16/bf16 runs the same problems on half-precision
// operands (the reference gets their exact values; the tolerance is the dtype's rounding).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "core/timing.hpp"
#include "spgnn/bench_util.hpp"
#include "spgnn/cmd_bench_gat.hpp"
#include "spgnn/cmd_bench_maxk.hpp"
#include "spgnn/commands.hpp"
#include "spgnn/common.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/tune.hpp"

namespace spgnn::cli {

namespace {

struct BenchOpts {
  std::string kernel;  // spmm | sddmm
  std::vector<std::string> graphs{"builtin"};
  std::vector<std::string> names;
  std::vector<int64_t> dims{32};
  std::vector<int64_t> heads{1, 4};  // gat: attention heads
  std::vector<int64_t> ks{2, 4, 8, 16, 32, 64, 96, 128, 192};  // maxk: kept values per row
  bool dims_given = false;  // maxk defaults to F = 256 instead
  std::string op, reduce = "sum", lhs_target = "v", rhs_target = "u";
  std::vector<std::string> strategies{"auto"};
  std::vector<std::string> params;
  std::string device = "auto";
  int warmup = 5, reps = 20;
  std::string format = "table";
  bool no_check = false;
  uint64_t seed = 1;
  int64_t check_rows = 4096;
  bool wide_e = false;
  bool tune = false;
  std::vector<std::string> dtypes{"f32"};
  std::string input = "uniform";  // maxk: the distribution of x
  double attn_dropout = 0;        // gat: dropout on the attention weights
  LoadFlags flags;
};

struct BenchRow {
  std::string graph, strategy, note, dtype = "f32";
  int64_t n = 0, nnz = 0, F = 0;
  double ms = 0, ms_min = 0, gflops = 0, gbs = 0, speedup = NAN, err = NAN;
  bool is_auto = false, fastest = false, failed = false, baseline = false;
};

// Expands the requested strategies for a problem: auto -> the resolved schedule, all -> every
// registered strategy for the device, cusparse without alg -> each algorithm (best reported).
std::vector<std::vector<Schedule>> expand(const BenchOpts& o, OpKind kind, Device dev,
                                          const Schedule& auto_s) {
  std::vector<std::string> names;
  for (const auto& s : o.strategies) {
    if (s == "all") {
      for (const auto& info : list_strategies(kind))
        if (info.device == dev.type && info.name != "cpu_ref") names.push_back(info.name);
    } else {
      names.push_back(s);
    }
  }
  if (dev.is_cuda() && std::find(names.begin(), names.end(), "cusparse") == names.end())
    names.push_back("cusparse");  // the baseline always runs on the GPU
  if (!dev.is_cuda() && std::find(names.begin(), names.end(), "cpu_ref") == names.end())
    names.push_back("cpu_ref");   // and the float64 reference on the CPU
  std::vector<std::vector<Schedule>> groups;
  for (const auto& text : names) {
    if (text == "auto") {
      groups.push_back({auto_s});
      continue;
    }
    Schedule s = parse_schedule(text);
    const StrategyInfo& info = find_strategy(kind, s.strategy);
    for (const auto& kv : o.params) {
      Schedule extra = parse_schedule("x:" + kv);
      for (const auto& [k, v] : extra.params)
        for (const auto& p : info.params)
          if (p.name == k) s.params[k] = v;
    }
    check_schedule(kind, s);
    if (s.strategy == "cusparse" && s.params.empty()) {
      std::vector<Schedule> algs;
      for (const auto& p : info.params)
        if (p.name == "alg")
          for (int64_t a : p.values) algs.push_back(Schedule{"cusparse", {{"alg", a}}});
      if (algs.empty()) algs.push_back(s);  // an op whose cuSPARSE entry has no algorithms
      groups.push_back(algs);
    } else {
      groups.push_back({s});
    }
  }
  return groups;
}

void run_bench(const BenchOpts& o) {
  if (o.kernel == "maxk") {  // MaxK-GNN kernels vs cuSPARSE SpMM: cmd_bench_maxk.cpp
    MaxkBenchArgs a;
    a.graphs = o.graphs;
    a.names = o.names;
    if (o.dims_given) a.dims = o.dims;
    a.ks = o.ks;
    a.device = o.device;
    a.warmup = o.warmup;
    a.reps = o.reps;
    a.format = o.format;
    a.no_check = o.no_check;
    a.seed = o.seed;
    a.check_rows = o.check_rows;
    a.flags = o.flags;
    a.params = o.params;
    a.input = o.input;
    return run_bench_maxk(a);
  }
  if (o.kernel == "gat") {  // fused GAT vs the unfused composition: cmd_bench_gat.cpp
    GatBenchArgs a;
    a.graphs = o.graphs;
    a.names = o.names;
    a.dims = o.dims;
    a.heads = o.heads;
    a.device = o.device;
    a.warmup = o.warmup;
    a.reps = o.reps;
    a.format = o.format;
    a.no_check = o.no_check;
    a.seed = o.seed;
    a.check_rows = o.check_rows;
    a.flags = o.flags;
    a.params = o.params;
    a.dtypes = o.dtypes;
    a.attn_dropout = o.attn_dropout;
    return run_bench_gat(a);
  }
  const OpKind kind = o.kernel == "spmm" ? OpKind::spmm : OpKind::sddmm;
  const Device dev = bench_device(o.device);
  check_bench_names(o.graphs, o.names);
  for (const auto& kv : o.params) parse_schedule("x:" + kv);  // syntax check before any work
  const SpmmOp sop = kind == OpKind::spmm ? parse_spmm_op(o.op.empty() ? "u_mul_e" : o.op)
                                          : SpmmOp::copy_u;
  const Reduce red = parse_reduce(o.reduce);
  const SddmmOp dop = kind == OpKind::sddmm ? parse_sddmm_op(o.op.empty() ? "dot" : o.op)
                                            : SddmmOp::dot;
  const Target lt = parse_target(o.lhs_target), rt = parse_target(o.rhs_target);

  std::vector<BenchRow> rows;
  bool any_failed = false;
  for (size_t gi = 0; gi < o.graphs.size(); ++gi) {
    const std::string gname = o.names.empty() ? o.graphs[gi] : o.names[gi];
    Graph host = load_with_flags(o.graphs[gi], o.flags);
    const bool need_e = kind == OpKind::spmm && sop != SpmmOp::copy_u;
    if (need_e && !host.has_values()) host.val = random_values({host.nnz()}, o.seed + 7, 0.5f, 1.5f);
    Graph g = dev.is_cuda() ? host.to(dev) : host;
    const RowSample sample = o.no_check ? RowSample{} : sample_rows(host, o.check_rows, o.seed);
    for (int64_t F : o.dims)
    for (const std::string& dtype_text : o.dtypes) {
      const DType vt = feature_dtype(dtype_text);
      // The operands in the benchmark's dtype; the reference gets their exact float32 values.
      auto in_dtype = [&](const Tensor& t) { return t.defined() && is_half(vt) ? t.astype(vt) : t; };
      auto exact = [&](const Tensor& t) { return t.defined() && is_half(vt) ? t.astype(DType::f32) : t; };
      // Inputs: features of every vertex (and edge, where an operand targets edges).
      Tensor u_h, e_h, lhs_h, rhs_h;
      auto rows_of = [&](Target t) {
        return t == Target::u ? host.n_cols : t == Target::v ? host.n_rows : host.nnz();
      };
      if (kind == OpKind::spmm) {
        if (sop != SpmmOp::copy_e) u_h = random_values({host.n_cols, F}, o.seed + 1);
        if (sop != SpmmOp::copy_u)
          e_h = (o.wide_e || sop == SpmmOp::copy_e)
                    ? random_values({host.nnz(), F}, o.seed + 2, 0.5f, 1.5f)
                    : host.val.reshape({host.nnz(), 1});
      } else {
        lhs_h = random_values({rows_of(lt), F}, o.seed + 3);
        rhs_h = random_values({rows_of(rt), F}, o.seed + 4);
      }
      auto dev_copy = [&](const Tensor& t) { return !t.defined() || !dev.is_cuda() ? t : t.to(dev); };
      const Tensor u = dev_copy(in_dtype(u_h)), e = dev_copy(in_dtype(e_h)),
                   lhs = dev_copy(in_dtype(lhs_h)), rhs = dev_copy(in_dtype(rhs_h));
      u_h = exact(in_dtype(u_h));
      e_h = exact(in_dtype(e_h));
      lhs_h = exact(in_dtype(lhs_h));
      rhs_h = exact(in_dtype(rhs_h));
      // One rounding of the result to the dtype (2^-11, 2^-8), doubled; float32 as before.
      const double tol = vt == DType::f16 ? 2.0 / 2048 : vt == DType::bf16 ? 2.0 / 256 : 1e-4;
      const int vbytes = static_cast<int>(dtype_size(vt));

      // Reference on the sampled rows, in float64 (cpu_ref).
      Tensor ref;
      if (!o.no_check) {
        OpOptions ro;
        ro.schedule.strategy = "cpu_ref";
        if (kind == OpKind::spmm) {
          const Tensor es = e_h.defined() ? gather_rows(e_h, sample.edges) : Tensor();
          gspmm(sample.graph, sop, red, u_h, es, ref, ro);
        } else {
          auto side = [&](const Tensor& t, Target tg) {
            return tg == Target::u ? t : gather_rows(t, tg == Target::v ? sample.rows : sample.edges);
          };
          gsddmm(sample.graph, dop, side(lhs_h, lt), side(rhs_h, rt), ref, lt, rt, ro);
        }
      }
      const int64_t w = kind == OpKind::spmm ? F : (dop == SddmmOp::dot ? 1 : F);
      const double flops = kind == OpKind::spmm ? spmm_flops(host, sop, F) : sddmm_flops(host, dop, F);
      const double bytes = kind == OpKind::spmm
                               ? spmm_bytes(host, sop, F, e_h.defined() && e_h.dim(1) == F, vbytes)
                               : sddmm_bytes(host, dop, F, lt, rt, vbytes);
      const Schedule auto_s = kind == OpKind::spmm
                                  ? resolve_spmm_schedule(g, sop, red, F, Schedule{}, vt)
                                  : resolve_sddmm_schedule(g, dop, F, Schedule{}, vt);

      std::vector<BenchRow> case_rows;
      for (const auto& group : expand(o, kind, dev, auto_s)) {
        BenchRow best;
        bool have = false;
        for (const Schedule& s : group) {
          OpOptions opt;
          opt.schedule = s;
          Tensor out = Tensor::empty({kind == OpKind::spmm ? host.n_rows : host.nnz(), w}, vt, dev);
          auto call = [&] {
            if (kind == OpKind::spmm) gspmm(g, sop, red, u, e, out, opt);
            else gsddmm(g, dop, lhs, rhs, out, lt, rt, opt);
          };
          BenchRow r;
          r.graph = gname;
          r.dtype = dtype_text;
          r.n = host.n_rows;
          r.nnz = host.nnz();
          r.F = F;
          r.strategy = s.str();
          r.is_auto = s.strategy == auto_s.strategy &&
                      (s.params == auto_s.params || (group.size() > 1 && auto_s.params.empty()));
          try {
            out.fill_(NAN);
            call();
            detail::synchronize(dev);
            if (!o.no_check) {
              const Tensor got_all = out.to(Device::cpu());
              const Tensor got = gather_rows(
                  got_all, kind == OpKind::spmm ? sample.rows : sample.edges);
              r.err = rel_err(got, ref);
              r.failed = !(r.err < tol);
            }
            const auto t = detail::time_runs(call, dev, o.warmup, o.reps);
            r.ms = t.median;
            r.ms_min = t.min;
            r.gflops = flops / (r.ms * 1e6);
            r.gbs = bytes / (r.ms * 1e6);
          } catch (const Unsupported& ex) {
            r.note = std::string("unsupported: ") + ex.what();
            r.ms = NAN;
          }
          if (r.failed) r.note = "WRONG RESULT (rel err " + fixed(r.err, 8) + ")";
          if (!have || (std::isfinite(r.ms) && (!std::isfinite(best.ms) || r.ms < best.ms))) {
            best = r;
            have = true;
          }
        }
        if (group.size() > 1) best.strategy = best.strategy + " [best of " + std::to_string(group.size()) + "]";
        best.baseline = group.front().strategy == (dev.is_cuda() ? "cusparse" : "cpu_ref");
        case_rows.push_back(best);
      }
      double base_ms = NAN, fastest_ms = INFINITY;
      for (const auto& r : case_rows) {
        if (r.baseline) base_ms = r.ms;
        if (std::isfinite(r.ms) && !r.failed) fastest_ms = std::min(fastest_ms, r.ms);
      }
      for (auto& r : case_rows) {
        r.speedup = base_ms / r.ms;
        r.fastest = r.ms == fastest_ms;
        any_failed = any_failed || r.failed;
        rows.push_back(r);
      }
    }
  }

  const std::string op_label = kind == OpKind::spmm
                                   ? std::string(name(sop)) + "/" + name(red)
                                   : std::string(name(dop)) + "(" + name(lt) + "," + name(rt) + ")";
  const std::string base_name = dev.is_cuda() ? "cusparse" : "cpu_ref";
  if (o.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows)
      j.push_back({{"kernel", o.kernel}, {"op", op_label}, {"device", dev.str()},
                   {"graph", r.graph}, {"n", r.n}, {"nnz", r.nnz}, {"F", r.F}, {"dtype", r.dtype},
                   {"strategy", r.strategy}, {"median_ms", std::isfinite(r.ms) ? nlohmann::json(r.ms) : nlohmann::json()},
                   {"min_ms", r.ms_min}, {"gflops", r.gflops}, {"gbs", r.gbs},
                   {"speedup_vs_" + base_name, std::isfinite(r.speedup) ? nlohmann::json(r.speedup) : nlohmann::json()},
                   {"rel_err", std::isfinite(r.err) ? nlohmann::json(r.err) : nlohmann::json()},
                   {"auto", r.is_auto}, {"fastest", r.fastest}, {"failed", r.failed},
                   {"note", r.note}});
    std::cout << j.dump(2) << "\n";
  } else {
    Table t({"graph", "F", "dtype", "strategy", "ms", "GFLOP/s", "GB/s", "vs " + base_name,
             "rel err", ""});
    for (const auto& r : rows) {
      std::string mark = r.failed ? r.note : (r.fastest ? "fastest" : "");
      if (r.is_auto) mark += mark.empty() ? "auto" : ", auto";
      if (!std::isfinite(r.ms) && !r.failed) mark = r.note;
      t.add({r.graph, std::to_string(r.F), r.dtype, r.strategy,
             std::isfinite(r.ms) ? fixed(r.ms, 4) : "-", std::isfinite(r.ms) ? fixed(r.gflops, 1) : "-",
             std::isfinite(r.ms) ? fixed(r.gbs, 1) : "-",
             std::isfinite(r.speedup) ? fixed(r.speedup, 2) + "x" : "-",
             std::isfinite(r.err) ? fixed(r.err, 9) : "-", mark});
    }
    if (o.format == "csv") {
      std::cout << t.csv();
    } else {
      std::cout << o.kernel << " " << op_label << " on " << dev.str() << "; median of " << o.reps
                << " runs after " << o.warmup << " warm-up; results checked against cpu_ref (float64)"
                << (o.no_check ? " [check skipped]" : "") << "\n"
                << t.str();
    }
  }
  SPGNN_CHECK(!any_failed, Error, "bench: at least one strategy produced a wrong result (see above)");
}

}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOpts>();
  auto* cmd = app.add_subcommand("bench", "Check and time sparse kernels side by side (cuSPARSE "
                                          "baseline on the GPU)");
  cmd->add_option("kernel", o->kernel, "spmm, sddmm, gat (fused GAT vs unfused; --dim is F per head) or maxk (MaxK-GNN kernels vs cuSPARSE; --dim default 256, --k)")->required()->check(CLI::IsMember({"spmm", "sddmm", "gat", "maxk"}));
  cmd->add_option("-g,--graph", o->graphs,
                  "Graph file, dataset directory or generator spec (repeatable; default builtin)")
      ->capture_default_str();
  cmd->add_option("--name", o->names, "Display name per --graph (repeatable)");
  cmd->add_option("-d,--dim", o->dims, "Feature widths F (repeatable or comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--heads", o->heads, "gat: attention heads H (repeatable or comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))
      ->capture_default_str();
  cmd->add_option("--k", o->ks, "maxk: values kept per row (repeatable or comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--op", o->op, "spmm: copy_u, copy_e, u_mul_e (default), u_add_e, u_sub_e, u_div_e; "
                                 "sddmm: dot (default), add, sub, mul, div, copy_lhs, copy_rhs");
  cmd->add_option("--reduce", o->reduce, "spmm reduce: sum, mean, max, min")
      ->check(CLI::IsMember({"sum", "mean", "max", "min"}))
      ->capture_default_str();
  cmd->add_option("--lhs-target", o->lhs_target, "sddmm lhs target: u, v or e")
      ->check(CLI::IsMember({"u", "v", "e"}))
      ->capture_default_str();
  cmd->add_option("--rhs-target", o->rhs_target, "sddmm rhs target: u, v or e")
      ->check(CLI::IsMember({"u", "v", "e"}))
      ->capture_default_str();
  cmd->add_option("-s,--strategy", o->strategies,
                  "auto, all, or a strategy name, optionally with parameters: "
                  "gnnone:cache_size=64,warps=8 (repeatable; see `spgnn strategies`)")
      ->capture_default_str();
  cmd->add_option("--param", o->params, "key=value applied to every named strategy that has it (repeatable); maxk: parameters of the CBSR products' gpu strategy (warps, segment, smem_buffer, vec, private_rows, regs, flat); gat: gat_fused's (warps, heavy_deg, heads_per_chunk)");
  cmd->add_option("--device", o->device, "auto (GPU when present), cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Warm-up runs")->check(CLI::Range(0, 10000))->capture_default_str();
  cmd->add_option("--reps", o->reps, "Timed runs (median reported)")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--format", o->format, "table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  cmd->add_flag("--no-check", o->no_check, "Skip the reference check (not recommended)");
  cmd->add_option("--check-rows", o->check_rows, "Rows sampled for the reference check")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_flag("--wide-e", o->wide_e, "spmm: edge operand of width F instead of 1");
  cmd->add_option("--dtype", o->dtypes,
                  "spmm/sddmm feature dtype, gat: every tensor's: f32, f16, bf16 or all (repeatable or comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "f16", "bf16", "all"}))
      ->capture_default_str();
  cmd->add_option("--input", o->input,
                  "maxk: values of the input x, uniform in [-1, 1) or standard normal (a linear "
                  "layer's output looks like this; it takes the top-k search more rounds)")
      ->check(CLI::IsMember({"uniform", "normal"}))
      ->capture_default_str();
  cmd->add_option("--attn-dropout", o->attn_dropout,
                  "gat: dropout probability on the attention weights, in [0, 1), as `spgnn train "
                  "--attn-dropout` uses it (the mask's seed follows --seed; checked rows see the "
                  "whole graph's masks)")
      ->check(number_that([](double v) { return v >= 0 && v < 1; }, "in [0, 1)"))
      ->capture_default_str();
  add_seed_option(*cmd, o->seed, "Seed of the random inputs");
  cmd->add_flag("--tune", o->tune, "auto: tune and cache each problem the tuning cache does not "
                                   "know yet (before it is timed)");
  add_load_flags(*cmd, o->flags);
  cmd->callback([o, cmd] {
    o->dims_given = cmd->count("--dim") > 0;
    if (std::find(o->dtypes.begin(), o->dtypes.end(), "all") != o->dtypes.end())
      o->dtypes = {"f32", "f16", "bf16"};
    SPGNN_CHECK(o->kernel != "maxk" || o->dtypes == std::vector<std::string>{"f32"},
                InvalidArgument, "bench ", o->kernel, ": --dtype applies to spmm, sddmm and gat");
    SPGNN_CHECK(o->kernel == "maxk" || cmd->count("--input") == 0, InvalidArgument, "bench ",
                o->kernel, ": --input applies to maxk only");
    SPGNN_CHECK(o->kernel == "gat" || cmd->count("--attn-dropout") == 0, InvalidArgument,
                "bench ", o->kernel, ": --attn-dropout applies to gat only");
    if (o->tune) set_tune_on_miss(true);
    run_bench(*o);
  });
}

void register_strategies(CLI::App& app) {
  auto* cmd = app.add_subcommand("strategies", "List the strategies of this build and their parameters");
  cmd->callback([] {
    for (OpKind k : {OpKind::spmm, OpKind::sddmm, OpKind::cbsr_spgemm, OpKind::cbsr_sspmm}) {
      std::cout << op_kind_name(k) << ":\n";
      for (const auto& s : list_strategies(k)) {
        std::cout << "  " << s.name << " [" << (s.device == DeviceType::cuda ? "cuda" : "cpu")
                  << "]  " << s.description << "\n";
        for (const auto& p : s.params) {
          std::string vals;
          for (int64_t v : p.values) vals += (vals.empty() ? "" : "|") + std::to_string(v);
          std::cout << "      " << p.name << " = " << vals << " (default " << p.default_value
                    << "): " << p.help << "\n";
        }
      }
    }
  });
}

}  // namespace spgnn::cli

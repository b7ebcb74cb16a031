// maxkgnn_baseline: MaxK-GNN's own CBSR kernels timed beside spgnn's, in one process, on the same
// GPU, graph files and inputs (issue 14 compares the two; its table of MaxK-GNN times came from
// another card). Their SpGEMM and SSpMM are compiled from a checkout of MaxK-GNN
// (github.com/xiexi51/MaxK-GNN, kernels/; CMake -DSPGNN_MAXKGNN_SRC=<that directory>), unchanged
// and never copied into spgnn; launch.cu launches them as their own test program does.
//
// For each graph, width F and k, with the inputs `spgnn bench maxk` draws for the same --seed
// (X [n, F] and dOut [n, F] uniform in [-1, 1), edge weights in [0.5, 1.5) where the file has
// none):
//   X_cbsr = spgnn::maxk(X, k)
//   SpGEMM  out    = A X_cbsr                          spgnn cbsr_spgemm (auto) / theirs
//   SSpMM   d_data = (A^T dOut) at X_cbsr's pattern    spgnn cbsr_sspmm (auto) / theirs
// Their results are first checked against spgnn's (which the GPU tests check against the float64
// oracle), row by row: for k < 32 their kernels get the rows of the grid's last few tasks wrong
// (first_tail_task below), so those rows are counted apart and the check covers the others;
// then each kernel is timed, median of CUDA-event timings after warm-up, spgnn and
// theirs alternately for --rounds rounds, the lowest median kept. Their kernels accumulate with
// atomics into an output that must be zeroed before each call; as in their own timing, the
// zeroing is not in their kernel's time, and is reported beside it (cudaMemsetAsync).
#include <sys/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/timing.hpp"
#include "launch.hpp"
#include "spgnn/bench_util.hpp"
#include "spgnn/io.hpp"
#include "spgnn/ops.hpp"

namespace {

using namespace spgnn;

void cuda_ok(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(e));
}

// Their task records (generate_meta.py's .warp4 files): {row, first non-zero, count, 0} for each
// run of at most kWarpMaxNz non-zeros of one non-empty row, in row order.
std::vector<int32_t> warp_tasks(const Graph& g) {
  const int32_t* rp = g.rowptr.data<int32_t>();
  std::vector<int32_t> t;
  for (int64_t r = 0; r < g.n_rows; ++r)
    for (int32_t e = rp[r]; e < rp[r + 1]; e += maxkgnn::kWarpMaxNz)
      t.insert(t.end(), {int32_t(r), e, std::min(maxkgnn::kWarpMaxNz, rp[r + 1] - e), 0});
  return t;
}

// For k < 32 their kernels split each warp into 32 / k sub-warps numbered across the block (up to
// 12 * 32 / k - 1); sub-warp j < 12 works through the edges of the block's task j, and each warp
// writes out its own task's row. Every lane returns at once when its block's first task plus its
// sub-warp number is past the last task, work or not, so in the grid's last blocks some warps
// never write their row (SpGEMM) or leave their part of a shared row unloaded for the others to
// read (SSpMM). Their results are wrong on the rows those blocks' tasks touch and exact
// elsewhere. The first task of the first block that can hit that:
int64_t first_tail_task(int64_t num_tasks, int64_t k) {
  if (k >= 32) return num_tasks;
  const int64_t reach = maxkgnn::kWarpsPerBlock * (32 / k);
  const int64_t b = std::max<int64_t>(0, num_tasks - reach) / maxkgnn::kWarpsPerBlock;
  return b * maxkgnn::kWarpsPerBlock;
}

// got against ref row by row: the relative error over the rows outside `tail`, and how many rows
// differ (relative row error >= 1e-4) inside and outside it.
struct Agreement {
  double err_outside = NAN;
  int64_t differ_outside = 0, differ_tail = 0, tail_rows = 0;
};
Agreement agreement(const Tensor& got_dev, const Tensor& ref_dev, const std::vector<char>& tail) {
  const Tensor got = got_dev.to(Device::cpu()), ref = ref_dev.to(Device::cpu());
  const int64_t rows = ref.shape()[0], cols = ref.shape()[1];
  const float* a = got.data<float>();
  const float* b = ref.data<float>();
  Agreement r;
  double num = 0, den = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double rn = 0, rd = 0;
    bool finite = true;
    for (int64_t j = 0; j < cols; ++j) {
      const double x = a[i * cols + j], y = b[i * cols + j];
      finite = finite && std::isfinite(x);
      rn += (x - y) * (x - y);
      rd += y * y;
    }
    const bool differs = !finite || std::sqrt(rn) >= 1e-4 * std::max(std::sqrt(rd), 1e-30);
    if (tail[size_t(i)]) {
      ++r.tail_rows;
      r.differ_tail += differs;
    } else {
      r.differ_outside += differs;
      num += finite ? rn : INFINITY;
      den += rd;
    }
  }
  r.err_outside = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  return r;
}

struct Row {
  std::string graph;
  int64_t n = 0, nnz = 0, F = 0, k = 0;
  double spgnn_spgemm = NAN, their_spgemm = NAN, zero_out = NAN;
  double spgnn_sspmm = NAN, their_sspmm = NAN, zero_ddata = NAN;
  Agreement fwd, bwd;
  bool failed() const { return !(fwd.err_outside < 1e-4) || !(bwd.err_outside < 1e-4); }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"MaxK-GNN's CBSR SpGEMM / SSpMM kernels beside spgnn's, same GPU and inputs"};
  std::vector<std::string> graphs, names;
  std::vector<int64_t> dims{256}, ks{16, 32, 64};
  int warmup = 5, reps = 20, rounds = 2;
  uint64_t seed = 1;
  std::string format = "table";
  app.add_option("graphs", graphs, "graph files (rows = receiving vertices, as spgnn reads them)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--name", names, "a name per graph for the output (default: the path)");
  app.add_option("--dim", dims, "feature widths F: multiples of 32 up to 256 (their kernels' "
                                "lanes and 8-bit columns)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--k", ks, "values kept a row: a divisor of 32, or a multiple of 32")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed runs before each timing")->check(CLI::Range(0, 1000));
  app.add_option("--reps", reps, "timed runs (the median is kept)")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", rounds, "spgnn-then-theirs timing rounds (the lowest median is kept)")
      ->check(CLI::Range(1, 100));
  app.add_option("--seed", seed, "the inputs' seed (the same draws as spgnn bench maxk --seed)")
      ->capture_default_str();
  app.add_option("--format", format, "table or json")->check(CLI::IsMember({"table", "json"}));
  CLI11_PARSE(app, argc, argv);

  try {
    if (!names.empty() && names.size() != graphs.size())
      throw std::invalid_argument("--name: give one name per graph (" +
                                  std::to_string(graphs.size()) + " graphs, " +
                                  std::to_string(names.size()) + " names)");
    for (int64_t F : dims)
      if (F < 32 || F > 256 || F % 32)
        throw std::invalid_argument("--dim " + std::to_string(F) +
                                    ": their kernels need a multiple of 32 up to 256");
    for (int64_t k : ks)
      if (k < 1 || k > 256 || (k < 32 ? 32 % k != 0 : k % 32 != 0))
        throw std::invalid_argument("--k " + std::to_string(k) +
                                    ": their kernels need a divisor of 32 or a multiple of 32");
    if (!cuda_available()) throw std::runtime_error("no CUDA device: the baseline runs on a GPU");
    const Device dev = Device::cuda(0);

    std::vector<Row> rows;
    for (size_t gi = 0; gi < graphs.size(); ++gi) {
      Graph host = read_graph(graphs[gi]);
      if (host.index_dtype() != DType::i32 || host.nnz() >= (int64_t{1} << 31))
        throw std::invalid_argument(graphs[gi] + ": their kernels take 32-bit indices");
      if (!host.has_values()) host.val = cli::random_values({host.nnz()}, seed + 7, 0.5f, 1.5f);
      const Graph g = host.to(dev);
      const std::vector<int32_t> tasks = warp_tasks(host);
      const Tensor warp4 = Tensor::from_vector(tasks).to(dev);

      for (int64_t F : dims) {
        if (host.n_rows * F >= (int64_t{1} << 31) || host.n_cols * F >= (int64_t{1} << 31))
          throw std::invalid_argument(graphs[gi] + ": n * F = " +
                                      std::to_string(std::max(host.n_rows, host.n_cols) * F) +
                                      " overflows their kernels' 32-bit offsets");
        const Tensor x = cli::random_values({host.n_cols, F}, seed + 1, -1.f, 1.f).to(dev);
        const Tensor d_out = cli::random_values({host.n_rows, F}, seed + 2, -1.f, 1.f).to(dev);
        for (int64_t k : ks) {
          if (k > F) continue;
          Row r;
          r.graph = names.empty() ? graphs[gi] : names[gi];
          r.n = host.n_rows;
          r.nnz = host.nnz();
          r.F = F;
          r.k = k;
          const Cbsr xs = maxk(x, k);

          maxkgnn::Args a;
          a.warp4 = warp4.data<int32_t>();
          a.num_warps = int(tasks.size() / 4);
          a.col = g.col.data<int32_t>();
          a.val = g.val.data<float>();
          a.selector = xs.index.data<uint8_t>();
          a.num_v = int(host.n_rows);
          a.num_e = int(host.nnz());
          a.F = int(F);
          a.k = int(k);

          // SpGEMM: theirs checked against spgnn's.
          Tensor out_s = Tensor::empty({host.n_rows, F}, DType::f32, dev);
          Tensor out_t = Tensor::zeros({host.n_rows, F}, DType::f32, dev);
          cbsr_spgemm(g, xs, Tensor(), out_s);
          a.vin = xs.data.data<float>();
          a.vout = out_t.data<float>();
          cuda_ok(maxkgnn::spgemm(a), "MaxK-GNN SpGEMM launch");
          detail::synchronize(dev);
          // The rows their early return can touch (k < 32): those of the last tasks' rows
          // (SpGEMM), and the sources of those tasks' edges (SSpMM).
          std::vector<char> tail_rows(size_t(host.n_rows), 0), tail_srcs(size_t(host.n_cols), 0);
          const int32_t* hcol = host.col.data<int32_t>();
          for (size_t t = size_t(first_tail_task(int64_t(tasks.size() / 4), k)) * 4;
               t < tasks.size(); t += 4) {
            tail_rows[size_t(tasks[t])] = 1;
            for (int32_t e = tasks[t + 1]; e < tasks[t + 1] + tasks[t + 2]; ++e)
              tail_srcs[size_t(hcol[e])] = 1;
          }
          r.fwd = agreement(out_t, out_s, tail_rows);
          const maxkgnn::Args fwd = a;

          // SSpMM likewise.
          Tensor dd_s = Tensor::empty({host.n_cols, k}, DType::f32, dev);
          Tensor dd_t = Tensor::zeros({host.n_cols, k}, DType::f32, dev);
          cbsr_sspmm(g, Tensor(), d_out, xs, dd_s);
          a.vin = d_out.data<float>();
          a.vout = dd_t.data<float>();
          cuda_ok(maxkgnn::sspmm(a), "MaxK-GNN SSpMM launch");
          detail::synchronize(dev);
          r.bwd = agreement(dd_t, dd_s, tail_srcs);
          const maxkgnn::Args bwd = a;

          auto best = [&](double& keep, const std::function<void()>& fn) {
            const double ms = detail::time_runs(fn, dev, warmup, reps).median;
            if (std::isnan(keep) || ms < keep) keep = ms;
          };
          for (int round = 0; round < rounds; ++round) {
            best(r.spgnn_spgemm, [&] { cbsr_spgemm(g, xs, Tensor(), out_s); });
            best(r.their_spgemm, [&] { cuda_ok(maxkgnn::spgemm(fwd), "MaxK-GNN SpGEMM"); });
            best(r.spgnn_sspmm, [&] { cbsr_sspmm(g, Tensor(), d_out, xs, dd_s); });
            best(r.their_sspmm, [&] { cuda_ok(maxkgnn::sspmm(bwd), "MaxK-GNN SSpMM"); });
          }
          best(r.zero_out, [&] { cuda_ok(cudaMemsetAsync(out_t.raw(), 0, out_t.nbytes()), "memset"); });
          best(r.zero_ddata, [&] { cuda_ok(cudaMemsetAsync(dd_t.raw(), 0, dd_t.nbytes()), "memset"); });
          detail::synchronize(dev);
          rows.push_back(r);
          if (format == "table")
            std::cerr << "  " << r.graph << " F=" << F << " k=" << k << " done\n";
        }
      }
    }

    bool any_failed = false;
    for (const Row& r : rows) any_failed = any_failed || r.failed();
    auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    if (format == "json") {
      nlohmann::json j = nlohmann::json::array();
      for (const Row& r : rows)
        j.push_back({{"kernel", "maxkgnn"}, {"device", dev.str()}, {"graph", r.graph},
                     {"n", r.n}, {"nnz", r.nnz}, {"F", r.F}, {"k", r.k},
                     {"spgnn_spgemm_ms", num(r.spgnn_spgemm)},
                     {"maxkgnn_spgemm_ms", num(r.their_spgemm)},
                     {"maxkgnn_zero_out_ms", num(r.zero_out)},
                     {"spgnn_sspmm_ms", num(r.spgnn_sspmm)},
                     {"maxkgnn_sspmm_ms", num(r.their_sspmm)},
                     {"maxkgnn_zero_ddata_ms", num(r.zero_ddata)},
                     {"spgemm_rel_err", num(r.fwd.err_outside)},
                     {"sspmm_rel_err", num(r.bwd.err_outside)},
                     {"spgemm_tail_rows", r.fwd.tail_rows},
                     {"spgemm_tail_rows_differing", r.fwd.differ_tail},
                     {"sspmm_tail_rows", r.bwd.tail_rows},
                     {"sspmm_tail_rows_differing", r.bwd.differ_tail},
                     {"failed", r.failed()}});
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf("spgnn against MaxK-GNN's kernels on %s; ms, median of %d runs after %d warm-up, "
                  "lowest of %d rounds; theirs checked against spgnn's (rel err)\n",
                  dev.str().c_str(), reps, warmup, rounds);
      std::printf("%-14s %4s %3s | %9s %9s %6s %7s | %9s %9s %6s %7s | %s\n", "graph", "F", "k",
                  "spgemm", "theirs", "ratio", "zero", "sspmm", "theirs", "ratio", "zero",
                  "check (rel err off the tail; tail rows differing / in the tail)");
      for (const Row& r : rows)
        std::printf("%-14s %4lld %3lld | %9.4f %9.4f %6.2f %7.4f | %9.4f %9.4f %6.2f %7.4f | %s "
                    "(%.1e, %.1e; tail %lld/%lld, %lld/%lld)\n",
                    r.graph.c_str(), (long long)r.F, (long long)r.k, r.spgnn_spgemm,
                    r.their_spgemm, r.spgnn_spgemm / r.their_spgemm, r.zero_out, r.spgnn_sspmm,
                    r.their_sspmm, r.spgnn_sspmm / r.their_sspmm, r.zero_ddata,
                    r.failed() ? "DIFFER" : "ok", r.fwd.err_outside, r.bwd.err_outside,
                    (long long)r.fwd.differ_tail, (long long)r.fwd.tail_rows,
                    (long long)r.bwd.differ_tail, (long long)r.bwd.tail_rows);
    }
    if (any_failed) {
      std::cerr << "maxkgnn_baseline: MaxK-GNN's results differ from spgnn's off the tail "
                   "(rel err >= 1e-4)\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "maxkgnn_baseline: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

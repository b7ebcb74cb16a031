// The autotuner (issue 7): search space and validity rules, the search core on synthetic
// landscapes (no timing), the tuning cache and its files, the graph fingerprint, `auto`'s use of
// the cache, and `spgnn tune` end to end. Everything here runs on the CPU.
#include <gtest/gtest.h>
#include <omp.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "dispatch/registry.hpp"
#include "kernels/cbsr_shape.hpp"
#include "spgnn/ops.hpp"
#include "spgnn/tune.hpp"
#include "test_util.hpp"
#include "tune/cache.hpp"
#include "tune/search.hpp"
#include "tune/space.hpp"

namespace spgnn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::run_cli;
using test::seed_for;

// A fresh directory per test, removed afterwards; the process-wide tuner settings are reset.
class Tune : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("spgnn-tune-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    set_tuning_cache_path("");
    set_tune_on_miss(false);
    unsetenv("SPGNN_TUNING_CACHE");
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

Graph rmat_graph(int scale, int64_t edge_factor, uint64_t seed) {
  RmatParams p;
  p.scale = scale;
  p.edge_factor = edge_factor;
  p.seed = seed;
  return generate_rmat(p);
}

size_t product_of_tunable(const StrategyInfo& info) {
  size_t n = 1;
  for (const auto& p : info.params)
    if (p.tunable) n *= p.values.size();
  return n;
}

detail::SpmmProblem spmm_shape(const Graph& g, int64_t F) {
  detail::SpmmProblem p;
  p.g = &g;
  p.op = SpmmOp::u_mul_e;
  p.reduce = Reduce::sum;
  p.F = F;
  p.e_width = 1;
  return p;
}

// ---- search space ------------------------------------------------------------------------------

TEST_F(Tune, SpaceMatchesRegistryWithoutRefOrAblationSwitches) {
  const Graph g = rmat_graph(10, 8, seed_for(1));
  const detail::SpmmProblem p = spmm_shape(g, 16);
  const tune::Space space = tune::space_for_spmm(p);
  size_t expected = 0;
  std::set<std::string> names;
  for (const auto& info : list_strategies(OpKind::spmm)) {
    if (info.device != DeviceType::cpu || info.name == "cpu_ref") continue;
    expected += product_of_tunable(info);
    names.insert(info.name);
  }
  EXPECT_EQ(space.size(), expected);
  ASSERT_EQ(space.strategies().size(), names.size());
  for (const auto& s : space.strategies()) {
    EXPECT_NE(s.name, "cpu_ref");
    EXPECT_TRUE(names.count(s.name)) << s.name;
    for (const auto& prm : s.params) EXPECT_TRUE(prm.tunable) << s.name << "." << prm.name;
  }
  // A graph this size clamps no merge-path chunk count: every combination is valid and every
  // point is a full schedule of legal values.
  EXPECT_EQ(space.valid_count(), space.size());
  for (size_t i = 0; i < space.size(); ++i) {
    const Schedule s = space.schedule(i);
    EXPECT_NO_THROW(check_schedule(OpKind::spmm, s)) << s.str();
    ASSERT_TRUE(space.find(s).has_value());
    EXPECT_EQ(*space.find(s), i);
  }
  const TuneSpace pub = spmm_tune_space(g, SpmmOp::u_mul_e, Reduce::sum, 16);
  EXPECT_EQ(pub.size, expected);
  EXPECT_EQ(pub.valid, expected);
}

TEST_F(Tune, AblationSwitchesAreNotTunable) {
  const std::set<std::string> ablation{"nze_cache", "vector_loads", "consecutive", "online"};
  size_t seen = 0, tunable = 0;
  for (OpKind op : {OpKind::spmm, OpKind::sddmm})
    for (const auto& info : list_strategies(op))
      for (const auto& p : info.params) {
        if (ablation.count(p.name)) {
          ++seen;
          EXPECT_FALSE(p.tunable) << info.name << "." << p.name;
          EXPECT_NE(p.help.find("not tuned"), std::string::npos) << p.help;
        } else {
          tunable += p.tunable;
        }
      }
  EXPECT_GT(tunable, 0u);  // the CPU build has cpu_mergepath's two
  if (!SPGNN_WITH_CUDA) EXPECT_EQ(seen, 0u);
  else EXPECT_EQ(seen, 7u);  // gnnone spmm + sddmm (3 each), mergepath online
  // A space built by hand honours the flag exactly like the registry's.
  const tune::Space space(OpKind::spmm,
                          {{"a", {{"x", {1, 2, 3}, 1, "", true}}}, {"b", {}}}, nullptr);
  EXPECT_EQ(space.size(), 4u);
}

TEST_F(Tune, CpuMergepathClampedChunkCountsAreExcluded) {
  // n = 2 rows and 1 edge: with T threads, T * chunks_per_thread beyond row_cost * 2 + 1 merge
  // path items is clamped, so larger chunk counts repeat a smaller one's partition (for any T:
  // at row_cost = 1, chunks_per_thread 4 and 8 both give 3 chunks).
  const Graph g = graph_from_edges(2, 2, {0}, {1});
  const detail::SpmmProblem p = spmm_shape(g, 8);
  const tune::Space space = tune::space_for_spmm(p);
  const int64_t T = std::max(1, omp_get_max_threads());
  std::set<std::pair<int64_t, int64_t>> partitions;  // (row_cost, chunks) as the kernel runs them
  for (int64_t rc : {1, 2, 4, 8})
    for (int64_t c : {1, 2, 4, 8}) partitions.insert({rc, std::min(T * c, rc * 2 + 1)});
  EXPECT_EQ(space.valid_count(), partitions.size());
  EXPECT_LT(space.valid_count(), space.size());
  for (size_t i = 0; i < space.size(); ++i) {
    if (space.valid(i)) continue;
    EXPECT_EQ(space.invalid_reason(i).rfind("same as chunks_per_thread=", 0), 0u)
        << space.invalid_reason(i);
    // The excluded point is replaced by a valid one of the same strategy.
    const auto near = space.nearest_valid(i);
    ASSERT_TRUE(near.has_value());
    EXPECT_TRUE(space.valid(*near));
  }
  const TuneSpace pub = spmm_tune_space(g, SpmmOp::u_mul_e, Reduce::sum, 8);
  EXPECT_EQ(pub.valid, partitions.size());
}

// The registry's declarations of the CUDA strategies, as the rules see them (a CPU build has no
// CUDA entries, and the rules are plain functions of these).
StrategyInfo info_of(const std::string& name, std::vector<ParamSpec> params) {
  StrategyInfo i;
  i.name = name;
  i.params = std::move(params);
  return i;
}

TEST_F(Tune, CudaValidityRulesMirrorTheLaunchers) {
  detail::LaunchLimits h100;
  h100.max_smem_per_block = 227 * 1024;
  detail::LaunchLimits small;  // 48 KB, 1024 threads
  const StrategyInfo rowtile = info_of(
      "rowtile", {{"m_tile", {1, 2, 4, 8, 16, 32}, 4, ""}, {"n_tile", {8, 16, 32, 64, 128, 256}, 128, ""},
                  {"reg_tile", {1, 2, 4, 8}, 4, ""}, {"nnz_tile", {32, 64, 128, 256}, 64, ""},
                  {"swizzle", {0, 1}, 1, ""}});
  auto rt = [&](int64_t m, int64_t n, int64_t r, int64_t z, DType idx, const detail::LaunchLimits& l,
                int64_t F = 64) {
    return detail::validate_rowtile(
        rowtile, Schedule{"rowtile", {{"m_tile", m}, {"n_tile", n}, {"reg_tile", r}, {"nnz_tile", z}}},
        idx, F, l);
  };
  EXPECT_EQ(rt(4, 128, 4, 64, DType::i32, small), "");
  // reg_tile below n_tile / 32 is raised by the launcher: a duplicate.
  EXPECT_EQ(rt(4, 256, 4, 64, DType::i32, small).rfind("same as reg_tile=8", 0), 0u);
  // 32 teams of 32 lanes: 1024 threads is the limit, not over it.
  EXPECT_EQ(rt(32, 32, 1, 32, DType::i32, small), "");
  detail::LaunchLimits few_threads;
  few_threads.max_threads_per_block = 256;
  EXPECT_NE(rt(32, 32, 1, 32, DType::i32, few_threads).find("threads per block"), std::string::npos);
  // 32 x 256 staged non-zeros of (int64 + float) = 96 KB: over 48 KB, within the H100's opt-in.
  EXPECT_NE(rt(32, 32, 1, 256, DType::i64, small).find("shared memory"), std::string::npos);
  EXPECT_EQ(rt(32, 32, 1, 256, DType::i64, h100), "");
  EXPECT_NE(rt(1, 8, 8, 32, DType::i32, small, int64_t{1} << 20).find("feature tiles"),
            std::string::npos);

  const StrategyInfo gnnone = info_of(
      "gnnone", {{"cache_size", {32, 64, 128, 256}, 128, ""}, {"warps", {1, 2, 4, 8, 16}, 4, ""},
                 {"nze_cache", {0, 1}, 1, "", false}});
  auto gn = [&](int64_t c, int64_t w, int64_t nze, const detail::LaunchLimits& l,
                int64_t skew = 0) {
    return detail::validate_gnnone(
        gnnone, Schedule{"gnnone", {{"cache_size", c}, {"warps", w}, {"nze_cache", nze}}},
        DType::i64, l, skew);
  };
  // The SpMM's skewed sub-slices: 16 warps x (130*8 + 128*8 + 128*4 -> 2576 B) = 40.3 KB fits
  // 48 KB; with 32 spare words per array (162*8 + 160*8 + 160*4 -> 3216 B) 50.3 KB does not.
  EXPECT_EQ(gn(128, 16, 1, small), "");
  EXPECT_NE(gn(128, 16, 1, small, 32).find("shared memory"), std::string::npos);
  // 16 warps x (258*8 + 256*8 + 256*4 -> 5136 B) = 82 KB of stage-1 cache.
  EXPECT_NE(gn(256, 16, 1, small).find("shared memory"), std::string::npos);
  EXPECT_EQ(gn(256, 16, 1, h100), "");
  EXPECT_EQ(gn(256, 16, 0, small), "");  // without the cache nothing is staged
  EXPECT_EQ(gn(128, 4, 1, small), "");

  const StrategyInfo wv = info_of("warp_vertex", {{"warps", {1, 2, 4, 8, 16}, 4, ""},
                                                  {"assign", {0, 1, 2}, 0, ""},
                                                  {"step", {1, 2, 4, 8, 16, 32}, 4, ""}});
  auto wvs = [&](int64_t a, int64_t st) {
    return detail::validate_warp_vertex(wv, Schedule{"warp_vertex", {{"assign", a}, {"step", st}}});
  };
  EXPECT_EQ(wvs(1, 4), "");
  EXPECT_EQ(wvs(1, 8).rfind("same as step=4", 0), 0u);
  EXPECT_EQ(wvs(2, 8), "");

  const StrategyInfo mp = info_of("mergepath", {{"cost", {4, 8, 16, 24, 32, 48, 64, 128}, 32, ""}});
  auto mps = [&](int64_t cost, int64_t n, int64_t nnz, int64_t F) {
    return detail::validate_mergepath(mp, Schedule{"mergepath", {{"cost", cost}}}, n, nnz, F);
  };
  // F = 128: 32 float4 slots, one warp-wide group, min_threads = 8192 * 1 / 1: a graph of
  // 8192 * 5 items caps the cost at 5, so 8 and above all run cost 5 -> 8 is kept, 16.. repeat it.
  EXPECT_EQ(mps(4, 0, 8192 * 5, 128), "");
  EXPECT_EQ(mps(8, 0, 8192 * 5, 128), "");
  EXPECT_EQ(mps(16, 0, 8192 * 5, 128).rfind("same as cost=8", 0), 0u);
  EXPECT_EQ(mps(128, 1 << 20, 1 << 26, 128), "");  // a large graph keeps every cost

  const StrategyInfo sh = info_of("shuffle", {{"lanes", {0, 2, 4, 8, 16, 32}, 0, ""},
                                              {"edges_per_block", {32, 64, 128, 256, 512, 1024}, 256, ""},
                                              {"blocked", {0, 1}, 0, ""}});
  auto shs = [&](int64_t lanes, int64_t F) {
    return detail::validate_shuffle(sh, Schedule{"shuffle", {{"lanes", lanes}}}, F);
  };
  // F = 64: 16 float4 slots; adaptive picks 2^log2_ceil(8) = 8 lanes.
  EXPECT_EQ(shs(0, 64), "");
  EXPECT_EQ(shs(8, 64).rfind("same as lanes=0", 0), 0u);
  EXPECT_EQ(shs(16, 64), "");
  EXPECT_NE(shs(32, 64).find("idle"), std::string::npos);
  EXPECT_NE(shs(4, 4).find("idle"), std::string::npos);  // F = 4 is one float4 per edge
  // Halves: vectors of 8; from 8 slots on, up to four a lane and at least 4 lanes.
  auto half = [&](int64_t lanes, int64_t F) {
    return detail::validate_shuffle(sh, Schedule{"shuffle", {{"lanes", lanes}}}, F, true);
  };
  EXPECT_EQ(half(4, 64).rfind("same as lanes=0", 0), 0u);   // 8 slots: 4 lanes
  EXPECT_EQ(half(4, 128).rfind("same as lanes=0", 0), 0u);  // 16 slots: 4 lanes
  EXPECT_EQ(half(8, 256).rfind("same as lanes=0", 0), 0u);  // 32 slots: 8 lanes
  EXPECT_EQ(half(16, 256), "");
  EXPECT_EQ(half(2, 32).rfind("same as lanes=0", 0), 0u);   // 4 slots: the float32 rule, 2 lanes
  EXPECT_EQ(half(16, 36).rfind("same as lanes=0", 0), 0u);  // 18 pairs: the float32 rule
  // blocked needs more than one vector a lane
  auto blocked = [&](int64_t lanes, int64_t F) {
    return detail::validate_shuffle(sh, Schedule{"shuffle", {{"lanes", lanes}, {"blocked", 1}}}, F,
                                    true);
  };
  EXPECT_EQ(blocked(0, 128), "");
  EXPECT_EQ(blocked(0, 16).rfind("same as blocked=0", 0), 0u);   // 2 slots, 2 lanes
  EXPECT_EQ(blocked(16, 128).rfind("same as blocked=0", 0), 0u); // 16 slots, 16 lanes
}

// The CBSR products' GPU parameters (MaxK-GNN's SpGEMM and SSpMM; issue 14): the rules find the
// combinations that the launchers turn into one another, from the graph's degrees, k and F.
TEST_F(Tune, CbsrValidityRulesMirrorTheLaunchers) {
  auto rule = [](OpKind op, std::map<std::string, int64_t> p, int64_t k, int64_t F, double avg,
                 int64_t max_deg) {
    const StrategyInfo info{"gpu", op, DeviceType::cuda, "", detail::cbsr_gpu_params(op)};
    return detail::validate_cbsr(info, Schedule{"gpu", std::move(p)}, op, k, F, avg, max_deg);
  };
  const OpKind fwd = OpKind::cbsr_spgemm, bwd = OpKind::cbsr_sspmm;
  auto full = [](int64_t warps, int64_t segment, int64_t vec, int64_t pr, int64_t regs) {
    return std::map<std::string, int64_t>{{"warps", warps}, {"segment", segment}, {"vec", vec},
                                          {"private_rows", pr}, {"regs", regs}};
  };
  auto same_as = [](const std::string& why, const std::string& what) {
    return why.rfind("same as " + what + " (", 0) == 0;
  };
  // kron21-like rows (average 16, hub 1000), k = 32 of F = 256: private rows, 4 lane groups.
  EXPECT_EQ(rule(fwd, full(8, 64, 4, 1, 0), 32, 256, 16, 1000), "");
  EXPECT_EQ(rule(fwd, full(8, 64, 1, 1, 40), 32, 256, 16, 1000), "");
  EXPECT_EQ(rule(fwd, {}, 32, 256, 16, 1000), "");  // unset = the launcher's choice
  // k = 6 has no float4 lanes: vec = 4 runs vec = 2.
  EXPECT_TRUE(same_as(rule(fwd, full(8, 64, 4, 1, 0), 6, 256, 16, 1000), "vec=2"));
  EXPECT_EQ(rule(fwd, full(8, 64, 2, 1, 0), 6, 256, 16, 1000), "");
  // Rows of at most 100 edges: segments of 128 and longer split nothing.
  EXPECT_EQ(rule(fwd, full(8, 64, 4, 1, 0), 32, 256, 50, 100), "");
  EXPECT_EQ(rule(fwd, full(8, 128, 4, 1, 0), 32, 256, 50, 100), "");
  EXPECT_TRUE(same_as(rule(fwd, full(8, 4096, 4, 1, 0), 32, 256, 50, 100), "segment=128"));
  // regs applies to the private-row form only; lean blocks have at most 8 warps.
  EXPECT_TRUE(same_as(rule(fwd, full(8, 64, 4, 0, 40), 32, 256, 16, 1000), "regs=0"));
  EXPECT_TRUE(same_as(rule(fwd, full(16, 64, 4, 1, 40), 32, 256, 16, 1000), "warps=8"));
  EXPECT_EQ(rule(fwd, full(16, 64, 4, 1, 0), 32, 256, 16, 1000), "");
  // F = 8192: 4 private rows of 32 KB do not fit a block (96 KB), one shared row per warp does,
  // 3 of them: private_rows = 1 falls back, and 4, 8, 16 warps all run 3.
  EXPECT_TRUE(same_as(rule(fwd, full(2, 64, 4, 1, 0), 32, 8192, 16, 1000), "private_rows=0"));
  EXPECT_EQ(rule(fwd, full(4, 64, 4, 0, 0), 32, 8192, 16, 1000), "");
  EXPECT_TRUE(same_as(rule(fwd, full(16, 64, 4, 0, 0), 32, 8192, 16, 1000), "warps=4"));
  // The backward ignores private_rows; in its segment form lean blocks need shared-memory rows.
  EXPECT_TRUE(same_as(rule(bwd, full(8, 64, 4, 1, 0), 32, 256, 16, 1000), "private_rows=0"));
  auto with_flat = [](std::map<std::string, int64_t> p, int64_t flat) {
    p["flat"] = flat;
    return p;
  };
  auto no_smem = with_flat(full(8, 64, 4, 0, 40), 0);
  no_smem["smem_buffer"] = 0;
  EXPECT_TRUE(same_as(rule(bwd, no_smem, 32, 256, 16, 1000), "regs=0"));
  EXPECT_EQ(rule(bwd, with_flat(full(8, 64, 4, 0, 40), 0), 32, 256, 16, 1000), "");

  // The backward's flat form (edge chunks, rows read from global memory): smem_buffer changes
  // nothing, regs applies without shared rows (lean blocks still cap warps at 8), and a chunk
  // longer than every row is still its own launch.
  auto flat = [&](std::map<std::string, int64_t> p) { return with_flat(std::move(p), 1); };
  auto flat_smem = flat(full(8, 64, 4, 0, 0));
  flat_smem["smem_buffer"] = 1;
  EXPECT_TRUE(same_as(rule(bwd, flat_smem, 32, 256, 16, 1000), "smem_buffer=0"));
  flat_smem["smem_buffer"] = 0;
  EXPECT_EQ(rule(bwd, flat_smem, 32, 256, 16, 1000), "");
  EXPECT_EQ(rule(bwd, flat(full(8, 64, 4, 0, 40)), 32, 256, 16, 1000), "");
  flat_smem["regs"] = 40;
  EXPECT_EQ(rule(bwd, flat_smem, 32, 256, 16, 1000), "");
  EXPECT_TRUE(same_as(rule(bwd, flat(full(16, 64, 4, 0, 40)), 32, 256, 16, 1000), "warps=8"));
  EXPECT_EQ(rule(bwd, flat(full(16, 64, 4, 0, 0)), 32, 256, 16, 1000), "");
  EXPECT_EQ(rule(bwd, flat(full(8, 4096, 4, 0, 0)), 32, 256, 50, 100), "");
  EXPECT_TRUE(same_as(rule(bwd, with_flat(full(8, 4096, 4, 0, 0), 0), 32, 256, 50, 100),
                      "segment=128"));
  EXPECT_TRUE(same_as(rule(bwd, flat(full(8, 64, 4, 0, 0)), 6, 256, 16, 1000), "vec=2"));
  // Unset, flat follows the average degree and k: kron21-like rows take chunks (smem_buffer then
  // changes nothing), Reddit-like rows keep the segments (shared rows) above k = 16.
  EXPECT_TRUE(detail::cbsr::sspmm_flat(-1, 16.0, 64));
  EXPECT_FALSE(detail::cbsr::sspmm_flat(-1, 64.0, 32));
  EXPECT_FALSE(detail::cbsr::sspmm_flat(-1, 490.0, 32));
  EXPECT_TRUE(detail::cbsr::sspmm_flat(-1, 490.0, 16));
  EXPECT_TRUE(detail::cbsr::sspmm_flat(-1, 490.0, 8));
  EXPECT_FALSE(detail::cbsr::sspmm_flat(0, 16.0, 8));
  EXPECT_TRUE(detail::cbsr::sspmm_flat(1, 490.0, 64));
  // Unset, a chunk is 64 edges on short rows and 256 on long ones (flat there only at k <= 16).
  EXPECT_EQ(detail::cbsr::flat_chunk(16.0), 64);
  EXPECT_EQ(detail::cbsr::flat_chunk(490.0), 256);
  // A small graph's chunk halves until the grid has the warps asked for, down to 32 edges:
  // pubmed (88.6K edges) and cora (10.6K) take 32, coauthor-cs (164K) and kron21 keep 64.
  const int64_t fill = 132 * detail::cbsr::kFlatFillWarpsPerSm;
  EXPECT_EQ(detail::cbsr::flat_chunk(4.5, 88648, fill), 32);
  EXPECT_EQ(detail::cbsr::flat_chunk(3.9, 10556, fill), 32);
  EXPECT_EQ(detail::cbsr::flat_chunk(8.9, 163788, fill), 64);
  EXPECT_EQ(detail::cbsr::flat_chunk(16.0, 33554432, fill), 64);
  EXPECT_EQ(detail::cbsr::flat_chunk(490.0, 1000000, fill), 256);
  EXPECT_EQ(detail::cbsr::flat_chunk(100.0, 200000, fill), 64);
  EXPECT_TRUE(same_as(rule(bwd, {{"smem_buffer", 1}}, 32, 256, 16, 1000), "smem_buffer=0"));
  EXPECT_EQ(rule(bwd, {{"smem_buffer", 1}}, 32, 256, 490, 600), "");
  // The forward ignores flat.
  EXPECT_TRUE(same_as(rule(fwd, flat(full(8, 64, 4, 1, 0)), 32, 256, 16, 1000), "flat=0"));
  EXPECT_EQ(rule(fwd, with_flat(full(8, 64, 4, 1, 0), 0), 32, 256, 16, 1000), "");
  // stream_edges: a launch of its own in the flat form only; unset, streaming at k <= 16.
  auto streamed = [](std::map<std::string, int64_t> p, int64_t v) {
    p["stream_edges"] = v;
    return p;
  };
  EXPECT_EQ(rule(bwd, streamed(flat(full(8, 64, 4, 0, 0)), 1), 32, 256, 16, 1000), "");
  EXPECT_EQ(rule(bwd, streamed(flat(full(8, 64, 4, 0, 0)), 0), 32, 256, 16, 1000), "");
  EXPECT_TRUE(same_as(rule(bwd, streamed(with_flat(full(8, 64, 4, 0, 0), 0), 1), 32, 256, 16, 1000),
                      "stream_edges=0"));
  EXPECT_TRUE(same_as(rule(fwd, streamed(full(8, 64, 4, 1, 0), 1), 32, 256, 16, 1000),
                      "stream_edges=0"));
  // Unset is the launcher's choice, so set values compare against each other only: at k = 16
  // streaming is the default, and stream_edges=0 is still its own launch.
  EXPECT_EQ(rule(bwd, streamed(flat(full(8, 64, 4, 0, 0)), 0), 16, 256, 16, 1000), "");
  EXPECT_TRUE(detail::cbsr::flat_stream_edges(-1, 8));
  EXPECT_TRUE(detail::cbsr::flat_stream_edges(-1, 16));
  EXPECT_FALSE(detail::cbsr::flat_stream_edges(-1, 32));
  EXPECT_FALSE(detail::cbsr::flat_stream_edges(0, 8));
  EXPECT_TRUE(detail::cbsr::flat_stream_edges(1, 64));

  // The declared space: private_rows is tuned in the forward only, flat and stream_edges in the
  // backward only, smem_buffer never.
  for (OpKind op : {fwd, bwd}) {
    std::vector<tune::SpaceStrategy> strategies{{"gpu", {}}};
    std::vector<std::string> names;
    for (const auto& spec : detail::cbsr_gpu_params(op))
      if (spec.tunable) {
        strategies[0].params.push_back(spec);
        names.push_back(spec.name);
      }
    const std::vector<std::string> want =
        op == fwd ? std::vector<std::string>{"warps", "segment", "vec", "private_rows", "regs"}
                  : std::vector<std::string>{"warps", "segment", "vec", "regs", "flat",
                                             "stream_edges"};
    EXPECT_EQ(names, want);
    const tune::Space space(op, strategies, [&](const Schedule& s) {
      return detail::validate_cbsr(StrategyInfo{"gpu", op, DeviceType::cuda, "",
                                                detail::cbsr_gpu_params(op)},
                                   s, op, 32, 256, 490, 600);
    });
    EXPECT_EQ(space.size(), 5u * 12 * 3 * 2 * 2 * (op == bwd ? 2 : 1));
    EXPECT_GT(space.valid_count(), 20u);
    size_t segment_valid = 0, segment_points = 0;
    for (size_t i = 0; i < space.size(); ++i) {
      const Schedule s = space.schedule(i);
      // Reddit-like rows (490 on average, at most 600): segments from 1024 on are one; the
      // backward's chunks (flat=1) of any length are launches of their own.
      const bool chunks = op == bwd && s.params.at("flat") == 1;
      if (!chunks) ++segment_points;
      if (space.valid(i)) {
        if (!chunks) {
          ++segment_valid;
          EXPECT_LE(s.params.at("segment"), 1024);
        }
        continue;
      }
      EXPECT_EQ(space.invalid_reason(i).rfind("same as ", 0), 0u) << space.invalid_reason(i);
      EXPECT_TRUE(space.nearest_valid(i).has_value());
    }
    EXPECT_LT(segment_valid, segment_points / 2);
    if (op == bwd) {
      // Chunks: every warps x segment x vec x regs x stream_edges point but lean blocks of 16
      // warps.
      EXPECT_EQ(space.valid_count() - segment_valid, 12u * 3 * (5 + 4) * 2);
    }
  }
  // Of each group of schedules that launch alike, exactly one is valid (kron21-like rows, k
  // without float4 lanes on Reddit-like rows, rows too wide for private rows).
  for (OpKind op : {fwd, bwd})
    for (auto [k, F, avg, max_deg] : std::vector<std::tuple<int64_t, int64_t, double, int64_t>>{
             {32, 256, 16, 1000}, {6, 256, 490, 600}, {32, 8192, 16, 1000}}) {
      const StrategyInfo info{"gpu", op, DeviceType::cuda, "", detail::cbsr_gpu_params(op)};
      std::vector<tune::SpaceStrategy> strategies{{"gpu", {}}};
      for (const auto& spec : info.params)
        if (spec.tunable) strategies[0].params.push_back(spec);
      const tune::Space space(op, strategies, [&, k = k, F = F, avg = avg,
                                               max_deg = max_deg](const Schedule& s) {
        return detail::validate_cbsr(info, s, op, k, F, avg, max_deg);
      });
      std::map<std::string, size_t> valid_per_launch;
      for (size_t i = 0; i < space.size(); ++i)
        valid_per_launch[detail::cbsr_launch_str(space.schedule(i), op, k, F, avg, max_deg)] +=
            space.valid(i);
      for (const auto& [launch, valid] : valid_per_launch)
        EXPECT_EQ(valid, 1u) << op_kind_name(op) << " k=" << k << " F=" << F << ": " << launch;
    }
}

// ---- search core (synthetic landscapes, no timing) ---------------------------------------------

// Strategy "a": x, y in 0..7 and z in 0..3 (256 points, defaults 0, 0, 0), invalid where
// x + y > 12; strategy "b": p in 0..5 (p = 5 invalid). Optimum: a(x=5, y=6, z=2) at 1 ms.
tune::Space synthetic_space() {
  std::vector<int64_t> eight{0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<tune::SpaceStrategy> s{
      {"a", {{"x", eight, 0, ""}, {"y", eight, 0, ""}, {"z", {0, 1, 2, 3}, 0, ""}}},
      {"b", {{"p", {0, 1, 2, 3, 4, 5}, 0, ""}}}};
  return tune::Space(OpKind::spmm, s, [](const Schedule& sc) -> std::string {
    if (sc.strategy == "a" && sc.params.at("x") + sc.params.at("y") > 12) return "x + y > 12";
    if (sc.strategy == "b" && sc.params.at("p") == 5) return "p = 5";
    return "";
  });
}

double synthetic_ms(const Schedule& s) {
  if (s.strategy == "b") return 3.0 + 0.1 * double(s.params.at("p"));
  const double dx = double(s.params.at("x") - 5), dy = double(s.params.at("y") - 6),
               dz = double(s.params.at("z") - 2);
  return 1.0 + 0.05 * (dx * dx + dy * dy) + 0.1 * dz * dz;
}

// A cost model that is right about the shape but wrong about where the minimum is: it puts the
// optimum at x=4, y=4, z=2, three steps from the truth, which its top 16 does not contain.
tune::ScoreFn shifted_model(const tune::Space& space) {
  return [&space](size_t i) {
    const Schedule s = space.schedule(i);
    if (s.strategy == "b") return 3.0;
    const double dx = double(s.params.at("x") - 4), dy = double(s.params.at("y") - 4),
                 dz = double(s.params.at("z") - 2);
    return 1.0 + 0.05 * (dx * dx + dy * dy) + 0.1 * dz * dz;
  };
}

struct Counting {
  const tune::Space* space;
  std::map<std::string, int> calls;
  std::vector<std::string> order;
  double operator()(const Schedule& s) {
    ++calls[s.str()];
    order.push_back(s.str());
    const auto at = space->find(s);
    EXPECT_TRUE(at.has_value()) << s.str();
    if (at) {
      EXPECT_TRUE(space->valid(*at)) << "timed an invalid point: " << s.str();
    }
    return synthetic_ms(s);
  }
};

TEST_F(Tune, RankingPriorPutsDefaultsFirstThenNeighbours) {
  const tune::Space space = synthetic_space();
  const auto rank = tune::rank_space(space, nullptr);
  ASSERT_EQ(rank.size(), space.valid_count());
  EXPECT_EQ(rank[0], space.default_index(0));
  EXPECT_EQ(rank[1], space.default_index(1));
  for (size_t k = 1; k < rank.size(); ++k)
    EXPECT_LE(space.distance_from_default(rank[k - 1]), space.distance_from_default(rank[k]));
  // With a score, the order follows it (ties in index order).
  const auto by_model = tune::rank_space(space, shifted_model(space));
  EXPECT_EQ(space.schedule(by_model[0]).str(), "a(x=4,y=4,z=2)");
}

TEST_F(Tune, NearestValidPrefersFewestChangedParameters) {
  const tune::Space space = synthetic_space();
  // a(x=7, y=7, z=3) is invalid; one changed parameter suffices (y=5: x + y = 12), and among
  // those the smallest move wins.
  const size_t bad = *space.find(Schedule{"a", {{"x", 7}, {"y", 7}, {"z", 3}}});
  ASSERT_FALSE(space.valid(bad));
  const auto near = space.nearest_valid(bad);
  ASSERT_TRUE(near.has_value());
  EXPECT_EQ(space.schedule(*near).str(), "a(x=5,y=7,z=3)");
  const size_t bad_b = *space.find(Schedule{"b", {{"p", 5}}});
  EXPECT_EQ(space.schedule(*space.nearest_valid(bad_b)).str(), "b(p=4)");
}

TEST_F(Tune, GeneticFindsTheOptimumTimesEachPointOnceAndOnlyValidOnes) {
  const tune::Space space = synthetic_space();
  const tune::ScoreFn model = shifted_model(space);
  const auto rank = tune::rank_space(space, model);
  for (size_t k = 0; k < 16; ++k) ASSERT_NE(space.schedule(rank[k]).str(), "a(x=5,y=6,z=2)");
  int found = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Counting c{&space, {}, {}};
    tune::SearchOptions o;
    o.seed = seed;
    o.max_measurements = 60;
    const auto out = tune::run_search(space, std::ref(c), model, o);
    ASSERT_GE(out.best, 0);
    for (const auto& [s, n] : c.calls) EXPECT_EQ(n, 1) << s << " timed " << n << " times";
    // Population 16, then 3 generations of 10 children at most.
    EXPECT_LE(out.candidates.size(), 16u + 3 * 10);
    EXPECT_GT(out.candidates.size(), 16u);  // the generations found new points to time
    EXPECT_FALSE(out.budget_exhausted);
    const double best = out.candidates[size_t(out.best)].ms;
    for (const auto& cand : out.candidates) EXPECT_GE(cand.ms, best);
    found += best == 1.0;
    EXPECT_LE(best, 1.0 + 0.05 * 2 + 1e-12) << "seed " << seed;  // within one step of it
  }
  // Deterministic per seed; 6 of these 8 reach it (3 generations are few for 3 steps).
  EXPECT_GE(found, 5) << "the genetic search reached the optimum for only " << found << "/8 seeds";
}

TEST_F(Tune, GeneticIsDeterministicForASeed) {
  const tune::Space space = synthetic_space();
  auto run = [&](uint64_t seed) {
    Counting c{&space, {}, {}};
    tune::SearchOptions o;
    o.seed = seed;
    tune::run_search(space, std::ref(c), nullptr, o);
    return c.order;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST_F(Tune, GeneticReplacesInvalidChildren) {
  // Nearly everything of "a" is invalid except a thin diagonal: most crossovers and mutations
  // land outside it and must be mapped back (Counting fails the test on any invalid timing).
  std::vector<int64_t> eight{0, 1, 2, 3, 4, 5, 6, 7};
  const tune::Space space(
      OpKind::spmm, {{"a", {{"x", eight, 0, ""}, {"y", eight, 0, ""}, {"z", {0, 1, 2, 3}, 0, ""}}}},
      [](const Schedule& s) {
        return std::abs(s.params.at("x") - s.params.at("y")) <= 1 ? "" : "off the diagonal";
      });
  Counting c{&space, {}, {}};
  tune::SearchOptions o;
  o.seed = 3;
  const auto out = tune::run_search(space, std::ref(c), nullptr, o);
  EXPECT_GT(out.candidates.size(), 16u);
  for (const auto& [s, n] : c.calls) EXPECT_EQ(n, 1) << s;
}

TEST_F(Tune, BudgetsStopEarlyAndKeepTheBest) {
  const tune::Space space = synthetic_space();
  {
    Counting c{&space, {}, {}};
    tune::SearchOptions o;
    o.max_measurements = 10;
    const auto out = tune::run_search(space, std::ref(c), nullptr, o);
    EXPECT_EQ(out.candidates.size(), 10u);
    EXPECT_TRUE(out.budget_exhausted);
    ASSERT_GE(out.best, 0);
  }
  {
    tune::SearchOptions o;
    o.mode = TuneMode::exhaustive;
    o.budget_s = 0.05;
    size_t timed = 0;
    const auto out = tune::run_search(space, [&](const Schedule& s) {
      ++timed;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return synthetic_ms(s);
    }, nullptr, o);
    EXPECT_TRUE(out.budget_exhausted);
    EXPECT_LT(timed, space.valid_count());
    EXPECT_GE(timed, 1u);
    double best = INFINITY;
    for (const auto& cand : out.candidates) best = std::min(best, cand.ms);
    EXPECT_EQ(out.candidates[size_t(out.best)].ms, best);
  }
}

TEST_F(Tune, FailingCandidatesAreRecordedNotFatal) {
  const tune::Space space = synthetic_space();
  tune::SearchOptions o;
  o.mode = TuneMode::exhaustive;
  const auto out = tune::run_search(space, [](const Schedule& s) -> double {
    if (s.strategy == "a" && s.params.at("z") == 2) throw Unsupported("z=2 cannot run here");
    return synthetic_ms(s);
  }, nullptr, o);
  EXPECT_EQ(out.candidates.size(), space.valid_count());
  size_t failed = 0;
  for (const auto& c : out.candidates)
    if (!std::isfinite(c.ms)) {
      ++failed;
      EXPECT_NE(c.error.find("cannot run"), std::string::npos);
    }
  EXPECT_GT(failed, 0u);
  ASSERT_GE(out.best, 0);
  // The optimum failed; the best of the rest has z = 1 or 3 at x=5, y=6.
  EXPECT_DOUBLE_EQ(out.candidates[size_t(out.best)].ms, 1.1);
}

TEST_F(Tune, RandomModeTimesBaselinesPlusThreeOfThePrunedSpace) {
  const tune::Space space = synthetic_space();
  const tune::ScoreFn model = shifted_model(space);
  const auto rank = tune::rank_space(space, model);
  const std::set<size_t> pool(rank.begin(), rank.begin() + 16);
  Counting c{&space, {}, {}};
  tune::SearchOptions o;
  o.mode = TuneMode::random;
  o.seed = 5;
  o.baselines = {Schedule{"b", {{"p", 0}}}};
  const auto out = tune::run_search(space, std::ref(c), model, o);
  ASSERT_EQ(out.candidates.size(), 4u);
  EXPECT_TRUE(out.candidates[0].baseline);
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_FALSE(out.candidates[k].baseline);
    EXPECT_TRUE(pool.count(*space.find(out.candidates[k].schedule))) << out.candidates[k].schedule.str();
  }
}

TEST_F(Tune, ExhaustiveTimesEveryValidPointOnce) {
  const tune::Space space = synthetic_space();
  Counting c{&space, {}, {}};
  tune::SearchOptions o;
  o.mode = TuneMode::exhaustive;
  const auto out = tune::run_search(space, std::ref(c), nullptr, o);
  EXPECT_EQ(out.candidates.size(), space.valid_count());
  EXPECT_EQ(c.calls.size(), space.valid_count());
  EXPECT_EQ(out.candidates[size_t(out.best)].schedule.str(), "a(x=5,y=6,z=2)");
}

// ---- fingerprint and keys ------------------------------------------------------------------------

TEST_F(Tune, FingerprintIsStableAcrossCopiesAndSeesOneChangedEdge) {
  const Graph g = test::random_graph(test::GraphKind::rmat, 500, seed_for(2));
  const GraphFingerprint a = graph_fingerprint(g);
  EXPECT_EQ(graph_fingerprint(g).str(), a.str());          // cached
  EXPECT_EQ(graph_fingerprint(g.to(Device::cpu())).str(), a.str());  // deep copy, fresh cache
  EXPECT_EQ(a.n_rows, g.n_rows);
  EXPECT_EQ(a.nnz, g.nnz());

  std::vector<int64_t> row = g.row.astype(DType::i64).to_vector<int64_t>();
  std::vector<int64_t> col = g.col.astype(DType::i64).to_vector<int64_t>();
  const Graph rebuilt = graph_from_edges(g.n_rows, g.n_cols, row, col);
  EXPECT_EQ(graph_fingerprint(rebuilt).hash, a.hash);
  // Re-point one edge within its row (rowptr unchanged): the column sample sees it.
  const size_t k = col.size() / 2;
  std::vector<int64_t> col2 = col;
  std::set<int64_t> in_row;
  for (size_t e = 0; e < row.size(); ++e)
    if (row[e] == row[k]) in_row.insert(col[e]);
  for (int64_t c = 0; c < g.n_cols; ++c)
    if (!in_row.count(c)) {
      col2[k] = c;
      break;
    }
  ASSERT_NE(col2[k], col[k]);
  EXPECT_NE(graph_fingerprint(graph_from_edges(g.n_rows, g.n_cols, row, col2)).hash, a.hash);
  // Move one edge to another row (rowptr changes).
  std::vector<int64_t> row2 = row;
  row2[k] = (row[k] + 1) % g.n_rows;
  EXPECT_NE(graph_fingerprint(graph_from_edges(g.n_rows, g.n_cols, row2, col)).hash, a.hash);
  // The index width is part of the fingerprint.
  EXPECT_NE(graph_fingerprint(test::with_index(g, DType::i64)).str(), a.str());
}

TEST_F(Tune, KeyIncludesOpSubOpWidthDtypesGraphDeviceAndVersion) {
  const Graph g = rmat_graph(8, 4, seed_for(3));
  const Graph h = rmat_graph(8, 4, seed_for(3) + 1);
  const std::string k = spmm_tuning_key(g, SpmmOp::u_mul_e, Reduce::sum, 32);
  EXPECT_NE(k.find(graph_fingerprint(g).str()), std::string::npos) << k;
  EXPECT_NE(k.find(tuning_device_name(Device::cpu())), std::string::npos) << k;
  EXPECT_NE(k.find(std::string("|v") + spgnn_version()), std::string::npos) << k;
  EXPECT_NE(k.find("F=32"), std::string::npos) << k;
  EXPECT_NE(k.find("f32/"), std::string::npos) << k;
  EXPECT_EQ(tuning_device_name(Device::cpu()).rfind("cpu:", 0), 0u);
  const std::set<std::string> keys{
      k,
      spmm_tuning_key(g, SpmmOp::u_mul_e, Reduce::sum, 64),
      spmm_tuning_key(g, SpmmOp::u_mul_e, Reduce::mean, 32),
      spmm_tuning_key(g, SpmmOp::copy_u, Reduce::sum, 32),
      spmm_tuning_key(g, SpmmOp::u_mul_e, Reduce::sum, 32, /*wide_e=*/true),
      spmm_tuning_key(h, SpmmOp::u_mul_e, Reduce::sum, 32),
      spmm_tuning_key(test::with_index(g, DType::i64), SpmmOp::u_mul_e, Reduce::sum, 32),
      sddmm_tuning_key(g, SddmmOp::dot, Target::u, Target::v, 32),
      sddmm_tuning_key(g, SddmmOp::add, Target::u, Target::v, 32),
      sddmm_tuning_key(g, SddmmOp::sub, Target::u, Target::e, 32),
  };
  EXPECT_EQ(keys.size(), 10u);
  // Symmetric ops share an entry for swapped targets; sub does not.
  EXPECT_EQ(sddmm_tuning_key(g, SddmmOp::dot, Target::v, Target::u, 32),
            sddmm_tuning_key(g, SddmmOp::dot, Target::u, Target::v, 32));
  EXPECT_NE(sddmm_tuning_key(g, SddmmOp::sub, Target::v, Target::u, 32),
            sddmm_tuning_key(g, SddmmOp::sub, Target::u, Target::v, 32));
}

// ---- cache files ---------------------------------------------------------------------------------

TuningCacheEntry sample_entry(const std::string& key) {
  TuningCacheEntry e;
  e.key = key;
  e.schedule = Schedule{"cpu_mergepath", {{"row_cost", 4}, {"chunks_per_thread", 8}}};
  e.ms = 0.25;
  e.op = "spmm";
  e.sub_op = "u_mul_e/sum/e=1";
  e.device = tuning_device_name(Device::cpu());
  e.mode = "genetic";
  e.F = 32;
  e.graph.n_rows = e.graph.n_cols = 10;
  e.graph.nnz = 20;
  e.graph.index_dtype = "int32";
  e.graph.hash = 0x0123456789abcdefULL;
  e.space_size = 16;
  e.measured = 17;
  e.tune_seconds = 1.5;
  return e;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& f : fs::directory_iterator(dir)) out.push_back(f.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(Tune, CacheRoundTripIsAtomicAndHumanReadable) {
  const std::string dir = path("sub/dir/");  // created on the first store
  tuning_cache_store(sample_entry("k1"), dir);
  tuning_cache_store(sample_entry("k2"), dir);
  EXPECT_EQ(files_in(dir_ / "sub" / "dir"), std::vector<std::string>{"tuning.json"});
  // A second spelling of the path is a separate in-memory view: it reads the file from disk.
  const auto e = tuning_cache_lookup("k1", path("sub/dir/./tuning.json"));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->schedule.str(), sample_entry("k1").schedule.str());
  EXPECT_EQ(e->ms, 0.25);
  EXPECT_EQ(e->graph.str(), sample_entry("k1").graph.str());
  EXPECT_EQ(e->version, spgnn_version());
  EXPECT_EQ(tuning_cache_entries(path("sub/dir/./tuning.json")).size(), 2u);
  EXPECT_FALSE(tuning_cache_lookup("k3", dir).has_value());
  std::ifstream in(path("sub/dir/tuning.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("\n  \"entries\""), std::string::npos);  // indented
  const json doc = json::parse(ss.str());
  EXPECT_EQ(doc["spgnn_version"], spgnn_version());
  EXPECT_EQ(doc["entries"]["k2"]["schedule_text"], "cpu_mergepath(chunks_per_thread=8,row_cost=4)");
  tuning_cache_clear(dir);
  EXPECT_FALSE(tuning_cache_lookup("k1", dir).has_value());
  EXPECT_FALSE(fs::exists(path("sub/dir/tuning.json")));
}

void expect_ignored_with_one_warning(const std::string& file, const std::string& content,
                                     const std::string& why) {
  {
    std::ofstream out(file);
    out << content;
  }
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(tuning_cache_lookup("k1", file).has_value());
  EXPECT_TRUE(tuning_cache_entries(file).empty());
  tuning_cache_store(sample_entry("k9"), file);  // overwrites the bad file
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: ignoring " + file), std::string::npos) << err;
  EXPECT_NE(err.find(why), std::string::npos) << err;
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos)
      << "more than one warning: " << err;
  const json doc = json::parse(std::ifstream(file));
  EXPECT_EQ(doc["entries"].size(), 1u);
  EXPECT_TRUE(doc["entries"].contains("k9"));
}

TEST_F(Tune, CorruptForeignOrMistypedFilesAreIgnoredWithOneWarning) {
  expect_ignored_with_one_warning(path("corrupt.json"), "{\"schema\": \"spgnn-tuning-c", "not valid JSON");
  json foreign = tune::new_document("spgnn-tuning-cache");
  foreign["spgnn_version"] = "0.0.1-other";
  foreign["entries"] = json::object();
  expect_ignored_with_one_warning(path("foreign.json"), foreign.dump(), "written by spgnn");
  json schema = foreign;
  schema["spgnn_version"] = spgnn_version();
  schema["schema"] = "something-else";
  expect_ignored_with_one_warning(path("schema.json"), schema.dump(), "not a spgnn-tuning-cache");
  json types = tune::new_document("spgnn-tuning-cache");
  types["entries"] = {{"k1", {{"op", "spmm"}, {"F", "thirty-two"}}}};
  expect_ignored_with_one_warning(path("types.json"), types.dump(), "wrong entry types");
  json not_object = tune::new_document("spgnn-tuning-cache");
  not_object["entries"] = json::array({1, 2});
  expect_ignored_with_one_warning(path("array.json"), not_object.dump(), "wrong entry types");
}

TEST_F(Tune, DefaultPathFollowsTheEnvironment) {
  const char* old = std::getenv("SPGNN_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("SPGNN_CACHE_DIR", path("envdir").c_str(), 1);
  EXPECT_EQ(tuning_cache_path(), path("envdir/tuning.json"));
  set_tuning_cache_path(path("api.json"));
  EXPECT_EQ(tuning_cache_path(), path("api.json"));
  set_tuning_cache_path(dir_.string());  // an existing directory
  EXPECT_EQ(tuning_cache_path(), path("tuning.json"));
  set_tuning_cache_path("");
  unsetenv("SPGNN_CACHE_DIR");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (!xdg) EXPECT_NE(tuning_cache_path().find(".cache/spgnn/tuning.json"), std::string::npos);
  else EXPECT_EQ(tuning_cache_path(), std::string(xdg) + "/spgnn/tuning.json");
  if (old) setenv("SPGNN_CACHE_DIR", saved.c_str(), 1);
}

// ---- the tuner on real CPU runs and `auto` ---------------------------------------------------------

TEST_F(Tune, TuneSpmmOnTheCpuStoresResultAndMeasurements) {
  const Graph g = rmat_graph(9, 4, seed_for(4));
  TuneOptions o;
  o.mode = TuneMode::exhaustive;
  o.cache_path = dir_.string();
  o.reps = 2;
  size_t progress_calls = 0;
  o.progress = [&](const TuneProgress& p) {
    ++progress_calls;
    EXPECT_LE(p.measured, p.planned);
  };
  const TuneResult r = tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 8, o);
  const TuneSpace sp = spmm_tune_space(g, SpmmOp::u_mul_e, Reduce::sum, 8);
  EXPECT_EQ(r.space_size, sp.size);
  EXPECT_EQ(r.valid_size, sp.valid);
  // cpu_mergepath() as the baseline (= the heuristic), then every valid point.
  EXPECT_EQ(r.candidates.size(), 1 + sp.valid);
  EXPECT_EQ(progress_calls, r.candidates.size());
  EXPECT_EQ(r.heuristic.str(), "cpu_mergepath");
  EXPECT_TRUE(std::isfinite(r.best_ms));
  EXPECT_GT(r.best_ms, 0);
  for (const auto& c : r.candidates) EXPECT_GE(c.ms, r.best_ms) << c.schedule.str();
  EXPECT_TRUE(r.stored);
  EXPECT_FALSE(r.model_used);
  const auto e = tuning_cache_lookup(r.key, o.cache_path);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->schedule.str(), r.best.str());
  EXPECT_EQ(e->mode, "exhaustive");
  // Only fully specified schedules are training data (the baseline leaves parameters unset).
  EXPECT_EQ(tune::load_measurements(tune::resolve_cache_file(o.cache_path)).size(), sp.valid);
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"measurements.json", "tuning.json"}));

  o.reuse_cached = true;
  const TuneResult again = tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 8, o);
  EXPECT_TRUE(again.from_cache);
  EXPECT_TRUE(again.candidates.empty());
  EXPECT_EQ(again.best.str(), r.best.str());

  const TuneResult sd = tune_sddmm(g, SddmmOp::dot, Target::v, Target::u, 8, o);
  EXPECT_EQ(sd.best.strategy, "cpu_edge");

  EXPECT_THROW(tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 0, o), InvalidArgument);
  TuneOptions bad = o;
  bad.top_k = 3;
  EXPECT_THROW(tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 8, bad), InvalidArgument);
  bad = o;
  bad.budget_s = -1;
  EXPECT_THROW(tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 8, bad), InvalidArgument);
  bad = o;
  bad.min_timed_ms = -1;
  EXPECT_THROW(tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 8, bad), InvalidArgument);
  EXPECT_THROW(parse_tune_mode("annealing"), InvalidArgument);
}

// Half features (issue 12: "the tuner keys on the dtype"): each dtype has its own entry, float32
// keys keep their form, no cost model ranks a half problem and no half timing trains one.
TEST_F(Tune, HalfDtypesHaveTheirOwnEntriesAndTrainNoModel) {
  const Graph g = rmat_graph(9, 4, seed_for(41));
  TuneOptions o;
  o.cache_path = dir_.string();
  o.reps = 2;
  o.mode = TuneMode::random;
  const std::string file = tune::resolve_cache_file(o.cache_path);
  const TuneResult f = tune_sddmm(g, SddmmOp::dot, Target::v, Target::u, 8, o);
  EXPECT_EQ(f.key, sddmm_tuning_key(g, SddmmOp::dot, Target::v, Target::u, 8));
  EXPECT_NE(f.key.find("|f32/"), std::string::npos) << f.key;
  const size_t measured = tune::load_measurements(file).size();
  EXPECT_GT(measured, 0u);
  std::set<std::string> keys{f.key};
  for (DType h : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(h));
    o.dtype = h;
    const std::string tag = h == DType::bf16 ? "|bf16/" : "|f16/";
    const TuneResult r = tune_sddmm(g, SddmmOp::dot, Target::v, Target::u, 8, o);
    EXPECT_TRUE(r.stored);
    EXPECT_FALSE(r.model_used);
    EXPECT_TRUE(std::isfinite(r.best_ms));
    EXPECT_NE(r.key.find(tag), std::string::npos) << r.key;
    EXPECT_EQ(r.key, sddmm_tuning_key(g, SddmmOp::dot, Target::v, Target::u, 8, h));
    ASSERT_TRUE(tuning_cache_lookup(r.key, o.cache_path).has_value());
    EXPECT_EQ(tuning_cache_lookup(r.key, o.cache_path)->schedule.str(), r.best.str());
    keys.insert(r.key);
    for (bool wide : {false, true}) {
      o.wide_e = wide;
      const TuneResult m = tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 8, o);
      EXPECT_EQ(m.key, spmm_tuning_key(g, SpmmOp::u_mul_e, Reduce::sum, 8, wide, h));
      EXPECT_TRUE(std::isfinite(m.best_ms));
      keys.insert(m.key);
    }
    o.wide_e = false;
    const TuneSpace sp = sddmm_tune_space(g, SddmmOp::dot, Target::v, Target::u, 8, h);
    EXPECT_EQ(r.space_size, sp.size);
  }
  EXPECT_EQ(keys.size(), 7u);
  EXPECT_EQ(tune::load_measurements(file).size(), measured);  // half timings train nothing

  TuneOptions bad = o;
  bad.dtype = DType::i32;
  EXPECT_THROW(tune_spmm(g, SpmmOp::u_mul_e, Reduce::sum, 8, bad), InvalidArgument);
  bad.dtype = DType::f64;
  EXPECT_THROW(tune_sddmm(g, SddmmOp::dot, Target::v, Target::u, 8, bad), InvalidArgument);
  bad.dtype = DType::bf16;  // the CBSR products are tuned in float32 only
  EXPECT_THROW(tune_cbsr(g, OpKind::cbsr_spgemm, 4, 16, true, bad), InvalidArgument);
  EXPECT_THROW(spmm_tuning_key(g, SpmmOp::u_mul_e, Reduce::sum, 8, false, DType::i64),
               InvalidArgument);
  EXPECT_THROW(sddmm_tune_space(g, SddmmOp::dot, Target::v, Target::u, 8, DType::u8),
               InvalidArgument);
}

// The CBSR products tune like SpMM: on the CPU the space is the one OpenMP kernel, the result is
// stored under its own key (op, k, weighted, F), no timing trains a cost model, and `auto` of
// the op runs what the cache holds.
TEST_F(Tune, TuneCbsrOnTheCpuStoresAndAutoRunsTheEntry) {
  const Graph g = rmat_graph(9, 4, seed_for(31));
  TuneOptions o;
  o.cache_path = dir_.string();
  o.reps = 2;
  for (OpKind op : {OpKind::cbsr_spgemm, OpKind::cbsr_sspmm}) {
    const TuneResult r = tune_cbsr(g, op, 4, 16, true, o);
    EXPECT_EQ(r.best.str(), "cpu");
    EXPECT_EQ(r.heuristic.str(), "cpu");
    EXPECT_TRUE(r.stored);
    EXPECT_EQ(r.space_size, 1u);
    EXPECT_EQ(r.key.rfind(std::string(op_kind_name(op)) + "|k=4/e|F=16|f32/", 0), 0u) << r.key;
    EXPECT_EQ(r.key, cbsr_tuning_key(g, op, 4, 16, true));
    const TuneSpace sp = cbsr_tune_space(g, op, 4, 16, true);
    ASSERT_EQ(sp.strategies.size(), 1u);
    EXPECT_EQ(sp.strategies[0].strategy, "cpu");
  }
  EXPECT_NE(cbsr_tuning_key(g, OpKind::cbsr_spgemm, 4, 16, false),
            cbsr_tuning_key(g, OpKind::cbsr_spgemm, 4, 16, true));
  EXPECT_NE(cbsr_tuning_key(g, OpKind::cbsr_spgemm, 8, 16, true),
            cbsr_tuning_key(g, OpKind::cbsr_spgemm, 4, 16, true));
  EXPECT_EQ(tune::load_measurements(tune::resolve_cache_file(o.cache_path)).size(), 0u);
  EXPECT_EQ(tuning_cache_entries(tune::resolve_cache_file(o.cache_path)).size(), 2u);
  EXPECT_THROW(tune_cbsr(g, OpKind::cbsr_spgemm, 0, 16, true, o), InvalidArgument);
  EXPECT_THROW(tune_cbsr(g, OpKind::cbsr_spgemm, 17, 16, true, o), InvalidArgument);
  EXPECT_THROW(tune_cbsr(g, OpKind::spmm, 4, 16, true, o), InvalidArgument);
  EXPECT_THROW(cbsr_tune_space(g, OpKind::sddmm, 4, 16, true), InvalidArgument);

  // `auto` follows an entry: cpu_ref (float64 accumulation) is told apart from cpu by its bits.
  set_tuning_cache_path(dir_.string());
  const Cbsr x = maxk(test::random_tensor({g.n_cols, 16}, seed_for(32)), 4);
  const Tensor e = test::random_tensor({g.nnz()}, seed_for(33), 0.5f, 1.5f);
  Tensor with_cpu, with_ref, with_auto;
  OpOptions cpu, ref;
  cpu.schedule.strategy = "cpu";
  ref.schedule.strategy = "cpu_ref";
  cbsr_spgemm(g, x, e, with_cpu, cpu);
  cbsr_spgemm(g, x, e, with_ref, ref);
  ASSERT_NE(with_cpu.to_vector<float>(), with_ref.to_vector<float>());
  cbsr_spgemm(g, x, e, with_auto);
  EXPECT_EQ(with_auto.to_vector<float>(), with_cpu.to_vector<float>());
  TuningCacheEntry entry = sample_entry(cbsr_tuning_key(g, OpKind::cbsr_spgemm, 4, 16, true));
  entry.schedule = Schedule{"cpu_ref", {}};
  tuning_cache_store(entry);
  cbsr_spgemm(g, x, e, with_auto);
  EXPECT_EQ(with_auto.to_vector<float>(), with_ref.to_vector<float>());
  // Without edge values it is another problem, and an entry that does not validate is skipped.
  ASSERT_FALSE(g.has_values());
  Tensor unweighted_cpu;
  cbsr_spgemm(g, x, Tensor(), unweighted_cpu, cpu);
  cbsr_spgemm(g, x, Tensor(), with_auto);
  EXPECT_EQ(with_auto.to_vector<float>(), unweighted_cpu.to_vector<float>());
  entry.schedule = Schedule{"cpu", {{"warps", 4}}};
  tuning_cache_store(entry);
  cbsr_spgemm(g, x, e, with_auto);
  EXPECT_EQ(with_auto.to_vector<float>(), with_cpu.to_vector<float>());
}

TEST_F(Tune, AutoUsesAValidCachedScheduleAndFallsBackOtherwise) {
  const Graph g = rmat_graph(9, 4, seed_for(5));
  const int64_t F = 12;
  set_tuning_cache_path(dir_.string());
  const Schedule heuristic = resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{});
  EXPECT_EQ(heuristic.str(), "cpu_mergepath");

  TuningCacheEntry e = sample_entry(spmm_tuning_key(g, SpmmOp::u_mul_e, Reduce::sum, F));
  tuning_cache_store(e);
  EXPECT_EQ(resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{}).str(),
            e.schedule.str());
  // Other widths and ops are not affected.
  EXPECT_EQ(resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, F + 1, Schedule{}).str(),
            heuristic.str());
  // And the op computes the right thing with it.
  const Tensor u = test::random_tensor({g.n_cols, F}, seed_for(6));
  const Tensor w = test::random_tensor({g.nnz(), 1}, seed_for(7), 0.5f, 1.5f);
  Tensor out, ref;
  gspmm(g, SpmmOp::u_mul_e, Reduce::sum, u, w, out);
  OpOptions ro;
  ro.schedule.strategy = "cpu_ref";
  gspmm(g, SpmmOp::u_mul_e, Reduce::sum, u, w, ref, ro);
  EXPECT_LT(test::rel_error(out, ref), 1e-5);

  setenv("SPGNN_TUNING_CACHE", "off", 1);
  EXPECT_EQ(resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{}).str(),
            heuristic.str());
  unsetenv("SPGNN_TUNING_CACHE");

  // Entries that no longer validate fall back to the heuristic: an unknown strategy, a value
  // outside the legal set, a combination the validity rules exclude on this graph.
  for (const Schedule& bad : {Schedule{"no_such_strategy", {}},
                              Schedule{"cpu_mergepath", {{"row_cost", 3}}},
                              Schedule{"cpu_mergepath", {{"no_such_param", 1}}},
                              Schedule{"auto", {}}}) {
    e.schedule = bad;
    tuning_cache_store(e);
    EXPECT_EQ(resolve_spmm_schedule(g, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{}).str(),
              heuristic.str())
        << bad.str();
  }
  const Graph tiny = graph_from_edges(4, 4, {0, 1, 2}, {1, 2, 3});
  TuningCacheEntry t = sample_entry(spmm_tuning_key(tiny, SpmmOp::u_mul_e, Reduce::sum, F));
  t.schedule = Schedule{"cpu_mergepath", {{"row_cost", 1}, {"chunks_per_thread", 8}}};
  ASSERT_NE(detail::validate_cpu_mergepath(find_strategy(OpKind::spmm, "cpu_mergepath"),
                                           t.schedule, 4, 3, std::max(1, omp_get_max_threads())),
            "");
  tuning_cache_store(t);
  EXPECT_EQ(resolve_spmm_schedule(tiny, SpmmOp::u_mul_e, Reduce::sum, F, Schedule{}).str(),
            "cpu_mergepath");
}

TEST_F(Tune, TuneOnMissTunesOnceStoresAndUses) {
  const Graph g = rmat_graph(8, 4, seed_for(8));
  set_tuning_cache_path(dir_.string());
  TuneOptions o;
  o.reps = 2;
  set_tune_on_miss(true, o);
  EXPECT_TRUE(tune_on_miss());
  const std::string key = sddmm_tuning_key(g, SddmmOp::dot, Target::u, Target::v, 16);
  const std::string skey = spmm_tuning_key(g, SpmmOp::copy_u, Reduce::sum, 16);
  EXPECT_FALSE(tuning_cache_lookup(skey).has_value());
  const Schedule s = resolve_spmm_schedule(g, SpmmOp::copy_u, Reduce::sum, 16, Schedule{});
  const auto e = tuning_cache_lookup(skey);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->schedule.str(), s.str());
  EXPECT_EQ(s.strategy, "cpu_mergepath");
  // The op itself (auto) now runs the tuned schedule; sddmm tunes on its first call too.
  const Tensor lhs = test::random_tensor({g.n_rows, 16}, seed_for(9));
  const Tensor rhs = test::random_tensor({g.n_cols, 16}, seed_for(10));
  Tensor out;
  gsddmm(g, SddmmOp::dot, lhs, rhs, out, Target::v, Target::u);
  EXPECT_TRUE(tuning_cache_lookup(key).has_value());
  set_tune_on_miss(false);
  EXPECT_FALSE(tune_on_miss());
}

// ---- spgnn tune end to end --------------------------------------------------------------------------

TEST_F(Tune, CliTunesListsShowsAndRejectsBadFlags) {
  const std::string cache = " --cache " + dir_.string();
  auto r = run_cli("tune --graph rmat:9:4:1 --op spmm --dim 8 --dim 20 --device cpu --reps 2"
                   " --format json" + cache);
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& c : j) {
    EXPECT_EQ(c["graph"], "rmat:9:4:1");
    EXPECT_EQ(c["best_fixed"]["strategy"], "cpu_mergepath");
    EXPECT_EQ(c["baseline"]["strategy"], "cpu_mergepath");
    EXPECT_GT(c["best"]["ms"].get<double>(), 0);
    EXPECT_GE(c["speedup_vs_fixed"].get<double>(), 1.0);  // the fixed strategy was a candidate
    EXPECT_TRUE(c["stored"].get<bool>());
    EXPECT_EQ(c["space_size"], 16);
    EXPECT_GE(c["measured"].get<size_t>(), 2u);
  }
  auto show = run_cli("tune --show-cache --format json" + cache);
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_EQ(json::parse(show.out)["entries"].size(), 2u);

  auto table = run_cli("tune -g rmat:8:4:1 --op sddmm --dim 8 --device cpu --reps 1 --mode random"
                       " --no-store" + cache);
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("cpu_edge"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tuned vs cpu_edge"), std::string::npos) << table.out;
  EXPECT_EQ(json::parse(run_cli("tune --show-cache --format json" + cache).out)["entries"].size(), 2u);

  auto half = run_cli("tune -g rmat:8:4:1 --op sddmm --dim 8 --device cpu --reps 1 --mode random"
                      " --dtype bf16 --format json" + cache);
  ASSERT_EQ(half.code, 0) << half.out;
  EXPECT_EQ(json::parse(half.out)[0]["dtype"], "bf16");
  EXPECT_NE(json::parse(half.out)[0]["key"].get<std::string>().find("|bf16/"), std::string::npos);
  EXPECT_EQ(json::parse(run_cli("tune --show-cache --format json" + cache).out)["entries"].size(), 3u);

  auto f64 = run_cli("tune -g rmat:5:2:1 --device cpu --op spmm --dim 8 --dtype f64" + cache);
  EXPECT_NE(f64.code, 0) << f64.out;
  EXPECT_NE(f64.out.find("--dtype: f64 not in {f32,f16,bf16}"), std::string::npos) << f64.out;

  auto space = run_cli("tune -g rmat:2:1:1 --op spmm --dim 4 --device cpu --list-space --format json");
  ASSERT_EQ(space.code, 0) << space.out;
  const json sj = json::parse(space.out);
  EXPECT_EQ(sj[0]["size"], 16);
  EXPECT_LE(sj[0]["valid"].get<int>(), 16);

  auto cb = run_cli("tune -g rmat:8:4:1 --op cbsr_sspmm --k 4 --dim 16 --device cpu --reps 1"
                    " --format json" + cache);
  ASSERT_EQ(cb.code, 0) << cb.out;
  const json cj = json::parse(cb.out);
  EXPECT_EQ(cj[0]["best"]["schedule"], "cpu");
  EXPECT_EQ(cj[0]["baseline"]["strategy"], "cpu");
  EXPECT_EQ(cj[0]["sub_op"], "k=4 weighted");
  auto cspace = run_cli("tune -g rmat:8:4:1 --op cbsr_spgemm --k 4 --dim 16 --device cpu"
                        " --list-space --no-weights");
  ASSERT_EQ(cspace.code, 0) << cspace.out;
  EXPECT_NE(cspace.out.find("k=4 unweighted"), std::string::npos) << cspace.out;

  auto fit = run_cli("tune --fit-model --cache " + path("empty/"));
  EXPECT_EQ(fit.code, 2) << fit.out;
  EXPECT_NE(fit.out.find("no measurements"), std::string::npos) << fit.out;

  const std::vector<std::pair<std::string, std::string>> bad{
      {"--op spmm --dim 8 --budget -1", "--budget must be >= 0"},
      {"--op spmm --dim 8 --min-timed-ms -2", "--min-timed-ms must be a number >= 0"},
      {"--op spmm --dim 8 --mode annealing", "unknown tuning mode 'annealing'"},
      {"--op spmv --dim 8", "--op must be spmm, sddmm, cbsr_spgemm or cbsr_sspmm, got 'spmv'"},
      {"--dim 8", "--op is required"},
      {"--op cbsr_spgemm --dim 8", "--k is required for --op cbsr_spgemm"},
      {"--op cbsr_sspmm --dim 8 --k 0", "--k is required for --op cbsr_sspmm"},
      {"--op cbsr_spgemm --dim 8 --dim 16 --k 9", "--k 9 exceeds --dim 8"},
      {"--op spmm --dim 8 --k 4", "--k applies to --op cbsr_spgemm and cbsr_sspmm only"},
      {"--op sddmm --dim 8 --no-weights", "--no-weights applies to"},
      {"--op spmm --dim 0", "--dim must be in 1..65536, got 0"},
      {"--op spmm", "--dim is required"},
      {"--op spmm --dim 8 --top 50", "--top must be in 5..20"},
      {"--op spmm --dim 8 --format xml", "--format must be table or json"},
      {"--op spmm --dim 8 --spmm-op u_pow_e", "u_pow_e"},
      {"--op spmm --dim 8 --list-space --fit-model", "exclude each other"},
      {"--op cbsr_spgemm --k 4 --dim 8 --dtype bf16", "the CBSR products are tuned in f32"},
  };
  for (const auto& [args, msg] : bad) {
    auto b = run_cli("tune -g rmat:5:2:1 --device cpu " + args + cache);
    EXPECT_EQ(b.code, 2) << args << "\n" << b.out;
    EXPECT_NE(b.out.find("spgnn: error: "), std::string::npos) << args << "\n" << b.out;
    EXPECT_NE(b.out.find(msg), std::string::npos) << args << "\n" << b.out;
  }
}

TEST_F(Tune, BenchTuneFlagFillsTheCacheThroughAuto) {
  // The environment names the cache directory (never the user's real cache).
  const std::string cmd = "SPGNN_CACHE_DIR=" + dir_.string() + " " + SPGNN_CLI_PATH +
                          " bench spmm --graph rmat:8:4:1 --dim 8 --device cpu --reps 1"
                          " --warmup 0 --tune --format json 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(fs::exists(path("tuning.json"))) << r.out;
  const auto entries = tuning_cache_entries(path("tuning.json"));
  ASSERT_EQ(entries.size(), 1u);
  // bench's auto row reports the tuned schedule.
  const std::string out = r.out.substr(r.out.rfind("[\n"));
  const json j = json::parse(out);
  bool found = false;
  for (const auto& row : j)
    if (row["auto"].get<bool>()) found = row["strategy"] == entries[0].schedule.str();
  EXPECT_TRUE(found) << r.out;
}

}  // namespace
}  // namespace spgnn

// End-to-end tests of the `spgnn` command: the main flows work, and bad flags or files give a
// clear message and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "spgnn/io.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;

using Result = spgnn::test::CliResult;
Result run(const std::string& args) { return spgnn::test::run_cli(args); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("spgnn-cli-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(Cli, GenerateInfoConvertRoundTrip) {
  auto g = run("generate rmat --scale 10 --edge-factor 8 --seed 3 --symmetrize -o " + path("g.spg"));
  ASSERT_EQ(g.code, 0) << g.out;
  auto info = run("info " + path("g.spg") + " --format json");
  ASSERT_EQ(info.code, 0) << info.out;
  auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["n_rows"], 1024);
  EXPECT_TRUE(j["symmetric"].get<bool>());
  EXPECT_GT(j["nnz"].get<int64_t>(), 1000);
  EXPECT_GE(j["degree"]["max"].get<int64_t>(), j["degree"]["mean"].get<double>());

  ASSERT_EQ(run("convert " + path("g.spg") + " " + path("g.mtx")).code, 0);
  ASSERT_EQ(run("convert " + path("g.mtx") + " " + path("g2.spg")).code, 0);
  auto info2 = run("info " + path("g2.spg") + " --format json");
  ASSERT_EQ(info2.code, 0) << info2.out;
  auto j2 = nlohmann::json::parse(info2.out);
  EXPECT_EQ(j2["nnz"], j["nnz"]);
  EXPECT_EQ(j2["degree"]["max"], j["degree"]["max"]);
}

// An edge_index .npy cannot keep edge values, a non-square shape or trailing isolated vertices:
// convert still writes it (that is the format) but says what is lost, and stays quiet when
// nothing is.
TEST_F(Cli, ConvertToNpyWarnsAboutWhatTheFormatDrops) {
  {
    std::ofstream f(path("w.mtx"));
    f << "%%MatrixMarket matrix coordinate real general\n10 10 2\n1 2 0.5\n2 1 2.0\n";
  }
  auto lossy = run("convert " + path("w.mtx") + " " + path("w.npy"));
  ASSERT_EQ(lossy.code, 0) << lossy.out;
  EXPECT_NE(lossy.out.find("warning: " + path("w.npy")), std::string::npos) << lossy.out;
  EXPECT_NE(lossy.out.find("edge values"), std::string::npos) << lossy.out;
  EXPECT_NE(lossy.out.find("its 10 vertices (read back as the largest id + 1 = 2)"),
            std::string::npos) << lossy.out;
  ASSERT_EQ(run("generate er --n 50 --avg-degree 6 -o " + path("e.spg")).code, 0);
  auto clean = run("convert " + path("e.spg") + " " + path("e.npy"));
  ASSERT_EQ(clean.code, 0) << clean.out;
  EXPECT_EQ(clean.out.find("warning"), std::string::npos) << clean.out;
  auto kept = run("convert " + path("w.mtx") + " " + path("w.spg"));
  EXPECT_EQ(kept.out.find("warning"), std::string::npos) << kept.out;
}

TEST_F(Cli, InfoTableOnGeneratorSpec) {
  auto r = run("info rmat:8:4:2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("degree Gini"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("256 x 256"), std::string::npos) << r.out;
}

TEST_F(Cli, BenchCpuChecksAndReports) {
  auto r = run("bench spmm --graph rmat:9:8:1 --dim 8,33 --strategy all --device cpu --reps 2 "
               "--warmup 1 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_GE(j.size(), 4u);
  bool saw_auto = false;
  for (const auto& row : j) {
    EXPECT_FALSE(row["failed"].get<bool>()) << row.dump();
    EXPECT_LT(row["rel_err"].get<double>(), 1e-5) << row.dump();
    EXPECT_GT(row["median_ms"].get<double>(), 0.0);
    saw_auto = saw_auto || row["auto"].get<bool>();
  }
  EXPECT_TRUE(saw_auto);
  auto s = run("bench sddmm --graph er:500:6:1 --dim 5 --device cpu --reps 2 --format csv");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("cpu_edge"), std::string::npos) << s.out;
}

// maxk on normal rows (its search's slow case): exact against the oracle, the input named in the
// JSON.
TEST_F(Cli, BenchMaxkOnNormalRows) {
  auto r = run("bench maxk --graph rmat:8:8:1 --dim 64,100 --k 8,30 --input normal --device cpu "
               "--reps 1 --warmup 0 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u) << r.out;
  for (const auto& row : j) {
    EXPECT_EQ(row["input"], "normal") << row.dump();
    EXPECT_TRUE(row["maxk_exact"].get<bool>()) << row.dump();
    EXPECT_FALSE(row["failed"].get<bool>()) << row.dump();
  }
}

TEST_F(Cli, BenchHalfPrecisionChecksEachDtype) {
  auto r = run("bench spmm --graph rmat:9:8:1 --dim 8,33 --dtype all --device cpu --reps 2 "
               "--warmup 1 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  std::map<std::string, int> rows;
  for (const auto& row : nlohmann::json::parse(r.out)) {
    const std::string dt = row["dtype"];
    ++rows[dt];
    EXPECT_FALSE(row["failed"].get<bool>()) << row.dump();
    // Each dtype against the float64 oracle on its own (rounded) inputs: one rounding each.
    const double tol = dt == "f32" ? 1e-5 : dt == "f16" ? 1e-3 : 8e-3;
    EXPECT_LT(row["rel_err"].get<double>(), tol) << row.dump();
    // bf16 keeps float32's exponent in 8 bits of mantissa: visibly less exact than float32.
    if (dt == "bf16") {
      EXPECT_GT(row["rel_err"].get<double>(), 1e-5) << row.dump();
    }
  }
  EXPECT_EQ(rows["f32"], 4);
  EXPECT_EQ(rows["f16"], 4);
  EXPECT_EQ(rows["bf16"], 4);
  auto s = run("bench sddmm --graph er:500:6:1 --dim 5 --dtype bf16 --device cpu --reps 2 "
               "--format csv");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("bf16"), std::string::npos) << s.out;
  // bench gat: every tensor of the op in the dtype, each row within its dtype's rounding, and
  // each half row timed against the float32 row of the same variant.
  auto g = run("bench gat --graph rmat:8:8:1 --dim 12 --heads 2 --dtype all --device cpu "
               "--reps 2 --warmup 1 --format json");
  ASSERT_EQ(g.code, 0) << g.out;
  std::map<std::string, int> gat_rows;
  for (const auto& row : nlohmann::json::parse(g.out)) {
    const std::string dt = row["dtype"];
    ++gat_rows[dt];
    EXPECT_FALSE(row["failed"].get<bool>()) << row.dump();
    const double tol = dt == "f32" ? 1e-4 : dt == "f16" ? 2e-3 : 1.6e-2;
    EXPECT_LT(row["rel_err"].get<double>(), tol) << row.dump();
    EXPECT_EQ(row["vs_f32"].is_null(), dt == "f32") << row.dump();
  }
  EXPECT_EQ(gat_rows["f32"], 3);  // fused and unfused forward, the backward
  EXPECT_EQ(gat_rows["f16"], 3);
  EXPECT_EQ(gat_rows["bf16"], 3);
  // --attn-dropout as in training: more rows than are checked, so the reference's sampled rows
  // draw the whole graph's masks through their edge ids; every row still matches it.
  auto d = run("bench gat --graph er:3000:12:1 --check-rows 200 --dim 4 --heads 1,3 "
               "--attn-dropout 0.5 --device cpu --reps 2 --warmup 1 --format json");
  ASSERT_EQ(d.code, 0) << d.out;
  int dropped_rows = 0;
  for (const auto& row : nlohmann::json::parse(d.out)) {
    ++dropped_rows;
    EXPECT_FALSE(row["failed"].get<bool>()) << row.dump();
    EXPECT_LT(row["rel_err"].get<double>(), 1e-4) << row.dump();
    EXPECT_EQ(row["attn_dropout"].get<double>(), 0.5) << row.dump();
  }
  EXPECT_EQ(dropped_rows, 6);
}

// spgnn train --dtype f16: float16 aggregations with loss scaling report the scale and the
// skipped steps; a dtype the trainer does not take is refused by name.
TEST_F(Cli, TrainFloat16ReportsItsLossScale) {
  auto r = run("train --dtype f16 --model gcn --epochs 20 --device cpu --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.rfind("\n{");  // the JSON follows the progress lines (stderr)
  const auto j = nlohmann::json::parse(at == std::string::npos ? r.out : r.out.substr(at + 1));
  EXPECT_EQ(j["dtype"], "f16");
  EXPECT_EQ(j["skipped_steps"], 0);
  EXPECT_EQ(j["loss_scale"], 65536.0);
  EXPECT_GT(j["test_acc"].get<double>(), 0.5);
  auto bad = run("train --dtype f64 --epochs 1 --device cpu");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("f64"), std::string::npos) << bad.out;
}

// planted:N:C:SEED generates its data from SEED (it was parsed with stoll, which read "3:7" as 3
// and dropped the seed, so every SEED trained on the same graph); --seed is the fallback.
TEST_F(Cli, TrainPlantedSpecUsesItsSeed) {
  auto loss = [&](const std::string& args) {
    auto r = run("train --model gcn --epochs 1 --device cpu --format json " + args);
    EXPECT_EQ(r.code, 0) << r.out;
    const size_t at = r.out.rfind("\n{");
    return nlohmann::json::parse(at == std::string::npos ? r.out : r.out.substr(at + 1))
        ["final_loss"].get<double>();
  };
  const double s7 = loss("--dataset planted:300:3:7 --seed 1");
  EXPECT_NE(s7, loss("--dataset planted:300:3:8 --seed 1"));
  EXPECT_NE(loss("--dataset planted:300:3 --seed 1"), loss("--dataset planted:300:3 --seed 2"));
  auto bad = run("train --epochs 1 --device cpu --dataset planted:300:3x");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("CLASSES must be an integer"), std::string::npos) << bad.out;
}

// With --eval-every N the epochs in between are not evaluated: their accuracies are null in the
// JSON history and the progress lines name the epoch their accuracies come from (they printed
// 0.000, which read as a collapsed model).
TEST_F(Cli, TrainLeavesUnevaluatedEpochsWithoutAccuracies) {
  auto r = run("train --model gcn --epochs 6 --eval-every 3 --device cpu --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.rfind("\n{");
  const auto j = nlohmann::json::parse(at == std::string::npos ? r.out : r.out.substr(at + 1));
  ASSERT_EQ(j["history"].size(), 6u);
  for (const auto& e : j["history"]) {
    const bool evaluated = e["epoch"].get<int>() % 3 == 0;
    EXPECT_EQ(e["val_acc"].is_number(), evaluated) << e.dump();
    EXPECT_EQ(e["train_acc"].is_number(), evaluated) << e.dump();
    if (evaluated) {
      EXPECT_GT(e["train_acc"].get<double>(), 0.0) << e.dump();
    }
  }
  auto log = run("train --model gcn --epochs 20 --eval-every 20 --device cpu");
  ASSERT_EQ(log.code, 0) << log.out;
  EXPECT_NE(log.out.find("epoch   10/20  loss"), std::string::npos) << log.out;
  EXPECT_NE(log.out.find("train   -    val   -"), std::string::npos) << log.out;
  EXPECT_EQ(log.out.find("train 0.000  val 0.000"), std::string::npos) << log.out;
}

// An empty split has no accuracy: "n/a" and JSON null, not 0 (a model that got every vertex
// wrong).
TEST_F(Cli, TrainReportsNoAccuracyForAnEmptySplit) {
  ASSERT_EQ(run("generate planted --n 300 --classes 3 -o " + path("ds")).code, 0);
  spgnn::write_npy(spgnn::Tensor::from_vector<int64_t>({}), path("ds/test_idx.npy"));
  auto r = run("train --dataset " + path("ds") + " --epochs 3 --device cpu");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("test accuracy n/a (empty split) at best validation accuracy 0."),
            std::string::npos) << r.out;
  auto j = run("train --dataset " + path("ds") + " --epochs 3 --device cpu --format json");
  ASSERT_EQ(j.code, 0) << j.out;
  const size_t at = j.out.rfind("\n{");
  const auto doc = nlohmann::json::parse(at == std::string::npos ? j.out : j.out.substr(at + 1));
  EXPECT_TRUE(doc["test_acc"].is_null()) << doc.dump();
  EXPECT_TRUE(doc["best_val_acc"].is_number()) << doc.dump();
}

// Half training takes TF32 tensor-core GEMMs by default (--no-tf32 opts out); float32 runs stay
// exact unless --tf32; the two flags exclude each other.
TEST_F(Cli, TrainTf32FollowsTheDtype) {
  const auto tf32_of = [&](const std::string& flags) {
    auto r = run("train --model gcn --epochs 1 --eval-every 0 --device cpu --format json " + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.out;
    const size_t at = r.out.rfind("\n{");
    return nlohmann::json::parse(at == std::string::npos ? r.out : r.out.substr(at + 1))["tf32"]
        .get<bool>();
  };
  EXPECT_FALSE(tf32_of(""));
  EXPECT_TRUE(tf32_of("--tf32"));
  EXPECT_TRUE(tf32_of("--dtype bf16"));
  EXPECT_TRUE(tf32_of("--dtype f16"));
  EXPECT_FALSE(tf32_of("--dtype bf16 --no-tf32"));
  auto both = run("train --epochs 1 --device cpu --tf32 --no-tf32");
  EXPECT_NE(both.code, 0);
  EXPECT_NE(both.out.find("--no-tf32"), std::string::npos) << both.out;
}

TEST_F(Cli, GeneratePlantedDatasetDirectory) {
  auto r = run("generate planted --n 300 --classes 3 -o " + path("ds"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(path("ds/edge_index.npy")));
  EXPECT_TRUE(fs::exists(path("ds/x.npy")));
  auto info = run("info " + path("ds") + " --format json");
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_EQ(nlohmann::json::parse(info.out)["n_rows"], 300);
  // Not into a directory holding files already (an earlier dataset's would be read with the new
  // one), nor onto a file; an empty directory is fine.
  auto again = run("generate planted --n 200 --classes 3 -o " + path("ds"));
  EXPECT_NE(again.code, 0);
  EXPECT_NE(again.out.find("is a directory that is not empty"), std::string::npos) << again.out;
  auto onto_file = run("generate planted --n 200 --classes 3 -o " + path("ds/x.npy"));
  EXPECT_NE(onto_file.code, 0);
  EXPECT_NE(onto_file.out.find("is a file"), std::string::npos) << onto_file.out;
  fs::create_directories(path("empty"));
  EXPECT_EQ(run("generate planted --n 200 --classes 3 -o " + path("empty")).code, 0);
}

TEST_F(Cli, PartitionDatasetDirectory) {
  ASSERT_EQ(run("generate planted --n 400 --classes 4 -o " + path("ds")).code, 0);
  auto r = run("partition " + path("ds") + " -o " + path("p3") + " --parts 3 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parts"], 3);
  int64_t owned = 0, edges = 0, max_owned = 0, max_edges = 0;
  for (const auto& p : j["part"]) {
    owned += p["owned"].get<int64_t>();
    edges += p["edges"].get<int64_t>();
    max_owned = std::max(max_owned, p["owned"].get<int64_t>());
    max_edges = std::max(max_edges, p["edges"].get<int64_t>());
  }
  EXPECT_EQ(owned, 400);
  // the balance figures are the heaviest part over the mean
  EXPECT_NEAR(j["vertex_balance"].get<double>(), 3.0 * double(max_owned) / double(owned), 1e-12);
  EXPECT_NEAR(j["edge_balance"].get<double>(), 3.0 * double(max_edges) / double(edges), 1e-12);
  EXPECT_GE(j["edge_balance"].get<double>(), 1.0);
  for (const char* f : {"meta.json", "owner.npy", "local_id.npy", "part-2/graph.spg",
                        "part-0/x.npy", "part-1/train_idx.npy", "part-2/send_ids.npy"})
    EXPECT_TRUE(fs::exists(path("p3/") + f)) << f;
  // an existing output is kept unless --force
  auto table = run("partition " + path("ds") + " -o " + path("p2t") + " --parts 2");
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("heaviest part over the mean: "), std::string::npos) << table.out;
  auto again = run("partition " + path("ds") + " -o " + path("p3") + " --parts 2");
  EXPECT_NE(again.code, 0);
  EXPECT_NE(again.out.find("already exists"), std::string::npos) << again.out;
  auto forced = run("partition " + path("ds") + " -o " + path("p3") + " --parts 2 --method ldg "
                    "--force --format json");
  ASSERT_EQ(forced.code, 0) << forced.out;
  EXPECT_EQ(nlohmann::json::parse(forced.out)["parts"], 2);
  EXPECT_FALSE(fs::exists(path("p3/part-2")));
  // --force replaces an earlier partition only: never the input file, another directory, or a
  // partition that holds the input (each would be deleted whole).
  ASSERT_EQ(run("generate er --n 100 --avg-degree 4 -o " + path("g.mtx")).code, 0);
  const std::uintmax_t g_size = fs::file_size(path("g.mtx"));
  auto onto_input = run("partition " + path("g.mtx") + " -o " + path("g.mtx") + " --force");
  EXPECT_NE(onto_input.code, 0);
  EXPECT_NE(onto_input.out.find("is not a partition directory"), std::string::npos)
      << onto_input.out;
  EXPECT_EQ(fs::file_size(path("g.mtx")), g_size);
  fs::create_directories(path("other"));
  { std::ofstream(path("other/keep.txt")) << "mine\n"; }
  auto onto_dir = run("partition " + path("g.mtx") + " -o " + path("other") + " --force");
  EXPECT_NE(onto_dir.code, 0);
  EXPECT_NE(onto_dir.out.find("is not a partition directory"), std::string::npos) << onto_dir.out;
  EXPECT_TRUE(fs::exists(path("other/keep.txt")));
  fs::copy_file(path("g.mtx"), path("p3/g.mtx"));
  auto holds_input = run("partition " + path("p3/g.mtx") + " -o " + path("p3") + " --force");
  EXPECT_NE(holds_input.code, 0);
  EXPECT_NE(holds_input.out.find("lies inside it"), std::string::npos) << holds_input.out;
  EXPECT_TRUE(fs::exists(path("p3/g.mtx")));
  auto flags = run("partition " + path("ds") + " -o " + path("p4") + " --self-loops add");
  EXPECT_NE(flags.code, 0);
  EXPECT_NE(flags.out.find("only --symmetrize and --edge-index-rows"), std::string::npos)
      << flags.out;
}

TEST_F(Cli, BadFlagsAreClearErrors) {
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"generate rmat --scale 0 -o " + path("x.spg"), "scale"},
      {"generate rmat --scale 99 -o " + path("x.spg"), "scale"},
      {"generate bogus -o " + path("x.spg"), "kind"},
      // --seed is unsigned: "-1" was read as 2^64 - 1, a seed nobody asked for
      {"generate rmat --seed -1 -o " + path("x.spg"), "--seed: must be >= 0, got -1"},
      {"bench spmm --graph rmat:6 --seed -1 --device cpu", "--seed: must be >= 0"},
      {"partition rmat:6 -o " + path("p") + " --seed 99999999999999999999", "out of range"},
      {"bench spmm --graph rmat:6 --dim 0 --device cpu", "dim"},
      {"bench spmm --graph rmat:6 --reps 0 --device cpu", "reps"},
      {"bench spmm --graph rmat:6 --strategy nosuch --device cpu", "nosuch"},
      {"bench spmm --graph rmat:6 --strategy cpu_mergepath:row_cost=3 --device cpu", "row_cost"},
      {"bench spmm --graph rmat:6 --strategy cpu_mergepath:bogus=1 --device cpu", "bogus"},
      {"bench spmm --graph rmat:6 --op u_pow_e --device cpu", "u_pow_e"},
      {"bench spmm --graph rmat:6 --device tpu", "tpu"},
      {"bench spmm --graph rmat:6 --dtype f8 --device cpu", "f8"},
      {"bench maxk --graph rmat:6 --dtype bf16 --device cpu", "applies to spmm, sddmm and gat"},
      // gat's --param goes to the fused strategy (gat_fused on a GPU, cpu here: it has none)
      {"bench gat --graph rmat:6 --param heavy_deg=64 --device cpu",
       "has no parameter 'heavy_deg'"},
      {"bench gat --graph rmat:6 --param heavy_deg --device cpu", "not key=value"},
      // maxk's --param goes to the CBSR products' gpu strategy: names and the device are checked
      {"bench maxk --graph rmat:6 --k 4 --param wraps=4 --device cpu", "wraps"},
      // a k above every width ran nothing and printed an empty table
      {"bench maxk --graph rmat:6 --k 9 --dim 8 --device cpu", "--k 9 exceeds every --dim"},
      {"bench maxk --graph rmat:6 --k 4 --param warps --device cpu", "warps"},
      {"bench maxk --graph rmat:6 --k 4 --input gaussian --device cpu", "--input"},
      {"bench spmm --graph rmat:6 --input normal --device cpu", "--input applies to maxk only"},
      {"bench spmm --graph rmat:6 --attn-dropout 0.5 --device cpu",
       "--attn-dropout applies to gat only"},
      {"bench gat --graph rmat:6 --attn-dropout 1 --device cpu", "in [0, 1), got 1"},
      {"bench gat --graph rmat:6 --attn-dropout nan --device cpu", "in [0, 1), got nan"},
      {"generate er --n 100 --avg-degree nan -o " + path("nan.spg"), "in [0, 1e6], got nan"},
      // The gpu strategy is refused for host data; a build without CUDA refuses it first, for the
      // build itself.
      {"bench maxk --graph rmat:6 --k 4 --param warps=4 --device cpu",
       SPGNN_WITH_CUDA ? "needs the data on a CUDA device" : "needs a build with CUDA"},
      {"info rmat:abc", "SCALE"},
      // An empty graph spec split into no fields and crashed (read past an empty vector).
      {"info ''", "graph spec is empty"},
      {"bench spmm --graph '' --device cpu", "graph spec is empty"},
      {"info er:10", "er:N:AVG_DEGREE"},
      {"info " + path("missing.mtx"), "missing.mtx"},
      {"info --index-width 16 rmat:5", "index-width"},
      {"partition rmat:6 -o " + path("p") + " --parts 0", "parts"},
      {"partition rmat:6 -o " + path("p") + " --parts 65", "every part needs a vertex"},
      {"partition rmat:6 -o " + path("p") + " --method kahip", "method"},
      {"partition rmat:6 -o " + path("p") + " --imbalance 0.5", "imbalance"},
      {"partition rmat:6", "output"},
      {"partition " + path("missing.mtx") + " -o " + path("p"), "missing.mtx"},
      // Generator sizes no machine holds are refused up front, naming the generator or flag
      // (they failed inside an allocation with a bare "out of memory").
      {"info er:1099511627776:1000000", "erdos_renyi: 1099511627776 vertices"},
      {"info rmat:36:65536", "rmat scale 36"},
      {"train --dataset rmat:8 --features 100000000000 --epochs 1 --device cpu",
       "synthetic features: 256 x 100000000000 floats"},
      {"generate planted --n 2000000000 --feature-dim 100000 -o " + path("pl"),
       "planted partition: n = 2000000000 with 100000 features"},
  };
  for (const auto& c : cases) {
    auto r = run(c.args);
    EXPECT_NE(r.code, 0) << c.args << "\n" << r.out;
    EXPECT_LT(r.code, 128) << "crashed: " << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << "message should mention '" << c.expect << "': " << c.args << "\n" << r.out;
  }
}

// OGB raw directories are CSV: a corrupt line is refused with its file and line, never read as
// something else (a fractional vertex id truncated, a blank field filled from the next line) or
// turned into an unallocatable model (a huge label sizing the output layer).
TEST_F(Cli, MalformedOgbCsvNamesFileAndLine) {
  const std::string dir = path("ogb");
  fs::create_directories(dir + "/raw");
  fs::create_directories(dir + "/split/time");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name, std::ios::binary) << text;
  };
  const std::string good_features = "0.5,1\n1,0\n0,0.25\n2,2\n";
  write("raw/node-feat.csv", good_features);
  write("split/time/train.csv", "0\n1\n");
  write("split/time/valid.csv", "2\n");
  write("split/time/test.csv", "3\n");
  const std::string good_edges = "0,1\n1,2\n3,2\n", good_labels = "0\n1\n2\n1\n";
  write("raw/edge.csv", good_edges);
  write("raw/node-label.csv", good_labels);
  const std::string train = "train --device cpu --epochs 1 --hidden 4 --dataset " + dir;
  auto ok = run(train);
  ASSERT_EQ(ok.code, 0) << ok.out;
  struct Case {
    std::string file, text, expect;
  };
  const Case cases[] = {
      {"raw/edge.csv", "0,1\n0.5,1.7\n3,2\n",
       "edge.csv:2: edge (0.5, 1.7) names a vertex that is not an integer"},
      {"raw/edge.csv", "0,1\n1,\t\n3,2\n", "edge.csv:2: expected a number at column 2"},
      {"raw/edge.csv", "0,1\n1,2,\n3,2\n", "edge.csv:2: expected a number at column 3"},
      {"raw/node-label.csv", "0\n1\n1e30\n1\n", "node-label.csv:3: label 1e+30 is not a class id"},
      {"raw/node-feat.csv", "0.5,1\n1,0\n0,nan\n2,2\n",
       "node-feat.csv:3: feature nan at column 2 is not finite"},
      {"raw/node-label.csv", "0\n1\n1099511627776\n1\n",
       "node-label.csv:3: label 1.09951e+12 is not a class id"},
  };
  for (const auto& c : cases) {
    write("raw/edge.csv", good_edges);
    write("raw/node-label.csv", good_labels);
    write("raw/node-feat.csv", good_features);
    write(c.file, c.text);
    auto r = run(train);
    EXPECT_EQ(r.code, 2) << c.file << ": " << c.text << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << "message should say '" << c.expect << "'\n" << r.out;
  }
}

// A checkpoint is refused, naming the file, when any byte of it changed (version 2 carries a
// checksum: a flipped weight loaded silently before), and a version-1 file (no checksum) when
// bytes follow its last parameter (they were ignored), a weight is not finite (it loaded, and
// training went on with NaN) or a config number has trailing junk (std::stoull read "1x" as 1).
TEST_F(Cli, CorruptCheckpointIsRefused) {
  const std::string data = path("data"), ckpt = path("m.ckpt");
  ASSERT_EQ(run("generate planted --n 60 --classes 3 --feature-dim 4 -o " + data).code, 0);
  const std::string train = "train --device cpu --hidden 4 --dataset " + data;
  auto saved = run(train + " --epochs 1 --save " + ckpt);
  ASSERT_EQ(saved.code, 0) << saved.out;
  std::string bytes;
  {
    std::ifstream in(ckpt, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 20u);
  auto load = [&](const std::string& content) {
    std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << content;
    return run(train + " --epochs 0 --load " + ckpt);
  };
  auto expect_refused = [&](const std::string& content, const std::string& what) {
    auto r = load(content);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(ckpt + ": "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(what), std::string::npos) << "expected '" << what << "': " << r.out;
  };
  ASSERT_EQ(load(bytes).code, 0);
  std::string flipped = bytes;
  flipped[flipped.size() - 12] ^= 0x01;  // the lowest bit of the last weight's last byte
  expect_refused(flipped, "checksum mismatch");
  expect_refused(bytes.substr(0, bytes.size() - 3), "checksum mismatch");
  expect_refused(bytes + bytes, "checksum mismatch");

  // The same file as version 1: no checksum (the last 8 bytes), version field 1.
  std::string v1 = bytes.substr(0, bytes.size() - 8);
  const uint32_t one = 1;
  std::memcpy(&v1[8], &one, sizeof one);
  ASSERT_EQ(load(v1).code, 0) << "version-1 checkpoints still load";
  expect_refused(v1 + v1, std::to_string(v1.size()) + " trailing bytes");
  std::string nan_weight = v1;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&nan_weight[nan_weight.size() - sizeof nan], &nan, sizeof nan);  // the last weight
  expect_refused(nan_weight, "holds nan");
  std::string junk = v1;
  const size_t at = junk.find("\nseed=1\n");
  ASSERT_NE(at, std::string::npos);
  junk[at + 7] = 'x';  // same length: only the field is wrong
  expect_refused(junk, "'seed=1x' is not an unsigned integer");
  std::string v9 = bytes;
  const uint32_t nine = 9;
  std::memcpy(&v9[8], &nine, sizeof nine);
  expect_refused(v9, "checkpoint version 9 is not supported");
}

TEST_F(Cli, MalformedFileNamesFileAndLine) {
  {
    std::ofstream f(path("bad.mtx"));
    f << "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n4 1 2.0\n";
  }
  auto r = run("info " + path("bad.mtx"));
  EXPECT_NE(r.code, 0);
  EXPECT_LT(r.code, 128) << r.out;
  EXPECT_NE(r.out.find("bad.mtx"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(":4"), std::string::npos) << "line number expected: " << r.out;
}

}  // namespace

// End-to-end training on the CPU: the built-in planted-partition dataset (every model, MaxK too)
// and the real Planetoid datasets in ../shared/data with the published settings (mean test
// accuracy over 10 seeds at the best validation epoch); plus `spgnn train` itself (JSON output,
// checkpoints). The real-data tests SKIP, naming the path, when the folder is absent.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

#include "spgnn/io.hpp"
#include "spgnn/nn/model.hpp"
#include "test_util.hpp"

namespace spgnn::test {
namespace {

using nn::ConvKind;

struct RunSpec {
  ConvKind kind = ConvKind::gcn;
  int64_t hidden = 16, layers = 2, heads = 8, maxk = 0, epochs = 200;
  double dropout = 0.5, lr = 0.01, weight_decay = 5e-4;
  bool normalize = true;
  bool train_eps = false;
  DType aggregation = DType::f32;  // TrainConfig::aggregation_dtype
};

double train_once(const Dataset& d, const RunSpec& r, uint64_t seed) {
  nn::ModelConfig mc;
  mc.kind = r.kind;
  mc.in = d.x.dim(1);
  mc.classes = d.num_classes;
  mc.hidden = r.hidden;
  mc.layers = r.layers;
  mc.heads = r.heads;
  mc.maxk = r.maxk;
  mc.train_eps = r.train_eps;
  mc.dropout = r.dropout;
  mc.seed = seed;
  nn::Model model(mc);
  nn::TrainConfig tc;
  tc.epochs = r.epochs;
  tc.adam.lr = r.lr;
  tc.adam.weight_decay = r.weight_decay;
  tc.normalize_features = r.normalize;
  tc.seed = seed;
  tc.aggregation_dtype = r.aggregation;
  const nn::TrainResult res = nn::train(model, d, tc);
  return res.test_acc_at_best;
}

// The issue asks for the mean over 5 seeds; one seed's test accuracy varies by about 1 point
// (CiteSeer), so a 5-seed mean of fresh seeds lands within a point of the published numbers often
// enough to make CI flaky. 10 fresh seeds halve the variance of the mean and still check the same
// claim: the mean accuracy reaches the published level.
constexpr int kSeeds = 10;
// The float32-against-bfloat16 comparison: its 10-seed mean difference spread from -0.59 to
// +0.25 points over ten test seeds (SPGNN_TEST_SEED), two of them past the 0.5-point bar, as
// float32 against itself does on such means (docs/BENCHMARKS.md, GAT on Amazon Computers).
// Twenty seeds halve that spread's variance.
constexpr int kPairedSeeds = 20;

double mean_over_seeds(const Dataset& d, const RunSpec& r, int seeds) {
  double s = 0;
  for (int i = 0; i < seeds; ++i) {
    const double acc = train_once(d, r, seed_for(uint64_t(1000 + i)));
    std::cerr << "  seed " << i << ": test accuracy " << acc << "\n";
    s += acc;
  }
  return s / seeds;
}

bool dir_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool accuracy_tests_off() {
  const char* v = std::getenv("SPGNN_ACCURACY_TESTS");
  return v && std::string(v) == "0";
}

// The accuracy runs on the real datasets (minutes on 2 cores) exercise the same CPU code in a
// build with CUDA and one without: scripts/test.sh runs them once, with SPGNN_ACCURACY_TESTS=0
// for the second build.
#define REQUIRE_DATASET(var, name)                                                        \
  if (accuracy_tests_off()) GTEST_SKIP() << "SPGNN_ACCURACY_TESTS=0";                     \
  const std::string var##_path = std::string(SPGNN_SHARED_DATA) + "/" + name;             \
  if (!dir_exists(var##_path)) GTEST_SKIP() << "dataset folder absent: " << var##_path;   \
  const Dataset var = read_dataset_dir(var##_path)

// Planted partition, 4 classes (chance 25%): every model learns it in a few CPU seconds.
TEST(TrainBuiltin, EveryModelBeatsChanceByFar) {
  const Dataset d = nn::load_dataset("builtin");
  struct Case {
    const char* name;
    RunSpec run;
    double min_acc;
  };
  RunSpec gcn;
  gcn.epochs = 100;
  gcn.normalize = false;
  RunSpec sage = gcn, gin = gcn, gat = gcn, sage_maxk = gcn, gin_maxk = gcn;
  sage.kind = ConvKind::sage;
  sage.hidden = 32;
  gin.kind = ConvKind::gin;
  gin.hidden = 32;
  gin.lr = 0.005;
  gat.kind = ConvKind::gat;
  gat.hidden = 8;
  gat.heads = 4;
  sage_maxk = sage;
  sage_maxk.maxk = 8;
  gin_maxk = gin;
  gin_maxk.maxk = 8;
  // GIN sums its neighbours, and MaxK keeps each row's 8 largest values before that sum, so
  // the hidden rows add up coherently: the first loss is ~10x GIN-ReLU's (78 vs 8.9, seed 26),
  // and with dropout 0.5 on those magnitudes about 1 seed in 30 collapsed to one class (seed
  // 3715739803 here: 0.63; 60 CLI seeds: min 0.39). With dropout 0.2, 260 seeds gave min 0.906.
  gin_maxk.dropout = 0.2;
  // Over 60 CLI seeds (same settings) the lowest accuracies were: gcn 0.956, sage 0.942, gin 0.94,
  // gat 0.904, gcn+maxk 0.959, sage+maxk 0.89, gin+eps 0.944, gat+maxk 0.822; the bounds below
  // leave room under those and stay far above chance (0.25).
  RunSpec gcn_maxk = gcn;
  gcn_maxk.hidden = 32;
  gcn_maxk.maxk = 8;
  RunSpec gin_eps = gin, gat_maxk = gat;
  gin_eps.train_eps = true;
  gat_maxk.maxk = 8;  // of 4 heads x 8
  for (const Case& c : {Case{"gcn", gcn, 0.85}, Case{"sage", sage, 0.8}, Case{"gin", gin, 0.75},
                        Case{"gat", gat, 0.8}, Case{"gcn+maxk", gcn_maxk, 0.8},
                        Case{"sage+maxk", sage_maxk, 0.75}, Case{"gin+maxk", gin_maxk, 0.7},
                        Case{"gin, trainable eps", gin_eps, 0.75}, Case{"gat+maxk", gat_maxk, 0.75}}) {
    const double acc = train_once(d, c.run, seed_for(7));
    std::cerr << c.name << ": test accuracy " << acc << "\n";
    EXPECT_GE(acc, c.min_acc) << c.name;
  }
}

// bfloat16 aggregations (GCN, SAGE, GIN; GAT's attention): the same learning as float32, seed
// for seed within a few points on the planted partition, and the process-wide setting restored
// afterwards.
TEST(TrainBuiltin, Bfloat16AggregationsLearnWhatFloat32Learns) {
  const Dataset d = nn::load_dataset("builtin");
  for (ConvKind kind : {ConvKind::gcn, ConvKind::sage, ConvKind::gin, ConvKind::gat}) {
    RunSpec r;
    r.kind = kind;
    r.epochs = 100;
    r.normalize = false;
    r.hidden = kind == ConvKind::gcn ? 16 : kind == ConvKind::gat ? 8 : 32;
    r.lr = kind == ConvKind::gin ? 0.005 : 0.01;
    const double f32 = train_once(d, r, seed_for(8));
    r.aggregation = DType::bf16;
    const double bf16 = train_once(d, r, seed_for(8));
    std::cerr << nn::conv_name(kind) << ": float32 " << f32 << ", bfloat16 " << bf16 << "\n";
    EXPECT_GE(bf16, f32 - 0.03) << nn::conv_name(kind);
    EXPECT_EQ(nn::aggregation_dtype(), DType::f32);
  }
  EXPECT_THROW(nn::set_aggregation_dtype(DType::f64), InvalidArgument);
  EXPECT_THROW(nn::set_aggregation_dtype(DType::i32), InvalidArgument);
}

// float16 aggregations with dynamic loss scaling learn what float32 learns; the scale stays
// where the gradients are finite (no step skipped at the default 2^16 on this data).
TEST(TrainBuiltin, Float16AggregationsWithLossScalingLearnWhatFloat32Learns) {
  const Dataset d = nn::load_dataset("builtin");
  for (ConvKind kind : {ConvKind::gcn, ConvKind::sage, ConvKind::gin, ConvKind::gat}) {
    RunSpec r;
    r.kind = kind;
    r.epochs = 100;
    r.normalize = false;
    r.hidden = kind == ConvKind::gcn ? 16 : kind == ConvKind::gat ? 8 : 32;
    r.lr = kind == ConvKind::gin ? 0.005 : 0.01;
    const double f32 = train_once(d, r, seed_for(9));
    r.aggregation = DType::f16;
    const double f16 = train_once(d, r, seed_for(9));
    std::cerr << nn::conv_name(kind) << ": float32 " << f32 << ", float16 " << f16 << "\n";
    EXPECT_GE(f16, f32 - 0.03) << nn::conv_name(kind);
    EXPECT_EQ(nn::aggregation_dtype(), DType::f32);
  }
}

// A loss scale that overflows float16 (2^40: the scaled gradients pass 65504) makes the scaler
// skip those steps and halve the scale until the gradients fit; the skipped steps do not move
// the weights, and training then proceeds as at a fitting scale.
TEST(TrainBuiltin, Float16LossScalerSkipsOverflowingStepsAndBacksOff) {
  const Dataset d = nn::load_dataset("builtin");
  nn::ModelConfig mc;
  mc.kind = ConvKind::sage;
  mc.in = d.x.dim(1);
  mc.classes = d.num_classes;
  mc.hidden = 32;
  mc.seed = seed_for(10);
  nn::TrainConfig tc;
  tc.epochs = 80;
  tc.eval_every = 0;
  tc.aggregation_dtype = DType::f16;
  tc.loss_scale = std::ldexp(1.0, 40);
  tc.loss_scale_growth_interval = 1000;
  nn::Model model(mc);
  const nn::TrainResult r = nn::train(model, d, tc);
  EXPECT_GT(r.skipped_steps, 0);
  EXPECT_LT(r.skipped_steps, 40);
  EXPECT_LT(r.loss_scale, std::ldexp(1.0, 40));
  EXPECT_EQ(r.loss_scale, std::ldexp(1.0, 40 - int(r.skipped_steps)));
  EXPECT_GT(r.test_acc_at_best, 0.6);
  // A bad scale is refused by name.
  tc.loss_scale = 0;
  nn::Model m2(mc);
  expect_throw<InvalidArgument>([&] { nn::train(m2, d, tc); }, {"loss_scale"});
}

TEST(TrainPlanetoid, GcnOnCoraInBfloat16ReachesFloat32sMeanOver20Seeds) {
  REQUIRE_DATASET(cora, "cora");
  RunSpec bf16;
  bf16.aggregation = DType::bf16;
  const double f32_acc = mean_over_seeds(cora, RunSpec{}, kPairedSeeds);
  const double acc = mean_over_seeds(cora, bf16, kPairedSeeds);
  std::cerr << "GCN Cora mean test accuracy: float32 " << f32_acc << ", bfloat16 aggregations "
            << acc << "\n";
  EXPECT_GE(acc, f32_acc - 0.005);  // issue 12: within 0.5 points of float32
}

TEST(TrainPlanetoid, GcnOnCoraReaches80_5PercentMeanOver10Seeds) {
  REQUIRE_DATASET(cora, "cora");
  const double acc = mean_over_seeds(cora, RunSpec{}, kSeeds);
  std::cerr << "GCN Cora mean test accuracy: " << acc << "\n";
  EXPECT_GE(acc, 0.805);
}

TEST(TrainPlanetoid, GcnOnCiteSeerReaches69_5PercentMeanOver10Seeds) {
  REQUIRE_DATASET(citeseer, "citeseer");
  const double acc = mean_over_seeds(citeseer, RunSpec{}, kSeeds);
  std::cerr << "GCN CiteSeer mean test accuracy: " << acc << "\n";
  EXPECT_GE(acc, 0.695);
}

TEST(TrainPlanetoid, GatOnCoraReaches81_5PercentMeanOver10Seeds) {
  REQUIRE_DATASET(cora, "cora");
  RunSpec gat;
  gat.kind = ConvKind::gat;
  gat.hidden = 8;
  gat.heads = 8;
  gat.dropout = 0.6;
  gat.lr = 0.005;
  const double acc = mean_over_seeds(cora, gat, kSeeds);
  std::cerr << "GAT Cora mean test accuracy: " << acc << "\n";
  EXPECT_GE(acc, 0.815);
}

std::string run_cli(const std::string& args, int* rc) {
  const CliResult r = spgnn::test::run_cli(args);
  *rc = r.code;
  return r.out;
}

TEST(TrainCli, JsonOutputCheckpointsAndErrors) {
  const std::string ckpt = ::testing::TempDir() + "spgnn_train_" + std::to_string(base_seed() % 100000) + ".ckpt";
  int rc = 0;
  std::string out = run_cli("train --model gcn --dataset builtin --epochs 30 --device cpu --format json --save " + ckpt, &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const char* key : {"\"test_acc\"", "\"best_val_acc\"", "\"ms_per_epoch\"", "\"epochs\""})
    EXPECT_NE(out.find(key), std::string::npos) << key << " missing in " << out;
  out = run_cli("train --model gcn --dataset builtin --epochs 0 --device cpu --load " + ckpt, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("test accuracy"), std::string::npos) << out;
  out = run_cli("train --model sage --dataset builtin --epochs 1 --device cpu --load " + ckpt, &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("different model"), std::string::npos) << out;
  out = run_cli("train --model gcn --dataset /nonexistent/dir --epochs 1 --device cpu", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("/nonexistent/dir"), std::string::npos) << out;
  out = run_cli("train --model gcn --dataset builtin --maxk 99 --hidden 16 --device cpu", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("maxk"), std::string::npos) << out;
  out = run_cli("train --model gcn --dataset builtin --train-eps --epochs 1 --device cpu", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("gin only"), std::string::npos) << out;
  // Flags that were accepted and then ignored or failed late: each is now refused up front.
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--eval-every -1", "--eval-every"},
           {"--lr -1", "--lr"},
           {"--lr 0", "--lr"},
           {"--weight-decay -0.1", "--weight-decay"},
           {"--lr inf", "finite"},
           {"--lr nan", "--lr"},
           {"--weight-decay inf", "finite"},
           {"--attn-dropout -5", "must be -1 (the same as --dropout) or in [0, 1)"},
           // refused before training, not after it
           {"--save /nonexistent/dir/ck.bin", "--save: no directory '/nonexistent/dir'"},
           {"--dropout 0.99999999", "in [0, 1) as a float32"},
           {"--split time", "--split"},
           {"--split time --dataset rmat:6", "--split"},
           {"--split time --dataset planted:300", "--split"},
           {"--symmetrize maybe", "--symmetrize"},
           {"--edge-index-rows rows", "--edge-index-rows"},
           {"--normalize-features yes", "--normalize-features"},
           // synthetic sizes for a dataset with its own data, or impossible ones
           {"--features 128", "--features"},
           {"--classes 3 --dataset planted:300", "--classes"},
           {"--features 0 --dataset rmat:6", "--features"},
           {"--classes 1 --dataset rmat:6", "--classes"}}) {
    out = run_cli("train --model gcn --epochs 1 --device cpu " + args, &rc);
    EXPECT_NE(rc, 0) << args << "\n" << out;
    EXPECT_NE(out.find(needle), std::string::npos) << args << "\n" << out;
  }
  // where they apply, they size the model: GCN 7 -> 16 -> 3 has 7*16 + 16 + 16*3 + 3 = 179
  out = run_cli("train --model gcn --epochs 1 --device cpu --format json --dataset rmat:6 "
                "--features 7 --classes 3", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"parameters\": 179"), std::string::npos) << out;
  std::remove(ckpt.c_str());
}

// What the input went through is chosen by rules PyG users can predict and is reported: a
// generated graph is taken as given unless --symmetrize on; the built-in dataset's Gaussian
// (signed) features are left alone by --normalize-features auto.
TEST(TrainCli, InputTransformsAreExplicitAndReported) {
  int rc = 0;
  auto field = [](const std::string& out, const std::string& key) {
    const auto at = out.find("\"" + key + "\": ");
    return at == std::string::npos ? std::string("missing")
                                   : out.substr(at + key.size() + 4, 4);
  };
  std::string out = run_cli("train --model gcn --dataset er:400:5:3 --features 8 --classes 3 "
                            "--epochs 1 --eval-every 0 --device cpu --format json", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(field(out, "symmetrized"), "fals") << out;
  EXPECT_EQ(field(out, "normalized_features"), "fals") << out;
  const auto nnz_of = [](const std::string& o) {
    const auto at = o.find("\"nnz\": ");
    return std::stoll(o.substr(at + 7));
  };
  const long long directed = nnz_of(out);
  out = run_cli("train --model gcn --dataset er:400:5:3 --features 8 --classes 3 --epochs 1 "
                "--eval-every 0 --device cpu --format json --symmetrize on --normalize-features on",
                &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(field(out, "symmetrized"), "true") << out;
  EXPECT_EQ(field(out, "normalized_features"), "true") << out;
  EXPECT_GT(nnz_of(out), directed);
  out = run_cli("train --model gcn --dataset builtin --epochs 1 --device cpu", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("features as given (auto: signed"), std::string::npos) << out;
}

// --profile: the phase table (and its JSON form) after training; trainable eps and GAT + MaxK
// reach the CLI.
TEST(TrainCli, ProfileTableAndJson) {
  int rc = 0;
  std::string out = run_cli("train --model sage --dataset builtin --epochs 5 --device cpu --profile", &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const char* row : {"profile", "aggregation forward", "aggregation backward", "dense GEMM",
                          "elementwise", "optimizer (Adam)", "other (host, gaps)", "epoch"})
    EXPECT_NE(out.find(row), std::string::npos) << row << " missing in " << out;
  out = run_cli("train --model gin --train-eps --maxk 4 --hidden 16 --dataset builtin --epochs 5 "
                "--device cpu --profile --format json", &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const char* key : {"\"profile\"", "\"median_ms\"", "\"maxk_cbsr\"", "\"other\"",
                          "\"total\"", "\"train_eps\": true"})
    EXPECT_NE(out.find(key), std::string::npos) << key << " missing in " << out;
  out = run_cli("train --model gat --maxk 4 --hidden 4 --heads 2 --dataset builtin --epochs 3 --device cpu", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("gat+maxk"), std::string::npos) << out;
}

}  // namespace
}  // namespace spgnn::test

// spgnn train: full-batch node classification with GCN / GraphSAGE / GIN / GAT (+ MaxK) on the
// built-in dataset, a dataset directory, an OGB raw directory or any graph with synthetic
// features; a progress line per epoch, then test accuracy at the best validation epoch, median
// ms per epoch and peak GPU memory (table or --format json); --profile adds where an epoch's
// time goes, phase by phase.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "spgnn/commands.hpp"
#include "spgnn/common.hpp"
#include "spgnn/nn/model.hpp"
#include "spgnn/tune.hpp"

namespace spgnn::cli {

namespace {

struct TrainOpts {
  std::string model = "gcn";
  std::string dataset = "builtin";
  int64_t maxk = 0, hidden = 16, layers = 2, heads = 8, epochs = 200;
  double lr = 0.01, dropout = 0.5, attn_dropout = -1, weight_decay = 5e-4;
  uint64_t seed = 1;
  std::string device = "auto";
  std::string strategy = "auto";
  std::string format = "table";
  std::string save, load;
  std::string normalize = "auto";
  std::string edge_index_rows = "auto";
  std::string symmetrize = "auto";
  int64_t features = 64, classes = 8;
  bool features_given = false, classes_given = false;
  std::string split;
  int64_t eval_every = 1;
  bool tune = false;
  bool profile = false, train_eps = false, tf32 = false, no_tf32 = false;
  std::string dtype = "f32";
};

// A finite number > 0 (strict) or >= 0; NaN and infinity fail both (an infinite learning rate or
// weight decay turns every weight into NaN).
CLI::Validator above_zero(bool strict) {
  if (strict) return number_that([](double v) { return std::isfinite(v) && v > 0; },
                                 "a finite number > 0");
  return number_that([](double v) { return std::isfinite(v) && v >= 0; },
                     "a finite number >= 0");
}

// --normalize-features auto row-normalises sparse non-negative features (bag-of-words counts or
// indicators with at most kSparseFeatures of the entries non-zero), the preprocessing the GCN
// and GAT papers apply to such features, and leaves every other feature matrix as it is, as PyG
// does. Measured with spgnn train's defaults on the CPU, mean test accuracy of seeds 1-5, off ->
// on: Cora (1.3% non-zero, 0/1) GCN 80.0 -> 81.6, GAT 80.0 -> 82.0; CiteSeer (0.9%, 0/1) GCN
// 68.1 -> 71.3, GAT 67.7 -> 71.5; Coauthor CS (0.9%, counts) GCN 89.1 -> 89.8, GAT 89.8 -> 90.6;
// Amazon Computers (35%, 0/1) GCN 59.4 -> 40.7, GAT 83.8 -> 70.6.
constexpr double kSparseFeatures = 0.10;

struct FeatureFacts {
  double nonzero_fraction = 1;
  bool non_negative = false;
  bool sparse_counts() const { return non_negative && nonzero_fraction <= kSparseFeatures; }
};

FeatureFacts feature_facts(const Tensor& x) {
  FeatureFacts f;
  if (!x.defined() || x.numel() == 0 || x.dtype() != DType::f32 || x.device().is_cuda()) return f;
  const float* p = x.data<float>();
  int64_t nonzero = 0, negative = 0;
#pragma omp parallel for reduction(+ : nonzero, negative)
  for (int64_t i = 0; i < x.numel(); ++i) {
    nonzero += p[i] != 0.f;
    negative += p[i] < 0.f;
  }
  f.nonzero_fraction = double(nonzero) / double(x.numel());
  f.non_negative = negative == 0;
  return f;
}

bool is_ogb_raw_dir(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char* f : {"/raw/edge.csv.gz", "/raw/edge.csv", "/raw/edge.csv.zst"})
    if (fs::exists(path + f, ec)) return true;
  return false;
}

// --symmetrize auto: OGB raw directories only (their edge lists are directed and OGB's own node
// classification examples make them undirected); every other graph is taken as given, as PyG
// takes an edge_index.
bool symmetrize_training_graph(const TrainOpts& o) {
  return o.symmetrize == "on" || (o.symmetrize == "auto" && is_ogb_raw_dir(o.dataset));
}

Dataset load_training_data(const TrainOpts& o, bool show_progress) {
  nn::DatasetOptions dopt;
  dopt.symmetrize = symmetrize_training_graph(o);
  dopt.synthetic_features = o.features;
  dopt.synthetic_classes = o.classes;
  dopt.ogb_split = o.split;
  dopt.seed = o.seed;
  dopt.edge_index_rows = parse_edge_index_rows(o.edge_index_rows);
  // A split scheme names a folder of an OGB raw directory; generated datasets have their own.
  SPGNN_CHECK(o.split.empty() || (o.dataset != "builtin" && !is_generator_spec(o.dataset)),
              InvalidArgument, "--split ", o.split, ": split schemes belong to OGB raw "
              "directories (raw/, split/<scheme>/), not to the generated dataset '", o.dataset, "'");
  if (o.dataset == "builtin") return nn::load_dataset("builtin", dopt);
  if (o.dataset.rfind("planted:", 0) == 0) {
    // The spec's SEED generates the data; without one, --seed does (as for the other generators'
    // synthetic features).
    Dataset d = generate_planted_partition(planted_params(o.dataset, o.seed));
    d.name = o.dataset;
    return d;
  }
  if (is_generator_spec(o.dataset)) {
    ReadOptions ro;
    ro.build.symmetrize = dopt.symmetrize;
    ro.keep_values = false;
    Dataset d = nn::synthetic_dataset(load_graph(o.dataset, ro, show_progress), o.features,
                                      o.classes, o.seed);
    d.name = o.dataset + " (synthetic features)";
    return d;
  }
  Progress prog("loading " + o.dataset, show_progress);
  Dataset d = nn::load_dataset(o.dataset, dopt);
  prog.done();
  return d;
}

// `shown` is the latest evaluated epoch (s itself when it was evaluated): with --eval-every N the
// accuracies of the epochs in between are not measured, and printing them as 0 read as a model
// that had collapsed. A log line says which epoch its accuracies come from when it is not its own.
void print_progress(const nn::EpochStats& s, const nn::EpochStats* shown, int64_t epochs, bool tty) {
  const int width = 24;
  const int fill = epochs > 0 ? int(s.epoch * width / epochs) : width;
  char acc[96];
  if (shown == nullptr)
    std::snprintf(acc, sizeof acc, "train   -    val   -  ");
  else if (shown->epoch == s.epoch)
    std::snprintf(acc, sizeof acc, "train %.3f  val %.3f", shown->train_acc, shown->val_acc);
  else
    std::snprintf(acc, sizeof acc, "train %.3f  val %.3f (epoch %lld)", shown->train_acc,
                  shown->val_acc, (long long)shown->epoch);
  char line[320];
  std::snprintf(line, sizeof line, "[%s%s] epoch %4lld/%lld  loss %.4f  %s  %.1f ms",
                std::string(size_t(fill), '#').c_str(), std::string(size_t(width - fill), '.').c_str(),
                (long long)s.epoch, (long long)epochs, s.loss, acc, s.ms);
  if (tty) {
    std::fprintf(stderr, "\r%s", line);
    if (s.epoch >= epochs) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "%s\n", line);
  }
  std::fflush(stderr);
}

// Medians per phase over the training epochs; shares are of the median epoch.
void print_profile(const nn::TrainResult& r, Device dev) {
  const nn::PhaseTimes& m = r.profile_median;
  std::printf("profile       median of %zu epochs (%s)\n", r.profile.size(),
              dev.is_cuda() ? "CUDA events" : "steady clock");
  auto row = [&](const char* label, double ms) {
    std::printf("  %-26s %10.3f ms  %5.1f%%\n", label, ms, m.total_ms > 0 ? 100.0 * ms / m.total_ms : 0.0);
  };
  for (size_t k = 0; k < nn::kNumPhases; ++k) row(nn::phase_label(nn::Phase(k)), m.ms[k]);
  row("other (host, gaps)", m.other_ms);
  row("epoch", m.total_ms);
}

void run_train(const TrainOpts& o) {
  const bool json = o.format == "json";
  const bool tty = isatty(STDERR_FILENO);
  Device dev = o.device == "auto" ? (cuda_available() ? Device::cuda() : Device::cpu())
                                  : parse_device(o.device);
  SPGNN_CHECK(!dev.is_cuda() || cuda_available(), Unsupported, "--device ", o.device,
              ": no CUDA device in this build or machine (use --device cpu)");
  Dataset data = load_training_data(o, tty);
  // --features and --classes size the random data of graphs that come without any; a dataset
  // with its own features and labels would otherwise ignore them without a word.
  SPGNN_CHECK(data.synthetic || !(o.features_given || o.classes_given), InvalidArgument,
              o.features_given ? "--features" : "--classes", ": sizes the random features and "
              "labels of a graph that has none; dataset '", o.dataset, "' has its own (",
              data.x.dim(1), " features, ", data.num_classes, " classes): leave the flag out");
  nn::check_dataset(data);

  nn::ModelConfig mc;
  mc.kind = nn::parse_conv_kind(o.model);
  mc.in = data.x.dim(1);
  mc.classes = data.num_classes;
  mc.hidden = o.hidden;
  mc.layers = o.layers;
  mc.heads = o.heads;
  mc.maxk = o.maxk;
  mc.dropout = o.dropout;
  mc.attn_dropout = o.attn_dropout;
  mc.seed = o.seed;
  mc.train_eps = o.train_eps;
  nn::Model model(mc, DType::f32, dev);
  if (!o.load.empty()) model.load(o.load);

  nn::TrainConfig tc;
  tc.epochs = o.epochs;
  tc.adam.lr = o.lr;
  tc.adam.weight_decay = o.weight_decay;
  tc.seed = o.seed;
  tc.eval_every = o.eval_every;
  tc.profile = o.profile;
  // Half training takes tensor-core GEMMs too (the "GEMMs on tensor cores"); float32
  // runs stay exact unless asked.
  tc.allow_tf32 = o.tf32 || (o.dtype != "f32" && !o.no_tf32);
  tc.aggregation_dtype = feature_dtype(o.dtype);
  tc.options.schedule = parse_schedule(o.strategy);
  // --tune: `auto` tunes each (graph, op, width) the tuning cache does not know yet, once, on
  // the tuner's own tensors, and stores it (spgnn tune --show-cache lists the entries).
  if (o.tune) set_tune_on_miss(true);
  const FeatureFacts facts = feature_facts(data.x);
  tc.normalize_features = o.normalize == "on" || (o.normalize == "auto" && facts.sparse_counts());

  const int64_t every = std::max<int64_t>(1, o.epochs / 20);
  if (!json) {
    std::printf("dataset  %s: %lld vertices, %lld edges, %lld features, %lld classes, split %lld/%lld/%lld\n",
                data.name.c_str(), (long long)data.graph.n_rows, (long long)data.graph.nnz(),
                (long long)data.x.dim(1), (long long)data.num_classes,
                (long long)data.train_idx.numel(), (long long)data.val_idx.numel(),
                (long long)data.test_idx.numel());
    char why[96] = "";
    if (o.normalize == "auto")
      std::snprintf(why, sizeof why, " (auto: %s, %.1f%% non-zero)",
                    facts.non_negative ? "non-negative" : "signed", 100 * facts.nonzero_fraction);
    std::printf("input    graph %s, features %s%s\n",
                symmetrize_training_graph(o) ? "symmetrized (--symmetrize)" : "as given",
                tc.normalize_features ? "row-normalised" : "as given", why);
    std::printf("model    %s (%lld parameters) on %s\n", nn::describe(mc).c_str(),
                (long long)model.num_parameters(), dev.str().c_str());
    if (o.dtype != "f32") {
      // Say what the half dtype covers: SpMM aggregations only where the GPU's half kernel is
      // faster, GAT's attention always (its fused kernels read half rows).
      std::printf("dtype    %s %s, float32 weights and Adam, %s GEMMs%s\n", o.dtype.c_str(),
                  mc.kind == nn::ConvKind::gat
                      ? "attention (feat and weights; el, er float32)"
                      : dev.is_cuda() ? "aggregations (where the GPU's half SpMM is faster)"
                                      : "aggregations",
                  tc.allow_tf32 && dev.is_cuda() ? "TF32" : "float32",
                  o.dtype == "f16" ? ", dynamic loss scaling" : "");
    }
    std::fflush(stdout);
  }
  std::optional<nn::EpochStats> last_eval;
  const nn::TrainResult r = nn::train(model, data, tc, [&](const nn::EpochStats& s) {
    if (o.epochs == 0) return;
    if (s.evaluated) last_eval = s;
    if (tty || s.epoch % every == 0 || s.epoch == o.epochs)
      print_progress(s, last_eval ? &*last_eval : nullptr, o.epochs, tty);
  });
  if (!o.save.empty()) model.save(o.save);

  const nn::EpochStats& last = r.history.back();
  if (json) {
    nlohmann::json j;
    j["dataset"] = data.name;
    j["n"] = data.graph.n_rows;
    j["nnz"] = data.graph.nnz();
    j["symmetrized"] = symmetrize_training_graph(o);
    j["normalized_features"] = tc.normalize_features;
    j["model"] = o.model;
    j["maxk"] = o.maxk;
    j["layers"] = o.layers;
    j["hidden"] = o.hidden;
    j["heads"] = o.heads;
    j["device"] = dev.str();
    j["parameters"] = model.num_parameters();
    j["epochs"] = o.epochs;
    j["best_epoch"] = r.best_epoch;
    // An empty split has no accuracy (null): 0 would read as a model that got every vertex wrong.
    j["best_val_acc"] = data.val_idx.numel() ? nlohmann::json(r.best_val_acc) : nlohmann::json();
    j["test_acc"] = data.test_idx.numel() ? nlohmann::json(r.test_acc_at_best) : nlohmann::json();
    j["final_loss"] = last.loss;
    j["final_train_acc"] = last.train_acc;
    j["ms_per_epoch"] = r.median_ms;
    j["peak_gpu_bytes"] = r.peak_device_bytes;
    j["tf32"] = tc.allow_tf32;
    if (o.dtype == "f16") {
      j["skipped_steps"] = r.skipped_steps;
      j["loss_scale"] = r.loss_scale;
    }
    j["dtype"] = o.dtype;
    j["train_eps"] = o.train_eps;
    if (o.profile && !r.profile.empty()) {
      nlohmann::json pj;
      pj["timer"] = dev.is_cuda() ? "cuda_events" : "steady_clock";
      pj["epochs"] = r.profile.size();
      nlohmann::json med;
      for (size_t k = 0; k < nn::kNumPhases; ++k)
        med[nn::phase_name(nn::Phase(k))] = r.profile_median.ms[k];
      med["other"] = r.profile_median.other_ms;
      med["total"] = r.profile_median.total_ms;
      pj["median_ms"] = med;
      j["profile"] = pj;
    }
    nlohmann::json hist = nlohmann::json::array();
    for (const auto& s : r.history) {  // accuracies are null where the epoch was not evaluated
      nlohmann::json e = {{"epoch", s.epoch}, {"loss", s.loss}, {"train_acc", nullptr},
                          {"val_acc", nullptr}, {"ms", s.ms}};
      if (s.evaluated) {
        e["train_acc"] = s.train_acc;
        e["val_acc"] = s.val_acc;
      }
      hist.push_back(std::move(e));
    }
    j["history"] = hist;
    std::cout << j.dump(2) << "\n";
    return;
  }
  const auto acc = [](const Tensor& split, double a) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", a);
    return split.numel() ? std::string(buf) : std::string("n/a (empty split)");
  };
  std::printf("test accuracy %s at best validation accuracy %s (epoch %lld)\n",
              acc(data.test_idx, r.test_acc_at_best).c_str(),
              acc(data.val_idx, r.best_val_acc).c_str(), (long long)r.best_epoch);
  if (o.epochs > 0) std::printf("time          %.3f ms/epoch (median of %lld)\n", r.median_ms, (long long)o.epochs);
  if (o.dtype == "f16" && o.epochs > 0)
    std::printf("loss scale    %g at the end, %lld step(s) skipped for non-finite gradients\n",
                r.loss_scale, (long long)r.skipped_steps);
  if (dev.is_cuda()) std::printf("GPU memory    %s peak (sampled)\n", human_bytes(double(r.peak_device_bytes)).c_str());
  if (o.profile && !r.profile.empty()) print_profile(r, dev);
  if (!o.save.empty()) std::printf("saved         %s\n", o.save.c_str());
}

}  // namespace

void register_train(CLI::App& app) {
  auto o = std::make_shared<TrainOpts>();
  auto* cmd = app.add_subcommand("train", "Train a GNN (GCN, GraphSAGE, GIN, GAT, optionally MaxK) "
                                          "full-batch for node classification");
  cmd->add_option("--model", o->model, "gcn, sage, gin or gat")
      ->check(CLI::IsMember({"gcn", "sage", "graphsage", "gin", "gat"}))->capture_default_str();
  cmd->add_option("--dataset", o->dataset,
                  "builtin, a dataset directory (x.npy, y.npy, edge_index.npy, *_idx.npy or "
                  "*_mask.npy), an OGB "
                  "raw directory, a graph file or spec (synthetic features)")->capture_default_str();
  cmd->add_option("--maxk", o->maxk, "MaxK: keep the k largest hidden features instead of ReLU (0 = off)")
      ->capture_default_str();
  cmd->add_option("--hidden", o->hidden, "hidden width (per head for GAT)")->capture_default_str();
  cmd->add_option("--layers", o->layers, "number of graph layers")->capture_default_str();
  cmd->add_option("--heads", o->heads, "GAT attention heads of hidden layers")->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "training epochs (0: evaluate a --load'ed model)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))->capture_default_str();
  cmd->add_option("--lr", o->lr, "Adam learning rate")->check(above_zero(true))
      ->capture_default_str();
  cmd->add_option("--dropout", o->dropout, "dropout on every layer's input")->capture_default_str();
  cmd->add_option("--attn-dropout", o->attn_dropout, "GAT attention dropout (-1: same as --dropout)")
      ->check(number_that([](double v) { return v == -1 || (v >= 0 && v < 1); },
                          "-1 (the same as --dropout) or in [0, 1)"))
      ->capture_default_str();
  cmd->add_option("--weight-decay", o->weight_decay, "Adam L2 weight decay (weights, not biases)")
      ->check(above_zero(false))->capture_default_str();
  add_seed_option(*cmd, o->seed, "initialisation, dropout and synthetic data seed");
  cmd->add_option("--device", o->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--strategy", o->strategy, "SpMM schedule of the aggregations (auto, cpu_mergepath, "
                  "gnnone, ...; see `spgnn strategies`)")->capture_default_str();
  cmd->add_option("--format", o->format, "table or json")->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  // Checked up front: a checkpoint that cannot be written failed only after the training.
  cmd->add_option("--save", o->save, "write a checkpoint after training (atomically)")
      ->check(CLI::Validator(
          [](std::string& path) -> std::string {
            const std::filesystem::path p(path);
            if (std::filesystem::is_directory(p)) return "'" + path + "' is a directory";
            const std::filesystem::path dir = std::filesystem::absolute(p).parent_path();
            if (!std::filesystem::is_directory(dir))
              return "no directory '" + dir.string() + "' to write it in";
            if (access(dir.c_str(), W_OK) != 0) return "cannot write in '" + dir.string() + "'";
            return "";
          },
          "FILE"));
  cmd->add_option("--load", o->load, "start from a checkpoint of the same model");
  cmd->add_option("--normalize-features", o->normalize, "row-normalise features: auto (sparse "
                  "non-negative features, at most 10% non-zero, as the GCN/GAT papers do; dense "
                  "or signed ones are left as they are), on, off")->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  add_edge_index_rows_flag(*cmd, o->edge_index_rows);
  cmd->add_option("--symmetrize", o->symmetrize, "add the reverse of every edge: auto (OGB raw "
                  "directories only, as OGB's examples do), on, off (edges as given, as PyG "
                  "takes them)")->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  auto* features = cmd->add_option("--features", o->features,
                                   "synthetic feature width (graphs without features)")
                       ->check(at_least(1))->capture_default_str();
  auto* classes = cmd->add_option("--classes", o->classes,
                                  "synthetic classes (graphs without labels)")
                      ->check(at_least(2))->capture_default_str();
  cmd->add_option("--split", o->split, "OGB split scheme folder (default: the one present)");
  cmd->add_option("--eval-every", o->eval_every, "evaluate every N epochs (0: only at the end)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))->capture_default_str();
  cmd->add_flag("--profile", o->profile, "after training, print where an epoch's time goes (medians "
                                         "per phase; CUDA events on the GPU)");
  cmd->add_flag("--train-eps", o->train_eps, "GIN: train eps (PyG's GINConv(train_eps=True))");
  auto* tf32 = cmd->add_flag("--tf32", o->tf32,
                             "GPU GEMMs on TF32 tensor cores (faster, ~1e-3 relative error); the "
                             "default with --dtype bf16|f16, off with f32");
  cmd->add_flag("--no-tf32", o->no_tf32, "float32 GEMMs even with --dtype bf16|f16")
      ->excludes(tf32);
  cmd->add_option("--dtype", o->dtype,
                  "f32, bf16 or f16: the sum/mean aggregations (GCN, SAGE, GIN) move bfloat16 or "
                  "float16 with float32 accumulation where that is faster on the GPU (wide rows of "
                  "regular graphs; float32 elsewhere), GEMMs run on TF32 tensor cores (--no-tf32: "
                  "float32); weights, activations and Adam stay float32; GAT and MaxK aggregate in float32. f16 adds "
                  "dynamic loss scaling (a step with non-finite gradients is skipped and the scale "
                  "halved)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_flag("--tune", o->tune, "auto: tune and cache each sparse op shape the tuning cache "
                                   "does not know yet (first epoch is slower)");
  cmd->callback([o, features, classes] {
    o->features_given = features->count() > 0;
    o->classes_given = classes->count() > 0;
    run_train(*o);
  });
}

}  // namespace spgnn::cli

// Models (stacks of graph convolutions), the full-batch training loop, checkpoints and the
// datasets a training run reads.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spgnn/graph.hpp"
#include "spgnn/io.hpp"
#include "spgnn/nn/functional.hpp"
#include "spgnn/nn/layers.hpp"
#include "spgnn/nn/profile.hpp"

namespace spgnn::nn {

struct ModelConfig {
  ConvKind kind = ConvKind::gcn;
  int64_t in = 0, hidden = 16, classes = 0;
  int64_t layers = 2;
  int64_t heads = 8;         // GAT hidden layers (the output layer has one head)
  int64_t maxk = 0;          // > 0: MaxK (k of hidden) instead of ReLU in hidden layers: before
                             // the aggregation (CBSR kernels) for gcn/sage/gin; for gat, as the
                             // nonlinearity between layers (k of heads * hidden)
  bool train_eps = false;    // GIN: trainable eps (PyG's GINConv(train_eps=True)), starting at 0
  double dropout = 0.5;      // on each layer's input while training
  double attn_dropout = -1;  // GAT; < 0 means "same as dropout"
  uint64_t seed = 1;         // initialisation and dropout masks
};
std::string describe(const ModelConfig& c);

class Model {
 public:
  Model(const ModelConfig& config, DType dtype = DType::f32, Device device = Device::cpu());
  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  // Logits [n, classes]. `step` picks the dropout masks (reproducible for a seed and step).
  // Hidden activations live in buffers the model reuses on the next forward; the logits are a
  // fresh tensor every call.
  Tensor forward(GraphContext& ctx, const Tensor& x, bool training, uint64_t step = 0);
  // Back-propagates d loss / d logits of the last forward; fills every parameter's grad.
  void backward(GraphContext& ctx, const Tensor& grad_logits);
  std::vector<Parameter*> parameters();
  int64_t num_parameters();
  Layer& layer(size_t i) { return *layers_[i]; }
  size_t num_layers() const { return layers_.size(); }
  // What the last forward fed layer i: x (dropped out while training) for the first layer, the
  // previous layer's output after its activation (or MaxK) and dropout for the others. The
  // caller's x itself when nothing dropped it out, else one of the model's own buffers, which
  // the next forward overwrites; for inspecting activations (the GPU tests find GAT logits at
  // the LeakyReLU's kink through it).
  const Tensor& layer_input(size_t i) const;

  // Checkpoints: magic, version, the config as JSON, then every parameter (name, shape,
  // float32 data), written atomically. load() checks that the file's config matches.
  void save(const std::string& path);
  void load(const std::string& path);
  // Config stored in a checkpoint (to build the matching model before load()).
  static ModelConfig read_config(const std::string& path);

 private:
  ModelConfig config_;
  DType dtype_;
  Device device_;
  std::vector<std::unique_ptr<Layer>> layers_;
  Activation act_ = Activation::relu;
  int64_t maxk_act_ = 0;  // GAT + MaxK: MaxK between layers instead of act_
  // Saved by forward for backward.
  std::vector<Tensor> outputs_;  // input of layer i + 1: dropout(act(output of layer i))
  std::vector<Cbsr> kept_;       // GAT + MaxK (float32): the kept entries of each hidden output
  std::vector<Tensor> masks_;    // GAT + MaxK (float64): their 0/1 masks
  std::vector<Tensor> dense_;    // GAT + MaxK (float32): the kept entries, dense (next input)
  Tensor at_kept_, grad_dense_;  // GAT + MaxK backward workspaces
  Tensor x_drop_;                // the first layer's dropped-out input, reused every epoch
  Tensor input_;                 // what the last forward fed the first layer (x or x_drop_)
  uint64_t last_step_ = 0;
  bool last_training_ = false;
};

struct TrainConfig {
  int64_t epochs = 200;
  AdamParams adam{0.01, 0.9, 0.999, 1e-8, 5e-4};
  bool normalize_features = false;  // row-normalise x (sum 1) before training
  int64_t eval_every = 1;           // 0: evaluate only after the last epoch
  uint64_t seed = 1;
  OpOptions options;                // schedule of the sparse ops
  bool profile = false;             // time every phase of the training step (TrainResult::profile)
  bool allow_tf32 = false;          // TF32 GEMMs on the GPU (opt-in; see set_allow_tf32)
  DType aggregation_dtype = DType::f32;  // f32, bf16 or f16 (see set_aggregation_dtype)
  // float16 aggregations: dynamic loss scaling, as torch.amp.GradScaler does it. The loss gradient
  // is multiplied by the scale before the backward; a step whose weight gradients are not all
  // finite is skipped and the scale halved; after `growth_interval` good steps in a row it
  // doubles. The weight gradients are divided by the scale before Adam.
  double loss_scale = 65536.0;
  int64_t loss_scale_growth_interval = 2000;
};

struct EpochStats {
  int64_t epoch = 0;
  double loss = 0, train_acc = 0, val_acc = 0, test_acc = 0;
  double ms = 0;        // the training step (forward, loss, backward, Adam), synchronised
  bool evaluated = false;
};

struct TrainResult {
  std::vector<EpochStats> history;
  int64_t best_epoch = -1;
  double best_val_acc = 0, test_acc_at_best = 0;
  double median_ms = 0;
  size_t peak_device_bytes = 0;  // device memory in use (sampled after forward/backward) above
                                 // what was in use before training
  std::vector<PhaseTimes> profile;  // per training epoch, when TrainConfig::profile
  PhaseTimes profile_median;        // field-wise medians of `profile`
  int64_t skipped_steps = 0;        // float16 aggregations: steps skipped for non-finite gradients
  double loss_scale = 0;            // float16 aggregations: the loss scale after the last epoch
};

// Trains `model` on `data` (features, labels, split) full-batch; `on_epoch` sees every epoch.
TrainResult train(Model& model, const Dataset& data, const TrainConfig& config,
                  const std::function<void(const EpochStats&)>& on_epoch = {});

// ---- datasets ------------------------------------------------------------------------------------
struct DatasetOptions {
  // Graph files and generator graphs get synthetic features and labels of these sizes.
  int64_t synthetic_features = 64, synthetic_classes = 8;
  std::string ogb_split = "";  // OGB split scheme folder; empty: the only one present
  bool symmetrize = true;      // make the training graph undirected (OGB edge lists are directed)
  uint64_t seed = 1;
  EdgeIndexRows edge_index_rows = EdgeIndexRows::automatic;  // edge_index .npy files
};
// "builtin" (planted partition, 2000 vertices, 4 classes), a dataset directory (edge_index.npy
// + x.npy + y.npy + split files: train/val/test_idx.npy int index arrays, or
// train/val/test_mask.npy bool or uint8 [n] masks), an OGB raw directory (raw/edge.csv.gz, raw/node-feat.csv.gz,
// raw/node-label.csv.gz, split/<scheme>/{train,valid,test}.csv.gz), or a graph file (.spg,
// .mtx, edge .npy, SNAP) which gets synthetic features / labels. Inconsistent files are a
// FormatError naming the file.
Dataset load_dataset(const std::string& spec, const DatasetOptions& options = {});
Dataset read_ogb_dir(const std::string& dir, const DatasetOptions& options = {});
// Random features and labels (uniform classes, 60/20/20 split) on any graph: for speed runs.
Dataset synthetic_dataset(Graph g, int64_t features, int64_t classes, uint64_t seed);
// Row-normalises features in place (rows summing to 0 stay 0).
void normalize_rows_(Tensor& x);
// Checks a dataset before training: shapes, label range, split ids; throws InvalidArgument.
void check_dataset(const Dataset& d);

}  // namespace spgnn::nn

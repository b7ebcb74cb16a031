// Models, the full-batch training loop and checkpoints.
#include "spgnn/nn/model.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>

#include "io/io_internal.hpp"
#include "nn/layers_internal.hpp"
#include "nn/profile.hpp"
#include "spgnn/io.hpp"

namespace spgnn::nn {

std::string describe(const ModelConfig& c) {
  std::ostringstream os;
  os << conv_name(c.kind) << (c.maxk ? "+maxk" : "") << ": " << c.layers << " layers, " << c.in
     << " -> " << c.hidden;
  if (c.kind == ConvKind::gat) os << " x " << c.heads << " heads";
  os << " -> " << c.classes << ", dropout " << c.dropout;
  if (c.maxk) os << ", k " << c.maxk;
  if (c.train_eps) os << ", trainable eps";
  return os.str();
}

namespace {
void check_config(const ModelConfig& c) {
  SPGNN_CHECK(c.in > 0, InvalidArgument, "model: input width 'in' must be positive, got ", c.in);
  SPGNN_CHECK(c.classes >= 2, InvalidArgument, "model: 'classes' must be at least 2, got ",
              c.classes);
  SPGNN_CHECK(c.layers >= 1 && c.layers <= 64, InvalidArgument,
              "model: 'layers' must be in [1, 64], got ", c.layers);
  SPGNN_CHECK(c.hidden >= 1, InvalidArgument, "model: 'hidden' must be positive, got ", c.hidden);
  SPGNN_CHECK(c.heads >= 1, InvalidArgument, "model: 'heads' must be positive, got ", c.heads);
  // The layers keep their rates in float: 0.99999999 < 1 in double rounds to 1.0f.
  SPGNN_CHECK(c.dropout >= 0 && float(c.dropout) < 1, InvalidArgument,
              "model: 'dropout' must be in [0, 1) as a float32, got ", c.dropout);
  // a negative value means "the same as dropout"
  SPGNN_CHECK(float(c.attn_dropout) < 1, InvalidArgument,
              "model: 'attn_dropout' must be below 1, got ", c.attn_dropout);
  const int64_t width = c.kind == ConvKind::gat ? c.hidden * c.heads : c.hidden;
  SPGNN_CHECK(c.maxk >= 0 && c.maxk <= width, InvalidArgument, "model: 'maxk' must be in [0, ",
              c.kind == ConvKind::gat ? "hidden * heads = " : "hidden = ", width, "], got ", c.maxk);
  SPGNN_CHECK(!c.train_eps || c.kind == ConvKind::gin, InvalidArgument,
              "model: a trainable eps (train_eps) applies to gin only, not ", conv_name(c.kind));
  SPGNN_CHECK(c.maxk == 0 || c.layers >= 2, InvalidArgument,
              "model: MaxK acts on hidden layers; a 1-layer model has none (maxk = ", c.maxk, ")");
}

uint64_t dropout_seed(uint64_t seed, uint64_t step, size_t layer) {
  return seed * 1000003ULL + step * 131ULL + layer + 17;
}
}  // namespace

Model::Model(const ModelConfig& config, DType dtype, Device device)
    : config_(config), dtype_(dtype), device_(device) {
  check_config(config);
  const bool gat = config.kind == ConvKind::gat;
  // MaxK replaces the nonlinearity: inside gcn/sage/gin layers (before their aggregation), and
  // between GAT layers (whose attention needs dense heads).
  maxk_act_ = gat ? config.maxk : 0;
  act_ = config.maxk > 0 ? Activation::none : (gat ? Activation::elu : Activation::relu);
  int64_t in = config.in;
  for (int64_t i = 0; i < config.layers; ++i) {
    const bool last = i == config.layers - 1;
    ConvSpec s;
    s.kind = config.kind;
    s.in = in;
    s.out = last ? config.classes : config.hidden;
    s.heads = gat && !last ? config.heads : 1;
    s.attn_dropout = float(config.attn_dropout < 0 ? config.dropout : config.attn_dropout);
    s.maxk = last || gat ? 0 : config.maxk;
    s.gin_hidden = config.hidden;
    s.train_eps = config.train_eps;
    s.seed = config.seed * 7777ULL + uint64_t(i) * 101ULL;
    layers_.push_back(make_conv(s, dtype, device));
    // Hidden outputs and input gradients flow only between this model's layers, each consumed
    // before the next call, so their buffers are reused; the logits are handed out fresh.
    layers_.back()->reuse_buffers(!last, true);
    in = layers_.back()->out_width();
  }
}

namespace {
OpOptions maxk_options(const GraphContext& ctx) {
  OpOptions o;
  o.stream = ctx.options().stream;
  return o;
}
}  // namespace

Tensor Model::forward(GraphContext& ctx, const Tensor& x, bool training, uint64_t step) {
  SPGNN_CHECK(x.defined() && x.ndim() == 2 && x.dim(1) == config_.in && x.dim(0) == ctx.n(),
              InvalidArgument, "Model::forward: 'x' must be [n = ", ctx.n(), ", in = ", config_.in,
              "], got ", x.defined() ? x.shape_str() : "undefined");
  SPGNN_CHECK(x.dtype() == dtype_ && x.device() == device_ && ctx.device() == device_,
              InvalidArgument, "Model::forward: 'x' (", dtype_name(x.dtype()), " on ",
              x.device().str(), ") and the graph context (", ctx.device().str(),
              ") must match the model (", dtype_name(dtype_), " on ", device_.str(), ")");
  detail::ProfilePass pass(false);
  last_step_ = step;
  last_training_ = training;
  const size_t L = layers_.size();
  outputs_.assign(L, Tensor());
  // kept_ and dense_ keep their buffers across epochs (rewritten below before any read).
  kept_.resize(maxk_act_ > 0 ? L : 0);
  dense_.resize(maxk_act_ > 0 ? L : 0);
  masks_.assign(maxk_act_ > 0 ? L : 0, Tensor());
  const double p = training ? config_.dropout : 0.0;
  Tensor h = x;
  if (p > 0) {
    dropout(x, p, dropout_seed(config_.seed, step, 0), x_drop_);
    h = x_drop_;
  }
  input_ = h;
  for (size_t i = 0; i < L; ++i) {
    h = layers_[i]->forward(ctx, h, training, dropout_seed(config_.seed ^ 0xA77EULL, step, i));
    if (i + 1 == L) break;
    const uint64_t seed = dropout_seed(config_.seed, step, i + 1);
    if (maxk_act_ > 0) {
      if (h.dtype() == DType::f64) {
        masks_[i] = maxk_mask_f64(h, maxk_act_);
        mul_(h, masks_[i]);
      } else {
        detail::ProfileScope prof(Phase::maxk_cbsr);
        maxk(h, maxk_act_, detail::keep_cbsr(kept_[i], h, maxk_act_), maxk_options(ctx));
        // the kept values, dense
        Tensor& dense = detail::keep(dense_[i], h.shape(), h.dtype(), h.device());
        maxk_backward(kept_[i], kept_[i].data, dense, maxk_options(ctx));
        h = dense;
      }
    }
    // The layer's output buffer becomes the next layer's input in place: one pass for the
    // activation and the dropout of the next layer's input.
    activation_dropout_(h, act_, p, seed);
    outputs_[i] = h;
  }
  return h;
}

const Tensor& Model::layer_input(size_t i) const {
  SPGNN_CHECK(i < layers_.size(), InvalidArgument, "Model::layer_input: layer ", i,
              " out of range (the model has ", layers_.size(), ")");
  SPGNN_CHECK(outputs_.size() == layers_.size(), InvalidArgument,
              "Model::layer_input: no forward pass yet");
  return i == 0 ? input_ : outputs_[i - 1];
}

void Model::backward(GraphContext& ctx, const Tensor& grad_logits) {
  SPGNN_CHECK(!outputs_.empty(), InvalidArgument, "Model::backward: no forward pass to go back through");
  detail::ProfilePass pass(true);
  const double p = last_training_ ? config_.dropout : 0.0;
  Tensor g = grad_logits;
  for (size_t i = layers_.size(); i-- > 0;) {
    g = layers_[i]->backward(ctx, g, i > 0);
    if (i == 0) break;
    activation_dropout_backward_(g, outputs_[i - 1], act_, p, dropout_seed(config_.seed, last_step_, i));
    if (maxk_act_ > 0) {
      if (g.dtype() == DType::f64) {
        mul_(g, masks_[i - 1]);
      } else {
        // d loss / d x at the kept positions (a gather through the identity), scattered back.
        detail::ProfileScope prof(Phase::maxk_cbsr);
        const Cbsr& kept = kept_[i - 1];
        Tensor& at_kept = detail::keep(at_kept_, kept.data.shape(), DType::f32, g.device());
        cbsr_sspmm(ctx.identity(), Tensor(), g, kept, at_kept, maxk_options(ctx));
        Tensor& dg = detail::keep(grad_dense_, g.shape(), g.dtype(), g.device());
        maxk_backward(kept, at_kept, dg, maxk_options(ctx));
        g = dg;
      }
    }
  }
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : layers_)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

int64_t Model::num_parameters() {
  int64_t n = 0;
  for (Parameter* p : parameters()) n += p->value.numel();
  return n;
}

// ---- checkpoints -------------------------------------------------------------------------------

namespace {
constexpr char kMagic[8] = {'S', 'P', 'G', 'N', 'N', 'C', 'K', 'P'};
// Version 2 appends a checksum of every byte before it (io::hash_bytes), so a flipped weight is
// refused instead of loaded; version 1 files (no checksum) still load.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestVersion = 1;

std::string config_text(const ModelConfig& c) {
  std::ostringstream os;
  os.precision(17);
  os << "kind=" << conv_name(c.kind) << "\nin=" << c.in << "\nhidden=" << c.hidden
     << "\nclasses=" << c.classes << "\nlayers=" << c.layers << "\nheads=" << c.heads
     << "\nmaxk=" << c.maxk << "\ndropout=" << c.dropout << "\nattn_dropout=" << c.attn_dropout
     << "\nseed=" << c.seed << "\n";
  if (c.train_eps) os << "train_eps=1\n";  // absent in checkpoints from before it existed
  return os.str();
}

ModelConfig parse_config_text(const std::string& text, const std::string& path) {
  std::map<std::string, std::string> kv;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  auto need = [&](const char* k) -> const std::string& {
    auto it = kv.find(k);
    SPGNN_CHECK(it != kv.end(), FormatError, path, ": checkpoint config lacks '", k, "'");
    return it->second;
  };
  // Whole fields only: std::stoll read "4abc" as 4 and " 4" past its blank.
  auto integer = [&](const char* k, const std::string& v) -> long long {
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    SPGNN_CHECK(!v.empty() && !std::isspace(static_cast<unsigned char>(v[0])) && *end == '\0' &&
                    errno == 0,
                FormatError, path, ": checkpoint config '", k, "=", v, "' is not an integer");
    return x;
  };
  auto real = [&](const char* k) -> double {
    const std::string& v = need(k);
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    SPGNN_CHECK(!v.empty() && !std::isspace(static_cast<unsigned char>(v[0])) && *end == '\0' &&
                    std::isfinite(x),
                FormatError, path, ": checkpoint config '", k, "=", v, "' is not a number");
    return x;
  };
  ModelConfig c;
  try {
    c.kind = parse_conv_kind(need("kind"));
  } catch (const std::exception& e) {
    throw FormatError(path + ": checkpoint config is malformed (" + e.what() + ")");
  }
  c.in = integer("in", need("in"));
  c.hidden = integer("hidden", need("hidden"));
  c.classes = integer("classes", need("classes"));
  c.layers = integer("layers", need("layers"));
  c.heads = integer("heads", need("heads"));
  c.maxk = integer("maxk", need("maxk"));
  c.dropout = real("dropout");
  c.attn_dropout = real("attn_dropout");
  {  // the whole uint64 range (--seed takes any)
    const std::string& v = need("seed");
    char* end = nullptr;
    errno = 0;
    c.seed = std::strtoull(v.c_str(), &end, 10);
    SPGNN_CHECK(!v.empty() && std::isdigit(static_cast<unsigned char>(v[0])) && *end == '\0' &&
                    errno == 0,
                FormatError, path, ": checkpoint config 'seed=", v, "' is not an unsigned integer");
  }
  if (auto it = kv.find("train_eps"); it != kv.end()) c.train_eps = integer("train_eps", it->second) != 0;
  return c;
}

template <class T>
void put(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

struct Reader {
  const std::string& buf;
  const std::string& path;
  size_t pos = 0;
  size_t end = buf.size();  // parse range: a version-2 file's checksum lies past it
  template <class T>
  T get() {
    T v;
    bytes(&v, sizeof v);
    return v;
  }
  void bytes(void* dst, size_t n) {
    SPGNN_CHECK(n <= end - pos, FormatError, path, ": checkpoint is truncated at byte ", pos);
    std::memcpy(dst, buf.data() + pos, n);
    pos += n;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    SPGNN_CHECK(n <= end - pos, FormatError, path, ": checkpoint is truncated at byte ", pos);
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
};

// Reads magic, version and config; returns the config text. From version 2 on, the last 8
// bytes are the checksum of the rest, verified here and then left out of r's parse range.
std::string read_header(const std::string& buf, const std::string& path, Reader& r) {
  char magic[8];
  SPGNN_CHECK(buf.size() >= 12, FormatError, path, ": not an spgnn checkpoint (too short)");
  r.bytes(magic, 8);
  SPGNN_CHECK(std::memcmp(magic, kMagic, 8) == 0, FormatError, path,
              ": not an spgnn checkpoint (bad magic)");
  const uint32_t version = r.get<uint32_t>();
  SPGNN_CHECK(version >= kOldestVersion && version <= kVersion, FormatError, path,
              ": checkpoint version ", version, " is not supported (this spgnn reads ",
              kOldestVersion, " to ", kVersion, ")");
  if (version >= 2) {
    SPGNN_CHECK(buf.size() >= 12 + sizeof(uint64_t), FormatError, path,
                ": checkpoint is truncated (no checksum)");
    r.end = buf.size() - sizeof(uint64_t);
    uint64_t stored;
    std::memcpy(&stored, buf.data() + r.end, sizeof stored);
    SPGNN_CHECK(stored == io::hash_bytes(buf.data(), r.end), FormatError, path,
                ": checksum mismatch (the file is corrupt or truncated)");
  }
  return r.str();
}
}  // namespace

void Model::save(const std::string& path) {
  std::string buf(kMagic, 8);
  put(buf, kVersion);
  const std::string cfg = config_text(config_);
  put(buf, uint64_t(cfg.size()));
  buf += cfg;
  auto params = parameters();
  put(buf, uint64_t(params.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = "layers." + std::to_string(i) + "." + params[i]->name;
    put(buf, uint64_t(name.size()));
    buf += name;
    Tensor h = params[i]->value.to(Device::cpu());
    if (h.dtype() != DType::f32) h = h.astype(DType::f32);
    put(buf, uint64_t(h.ndim()));
    for (int64_t d : h.shape()) put(buf, d);
    buf.append(static_cast<const char*>(h.raw()), h.nbytes());
  }
  put(buf, io::hash_bytes(buf.data(), buf.size()));
  write_file_atomic(path, buf.data(), buf.size());
}

ModelConfig Model::read_config(const std::string& path) {
  const std::string buf = read_file_decompressed(path);
  Reader r{buf, path};
  return parse_config_text(read_header(buf, path, r), path);
}

void Model::load(const std::string& path) {
  const std::string buf = read_file_decompressed(path);
  Reader r{buf, path};
  const ModelConfig c = parse_config_text(read_header(buf, path, r), path);
  SPGNN_CHECK(config_text(c) == config_text(config_), InvalidArgument, path,
              ": checkpoint was saved from a different model (", describe(c), ") than this one (",
              describe(config_), ")");
  auto params = parameters();
  const uint64_t count = r.get<uint64_t>();
  SPGNN_CHECK(count == params.size(), FormatError, path, ": checkpoint holds ", count,
              " parameters, the model has ", params.size());
  for (Parameter* p : params) {
    const std::string name = r.str();
    const uint64_t nd = r.get<uint64_t>();
    SPGNN_CHECK(nd <= 8, FormatError, path, ": parameter '", name, "' has ", nd, " dimensions");
    std::vector<int64_t> shape(nd);
    for (auto& d : shape) d = r.get<int64_t>();
    SPGNN_CHECK(shape == p->value.shape(), FormatError, path, ": parameter '", name,
                "' has the wrong shape for this model");
    Tensor h = Tensor::empty(shape, DType::f32);
    r.bytes(h.raw(), h.nbytes());
    // Training stops at a non-finite loss, so save() never writes NaN/Inf: one here is
    // corruption, and loading it would surface later as a NaN loss that names no file.
    const float* v = h.data<float>();
    for (int64_t i = 0; i < h.numel(); ++i) {
      SPGNN_CHECK(std::isfinite(v[i]), FormatError, path, ": parameter '", name, "' holds ",
                  v[i], " at index ", i, " (a saved model is finite; the file is corrupt)");
    }
    if (p->value.dtype() != DType::f32) h = h.astype(p->value.dtype());
    p->value.copy_from(h);
    p->m = Tensor();
    p->v = Tensor();
  }
  // save() writes nothing after the last parameter: more bytes mean a corrupt file or several
  // files run together, whose first model would otherwise load as if it were the whole file.
  SPGNN_CHECK(r.pos == r.end, FormatError, path, ": ", r.end - r.pos,
              " trailing bytes after the last parameter (expected the file to end at byte ",
              r.pos, "); the checkpoint is corrupt");
}

// ---- training ------------------------------------------------------------------------------------

TrainResult train(Model& model, const Dataset& data, const TrainConfig& config,
                  const std::function<void(const EpochStats&)>& on_epoch) {
  check_dataset(data);
  SPGNN_CHECK(config.epochs >= 0, InvalidArgument, "train: 'epochs' must be >= 0, got ", config.epochs);
  SPGNN_CHECK(data.x.dim(1) == model.config().in, InvalidArgument, "train: the dataset has ",
              data.x.dim(1), " features but the model expects ", model.config().in);
  SPGNN_CHECK(data.num_classes <= model.config().classes, InvalidArgument, "train: the dataset has ",
              data.num_classes, " classes but the model outputs ", model.config().classes);
  const Device dev = model.device();
  const size_t mem_before = device_memory_used(dev);
  Tensor x = data.x;
  if (config.normalize_features) {
    x = x.clone();
    normalize_rows_(x);
  }
  if (model.dtype() != DType::f32) x = x.astype(model.dtype());
  x = dev.is_cuda() ? x.to(dev) : x;
  const Tensor y = data.y.to(dev), train_idx = data.train_idx.to(dev),
               val_idx = data.val_idx.to(dev), test_idx = data.test_idx.to(dev);
  GraphContext ctx(data.graph, dev, config.options);

  TrainResult res;
  size_t peak = 0;
  auto sample_memory = [&] {
    if (dev.is_cuda()) peak = std::max(peak, device_memory_used(dev));
  };
  // TF32 is process-wide in cuBLAS terms: set for this run, restored afterwards.
  struct Tf32Guard {
    bool prev = allow_tf32();
    explicit Tf32Guard(bool on) { set_allow_tf32(on); }
    ~Tf32Guard() { set_allow_tf32(prev); }
  } tf32(config.allow_tf32);
  struct AggregationDtypeGuard {  // the same for the aggregations' dtype
    DType prev = aggregation_dtype();
    explicit AggregationDtypeGuard(DType t) { set_aggregation_dtype(t); }
    ~AggregationDtypeGuard() { set_aggregation_dtype(prev); }
  } aggregation_dtype_guard(config.aggregation_dtype);
  std::unique_ptr<detail::Profiler> profiler;
  if (config.profile) profiler = std::make_unique<detail::Profiler>(dev);
  Tensor grad;
  std::vector<double> times;
  auto params = model.parameters();
  // float16 aggregations: dynamic loss scaling (TrainConfig::loss_scale).
  const bool scaling = config.aggregation_dtype == DType::f16;
  SPGNN_CHECK(!scaling || (config.loss_scale > 0 && std::isfinite(config.loss_scale) &&
                           config.loss_scale_growth_interval > 0),
              InvalidArgument, "train: loss_scale must be positive and finite and "
              "loss_scale_growth_interval positive, got ", config.loss_scale, " and ",
              config.loss_scale_growth_interval);
  double scale = config.loss_scale;
  int64_t good_steps = 0, adam_steps = 0;
  // The weight gradients are small (GNN weights, not features): checking them on the host costs
  // one small copy per step.
  auto grads_finite = [&] {
    for (Parameter* p : params) {
      const Tensor g = p->grad.device().is_cuda() ? p->grad.to(Device::cpu()) : p->grad;
      const float* d = g.data<float>();
      for (int64_t i = 0; i < g.numel(); ++i)
        if (!std::isfinite(d[i])) return false;
    }
    return true;
  };
  for (int64_t epoch = 1; epoch <= config.epochs; ++epoch) {
    EpochStats st;
    st.epoch = epoch;
    synchronize(dev);
    const auto t0 = std::chrono::steady_clock::now();
    {
      detail::ProfilerActivation active(profiler.get());
      if (profiler) profiler->begin_epoch();
      {  // the logits are released before the backward pass
        const Tensor logits = model.forward(ctx, x, true, config.seed * 100003ULL + uint64_t(epoch));
        sample_memory();
        st.loss = log_softmax_nll(logits, y, train_idx, &grad);
      }
      if (scaling) axpy_(grad, scale - 1.0, grad);  // grad *= scale
      model.backward(ctx, grad);
      sample_memory();
      bool step = true;
      if (scaling) {
        step = std::isfinite(st.loss) && grads_finite();
        if (step) {
          for (Parameter* p : params) axpy_(p->grad, 1.0 / scale - 1.0, p->grad);
          if (++good_steps == config.loss_scale_growth_interval) scale *= 2, good_steps = 0;
        } else {
          scale *= 0.5;
          good_steps = 0;
          ++res.skipped_steps;
          SPGNN_CHECK(scale >= 1.0 / 65536, Error, "train: float16 aggregations overflowed at "
                      "every loss scale down to 2^-16 (epoch ", epoch, "): the activations "
                      "themselves exceed float16's range; use bfloat16 (--dtype bf16)");
        }
      }
      if (step) {
        ++adam_steps;
        for (Parameter* p : params) {
          AdamParams a = config.adam;
          if (!p->decay) a.weight_decay = 0;
          adam_step(p->value, p->grad, p->m, p->v, adam_steps, a);
        }
      }
    }
    synchronize(dev);
    st.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    times.push_back(st.ms);
    if (profiler) res.profile.push_back(profiler->end_epoch(st.ms));
    if (!std::isfinite(st.loss) && !scaling)
      throw Error("train: the loss became " + std::to_string(st.loss) + " at epoch " +
                  std::to_string(epoch) + " (learning rate " + std::to_string(config.adam.lr) +
                  " too high?)");
    const bool eval = (config.eval_every > 0 && epoch % config.eval_every == 0) ||
                      epoch == config.epochs;
    if (eval) {
      Tensor out = model.forward(ctx, x, false);
      st.train_acc = accuracy(out, y, train_idx);
      st.val_acc = accuracy(out, y, val_idx);
      st.test_acc = accuracy(out, y, test_idx);
      st.evaluated = true;
      if (res.best_epoch < 0 || st.val_acc > res.best_val_acc) {
        res.best_epoch = epoch;
        res.best_val_acc = st.val_acc;
        res.test_acc_at_best = st.test_acc;
      }
    }
    res.history.push_back(st);
    if (on_epoch) on_epoch(st);
  }
  if (config.epochs == 0) {  // evaluation only (a loaded checkpoint)
    Tensor out = model.forward(ctx, x, false);
    EpochStats st;
    st.train_acc = accuracy(out, y, train_idx);
    st.val_acc = accuracy(out, y, val_idx);
    st.test_acc = accuracy(out, y, test_idx);
    st.loss = log_softmax_nll(out, y, train_idx, nullptr);
    st.evaluated = true;
    res.best_epoch = 0;
    res.best_val_acc = st.val_acc;
    res.test_acc_at_best = st.test_acc;
    res.history.push_back(st);
    if (on_epoch) on_epoch(st);
  }
  if (!times.empty()) {
    std::vector<double> t = times;
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    res.median_ms = t[t.size() / 2];
  }
  res.peak_device_bytes = peak > mem_before ? peak - mem_before : 0;
  if (scaling) res.loss_scale = scale;
  if (!res.profile.empty()) res.profile_median = median_phase_times(res.profile);
  return res;
}

}  // namespace spgnn::nn

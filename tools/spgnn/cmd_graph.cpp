// spgnn generate / convert / info / partition: graph files in and out, what is in them, and
// their partitions for training on several devices.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "spgnn/commands.hpp"
#include "spgnn/common.hpp"
#include "spgnn/io.hpp"
#include "spgnn/nn/model.hpp"
#include "spgnn/partition.hpp"

namespace spgnn::cli {

namespace {

const std::map<std::string, DuplicatePolicy> kDuplicates = {
    {"keep", DuplicatePolicy::keep}, {"drop", DuplicatePolicy::drop}, {"sum", DuplicatePolicy::sum}};
const std::map<std::string, SelfLoopPolicy> kSelfLoops = {
    {"keep", SelfLoopPolicy::keep}, {"remove", SelfLoopPolicy::remove}, {"add", SelfLoopPolicy::add}};
const std::map<std::string, IndexWidth> kWidths = {
    {"auto", IndexWidth::automatic}, {"32", IndexWidth::i32}, {"64", IndexWidth::i64}};

ReadOptions read_options(const LoadFlags& f) {
  ReadOptions o;
  o.build.symmetrize = f.symmetrize;
  o.build.duplicates = kDuplicates.at(f.duplicates);
  o.build.self_loops = kSelfLoops.at(f.self_loops);
  o.build.index_width = kWidths.at(f.index_width);
  o.allow_nonfinite = f.allow_nonfinite;
  o.keep_values = !f.pattern;
  o.edge_index_rows = parse_edge_index_rows(f.edge_index_rows);
  return o;
}

}  // namespace

void add_load_flags(CLI::App& cmd, LoadFlags& f) {
  cmd.add_flag("--symmetrize", f.symmetrize, "Add the reverse of every edge");
  cmd.add_option("--duplicates", f.duplicates, "Duplicate edges: keep, drop (first wins) or sum")
      ->check(CLI::IsMember({"keep", "drop", "sum"}))
      ->capture_default_str();
  cmd.add_option("--self-loops", f.self_loops, "Self loops: keep, remove or add (one per vertex)")
      ->check(CLI::IsMember({"keep", "remove", "add"}))
      ->capture_default_str();
  cmd.add_option("--index-width", f.index_width, "Index width: auto, 32 or 64")
      ->check(CLI::IsMember({"auto", "32", "64"}))
      ->capture_default_str();
  cmd.add_flag("--allow-nonfinite", f.allow_nonfinite, "Accept NaN/Inf edge values");
  cmd.add_flag("--pattern", f.pattern, "Drop edge values (keep the structure only)");
  add_edge_index_rows_flag(cmd, f.edge_index_rows);
}

void add_edge_index_rows_flag(CLI::App& cmd, std::string& value) {
  cmd.add_option("--edge-index-rows", value,
                 "Rows of an edge_index .npy: src,dst (PyG's: row 0 = source), dst,src, or auto "
                 "(a dataset directory's spgnn.json, else src,dst)")
      ->check(CLI::IsMember({"auto", "src,dst", "dst,src"}))
      ->capture_default_str();
}

CLI::Validator number_that(bool (*ok)(double), const std::string& requirement) {
  return CLI::Validator(
      [ok, requirement](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "expected a number, got '" + text + "'";
        return ok(v) ? "" : "must be " + requirement + ", got " + text;
      },
      requirement);
}

CLI::Validator at_least(int64_t lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (end == text.c_str() || *end != '\0') return "expected an integer, got '" + text + "'";
        if (errno == ERANGE) return "out of range (at most 9223372036854775807), got " + text;
        if (v >= lo) return "";
        return "must be >= " + std::to_string(lo) + ", got " + text;
      },
      ">= " + std::to_string(lo));
}

void add_seed_option(CLI::App& cmd, uint64_t& seed, const std::string& help) {
  cmd.add_option("--seed", seed, help)->check(at_least(0))->capture_default_str();
}

Graph load_with_flags(const std::string& spec, const LoadFlags& f) {
  return load_graph(spec, read_options(f), true);
}

void register_generate(CLI::App& app) {
  struct Opts {
    std::string kind;
    int scale = 16;
    int64_t edge_factor = 16;
    int64_t n = 10000;
    double avg_degree = 10;
    int64_t classes = 4;
    int64_t feature_dim = 32;
    uint64_t seed = 1;
    std::string out;
    LoadFlags flags;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "Generate a graph (R-MAT, Erdos-Renyi) or a labelled "
                                             "planted-partition dataset");
  cmd->add_option("kind", o->kind, "rmat, er or planted")
      ->required()
      ->check(CLI::IsMember({"rmat", "er", "planted"}));
  cmd->add_option("--scale", o->scale, "R-MAT: n = 2^scale")->check(CLI::Range(1, 36))->capture_default_str();
  cmd->add_option("--edge-factor", o->edge_factor, "R-MAT: edges per vertex")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))->capture_default_str();
  cmd->add_option("--n", o->n, "er/planted: number of vertices")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  cmd->add_option("--avg-degree", o->avg_degree, "er/planted: average degree")
      ->check(number_that([](double v) { return v >= 0 && v <= 1e6; }, "in [0, 1e6]"))
      ->capture_default_str();
  cmd->add_option("--classes", o->classes, "planted: number of classes")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 16))->capture_default_str();
  cmd->add_option("--feature-dim", o->feature_dim, "planted: feature width")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  add_seed_option(*cmd, o->seed, "Random seed");
  cmd->add_option("-o,--output", o->out,
                  "Output graph file (.spg, .mtx, .txt, .npy; .spg recommended), or for planted a "
                  "new or empty directory")
      ->required();
  add_load_flags(*cmd, o->flags);
  cmd->callback([o] {
    const ReadOptions ro = read_options(o->flags);
    if (o->kind == "planted") {
      // Written file by file into the directory: files of an earlier dataset there (a mask file,
      // an OGB split folder) would be read along with the new ones.
      std::error_code ec;
      if (std::filesystem::exists(o->out, ec)) {
        const bool dir = std::filesystem::is_directory(o->out, ec);
        SPGNN_CHECK(dir && std::filesystem::is_empty(o->out, ec), InvalidArgument,
                    "generate planted: '", o->out, "' ",
                    dir ? "is a directory that is not empty" : "is a file",
                    "; a dataset goes into a new or empty directory, so that no file of an earlier "
                    "one is read with it");
      }
      PlantedPartitionParams p;
      p.n = o->n;
      p.num_classes = o->classes;
      p.avg_degree = o->avg_degree;
      p.feature_dim = o->feature_dim;
      p.seed = o->seed;
      Progress prog("generating planted partition n=" + std::to_string(p.n));
      Dataset d = generate_planted_partition(p);
      prog.done();
      write_dataset_dir(d, o->out);
      std::printf("wrote dataset %s: n=%lld nnz=%lld classes=%lld features=%lld\n", o->out.c_str(),
                  (long long)d.graph.n(), (long long)d.graph.nnz(), (long long)d.num_classes,
                  (long long)d.x.dim(1));
      return;
    }
    Graph g;
    if (o->kind == "rmat") {
      RmatParams p;
      p.scale = o->scale;
      p.edge_factor = o->edge_factor;
      p.seed = o->seed;
      Progress prog("generating R-MAT scale " + std::to_string(p.scale));
      g = generate_rmat(p, ro.build);
      prog.done();
    } else {
      Progress prog("generating Erdos-Renyi n=" + std::to_string(o->n));
      g = generate_erdos_renyi(o->n, o->avg_degree, o->seed, ro.build);
      prog.done();
    }
    Progress wprog("writing " + o->out);
    write_graph(g, o->out);
    wprog.done();
    std::printf("wrote %s: n=%lld nnz=%lld\n", o->out.c_str(), (long long)g.n(),
                (long long)g.nnz());
  });
}

// An edge_index .npy holds the edges only: reading it back infers n = the largest id + 1 and a
// square graph, and has no edge values. Say so rather than drop them silently (.spg and .mtx
// keep everything).
void warn_what_npy_drops(const Graph& g, const std::string& out, GraphFormat to) {
  if (output_format(out, to) != GraphFormat::npy) return;
  // Rows are sorted, so the largest row id is the last edge's; columns take one scan, in place.
  const auto id_at = [](const Tensor& t, int64_t i) {
    return t.dtype() == DType::i32 ? int64_t{t.data<int32_t>()[i]} : t.data<int64_t>()[i];
  };
  const int64_t nnz = g.nnz();
  int64_t max_id = nnz > 0 ? id_at(g.row, nnz - 1) : -1;
  for (int64_t i = 0; i < nnz; ++i) max_id = std::max(max_id, id_at(g.col, i));
  std::vector<std::string> lost;
  if (g.has_values()) lost.push_back("its edge values");
  if (g.n_rows != g.n_cols)
    lost.push_back("its shape " + std::to_string(g.n_rows) + " x " + std::to_string(g.n_cols) +
                   " (read back square)");
  else if (g.n_rows != max_id + 1)
    lost.push_back("its " + std::to_string(g.n_rows) + " vertices (read back as the largest id + 1 = " +
                   std::to_string(max_id + 1) + ")");
  if (lost.empty()) return;
  std::string what = lost[0];
  for (size_t i = 1; i < lost.size(); ++i) what += ", " + lost[i];
  std::fprintf(stderr, "spgnn: warning: %s: an edge_index .npy stores edges only, so the graph loses "
               "%s; write .spg or .mtx to keep them\n", out.c_str(), what.c_str());
}

void register_convert(CLI::App& app) {
  struct Opts {
    std::string in, out, to = "auto";
    LoadFlags flags;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("convert", "Convert a graph between formats (.mtx, SNAP edge "
                                            "list, edge_index .npy, dataset directory, .spg)");
  cmd->add_option("input", o->in, "Input graph (file, dataset directory or generator spec)")->required();
  cmd->add_option("output", o->out, "Output file")->required();
  cmd->add_option("--to", o->to, "Output format: auto (by extension), spg, mtx, snap, npy")
      ->check(CLI::IsMember({"auto", "spg", "mtx", "snap", "npy"}))
      ->capture_default_str();
  add_load_flags(*cmd, o->flags);
  cmd->callback([o] {
    Graph g = load_with_flags(o->in, o->flags);
    warn_what_npy_drops(g, o->out, parse_graph_format(o->to));
    Progress prog("writing " + o->out);
    write_graph(g, o->out, parse_graph_format(o->to));
    prog.done();
    std::printf("wrote %s: n=%lld nnz=%lld\n", o->out.c_str(), (long long)g.n(),
                (long long)g.nnz());
  });
}

void register_info(CLI::App& app) {
  struct Opts {
    std::string graph = "builtin", format = "table";
    LoadFlags flags;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("info", "Show a graph's size, degree statistics and structure");
  cmd->add_option("graph", o->graph,
                  "Graph file, dataset directory, or generator spec (rmat:SCALE[:EF[:SEED]], "
                  "er:N:DEG[:SEED], planted:N[:C[:SEED]], builtin)")
      ->capture_default_str();
  cmd->add_option("--format", o->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  add_load_flags(*cmd, o->flags);
  cmd->callback([o] {
    const auto t0 = std::chrono::steady_clock::now();
    Graph g = load_with_flags(o->graph, o->flags);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::error_code ec;
    const auto file_bytes = std::filesystem::is_regular_file(o->graph, ec)
                                ? double(std::filesystem::file_size(o->graph, ec))
                                : 0.0;
    const GraphStats s = graph_stats(g);
    if (o->format == "json") {
      nlohmann::json j = {{"graph", o->graph},
                          {"n_rows", s.n_rows},
                          {"n_cols", s.n_cols},
                          {"nnz", s.nnz},
                          {"degree", {{"min", s.deg_min}, {"max", s.deg_max}, {"mean", s.deg_mean},
                                      {"stddev", s.deg_stddev}, {"gini", s.gini}}},
                          {"empty_rows", s.empty_rows},
                          {"self_loops", s.self_loops},
                          {"duplicates", s.duplicates},
                          {"symmetric", s.symmetric},
                          {"has_values", s.has_values},
                          {"index_dtype", s.index_dtype},
                          {"bytes", s.bytes},
                          {"load_seconds", load_s},
                          {"file_bytes", file_bytes}};
      std::cout << j.dump(2) << "\n";
      return;
    }
    Table t({"property", "value"});
    t.add({"graph", describe_spec(o->graph)});
    t.add({"vertices (rows x cols)", std::to_string(s.n_rows) + " x " + std::to_string(s.n_cols)});
    t.add({"edges (nnz)", std::to_string(s.nnz)});
    t.add({"degree min / max", std::to_string(s.deg_min) + " / " + std::to_string(s.deg_max)});
    t.add({"degree mean / stddev", fixed(s.deg_mean, 2) + " / " + fixed(s.deg_stddev, 2)});
    t.add({"degree Gini", fixed(s.gini, 3)});
    t.add({"empty rows", std::to_string(s.empty_rows)});
    t.add({"self loops", std::to_string(s.self_loops)});
    t.add({"duplicate edges", std::to_string(s.duplicates)});
    t.add({"symmetric", s.symmetric ? "yes" : "no"});
    t.add({"edge values", s.has_values ? "yes" : "no"});
    t.add({"index type", s.index_dtype});
    t.add({"memory", human_bytes(double(s.bytes))});
    std::string load = fixed(load_s, 3) + " s";
    if (file_bytes > 0 && load_s > 0)
      load += " (" + fixed(file_bytes / load_s / 1e6, 1) + " MB/s, " +
              fixed(double(s.nnz) / load_s / 1e6, 2) + " M edges/s)";
    t.add({"load time", load});
    std::cout << t.str();
  });
}

void register_partition(CLI::App& app) {
  struct Opts {
    std::string in, out, method = "metis";
    int64_t parts = 2;
    uint64_t seed = 1;
    double imbalance = 1.05;
    bool force = false;
    std::string format = "table";
    LoadFlags flags;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "partition", "Split a graph (and a dataset directory's features, labels and splits) into "
                   "parts for multi-GPU training: an edge cut, with halo and send lists");
  cmd->add_option("input", o->in, "Graph file, dataset directory, or generator spec")->required();
  cmd->add_option("-o,--output", o->out, "Output directory (written whole, then renamed)")
      ->required();
  cmd->add_option("--parts", o->parts, "Number of parts (>= 1)")->capture_default_str();
  cmd->add_option("--method", o->method,
                  "metis (balances vertices and edges; ldg when METIS cannot take the graph), "
                  "ldg (streaming), random, range")
      ->check(CLI::IsMember({"metis", "ldg", "random", "range"}))
      ->capture_default_str();
  add_seed_option(*cmd, o->seed, "Seed of random, ldg and METIS");
  cmd->add_option("--imbalance", o->imbalance,
                  "Allowed load of the heaviest part over the mean (metis, ldg)")
      ->capture_default_str();
  cmd->add_flag("--force", o->force,
                "Replace an existing partition directory (never another file or directory)");
  cmd->add_option("--format", o->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  add_load_flags(*cmd, o->flags);
  cmd->callback([o] {
    SPGNN_CHECK(o->parts >= 1, InvalidArgument, "--parts must be >= 1, got ", o->parts);
    check_partition_output(o->out, o->in, o->force);  // before the work, not after it
    Dataset d;
    if (std::filesystem::is_directory(o->in)) {  // features, labels and splits come along
      const LoadFlags defaults;
      const LoadFlags& f = o->flags;
      SPGNN_CHECK(f.duplicates == defaults.duplicates && f.self_loops == defaults.self_loops &&
                      f.index_width == defaults.index_width && !f.pattern && !f.allow_nonfinite,
                  InvalidArgument, o->in, ": a dataset directory is partitioned as it is read; "
                  "of the graph flags only --symmetrize and --edge-index-rows apply to it");
      nn::DatasetOptions dopt;
      dopt.symmetrize = o->flags.symmetrize;
      dopt.edge_index_rows = parse_edge_index_rows(o->flags.edge_index_rows);
      Progress prog("loading " + o->in);
      d = nn::load_dataset(o->in, dopt);
      prog.done();
    } else {
      d.graph = load_with_flags(o->in, o->flags);
    }
    PartitionOptions po;
    po.parts = o->parts;
    po.method = parse_partition_method(o->method);
    po.seed = o->seed;
    po.imbalance = o->imbalance;
    const auto t0 = std::chrono::steady_clock::now();
    const PartitionAssignment a = assign_parts(d.graph, po);
    PartitionMeta meta;
    meta.parts = o->parts;
    meta.method = partition_method_name(a.method_used);
    meta.note = a.note;
    meta.source = o->in;
    meta.feature_dim = d.x.defined() && d.x.ndim() == 2 ? d.x.dim(1) : 0;
    meta.num_classes = d.num_classes;
    const std::vector<LocalPart> parts = build_local_parts(d.graph, a.owner, o->parts, &meta.summary);
    const double part_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_partition_dir(d, a.owner, parts, meta, o->out, o->force);
    // The heaviest part over the mean, in owned vertices and in edges: a distributed epoch waits
    // for its slowest rank, so an edge balance of 1.05 costs about 5% of it (docs/BENCHMARKS.md,
    // "Two H200s").
    auto balance = [&](auto load) {
      double total = 0, heaviest = 0;
      for (const LocalPart& lp : parts) {
        total += double(load(lp));
        heaviest = std::max(heaviest, double(load(lp)));
      }
      return total > 0 ? heaviest * double(parts.size()) / total : 1.0;
    };
    const double vertex_balance = balance([](const LocalPart& lp) { return lp.n_owned; });
    const double edge_balance = balance([](const LocalPart& lp) { return lp.graph.nnz(); });
    if (o->format == "json") {
      nlohmann::json j = {{"output", o->out}, {"parts", o->parts}, {"method", meta.method},
                          {"note", meta.note}, {"edge_cut", meta.summary.edge_cut},
                          {"halo_volume", meta.summary.halo_volume},
                          {"num_edges", meta.summary.num_edges}, {"seconds", part_s},
                          {"vertex_balance", vertex_balance}, {"edge_balance", edge_balance}};
      nlohmann::json per = nlohmann::json::array();
      for (const LocalPart& lp : parts)
        per.push_back({{"owned", lp.n_owned}, {"halo", lp.n_halo()}, {"edges", lp.graph.nnz()}});
      j["part"] = per;
      std::printf("%s\n", j.dump(1).c_str());
      return;
    }
    if (!a.note.empty()) std::printf("note: %s\n", a.note.c_str());
    const double e = std::max<double>(1, double(meta.summary.num_edges));
    std::printf("%s: %lld parts by %s in %.2f s; edge cut %lld (%.1f%% of %lld edges), halo %lld "
                "vertices\n",
                o->out.c_str(), (long long)o->parts, meta.method.c_str(), part_s,
                (long long)meta.summary.edge_cut, 100.0 * double(meta.summary.edge_cut) / e,
                (long long)meta.summary.num_edges, (long long)meta.summary.halo_volume);
    Table t({"part", "owned", "halo", "edges", "halo / owned"});
    for (const LocalPart& lp : parts)
      t.add({std::to_string(lp.part), std::to_string(lp.n_owned), std::to_string(lp.n_halo()),
             std::to_string(lp.graph.nnz()),
             fixed(lp.n_owned ? double(lp.n_halo()) / double(lp.n_owned) : 0.0, 2)});
    std::printf("%s", t.str().c_str());
    std::printf("heaviest part over the mean: %.3f in owned vertices, %.3f in edges\n",
                vertex_balance, edge_balance);
  });
}

}  // namespace spgnn::cli

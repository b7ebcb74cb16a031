#include "spgnn/common.hpp"

#include <algorithm>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>

namespace spgnn::cli {

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

int64_t to_int(const std::string& spec, const std::string& field, const char* what, int64_t lo,
               int64_t hi) {
  char* end = nullptr;
  const long long v = std::strtoll(field.c_str(), &end, 10);
  SPGNN_CHECK(!field.empty() && end && *end == '\0' && v >= lo && v <= hi, InvalidArgument,
              "graph spec '", spec, "': ", what, " must be an integer in [", lo, ", ", hi,
              "], got '", field, "'");
  return v;
}

double to_double(const std::string& spec, const std::string& field, const char* what, double lo,
                 double hi) {
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  SPGNN_CHECK(!field.empty() && end && *end == '\0' && std::isfinite(v) && v >= lo && v <= hi,
              InvalidArgument, "graph spec '", spec, "': ", what, " must be a number in [", lo,
              ", ", hi, "], got '", field, "'");
  return v;
}
}  // namespace

bool is_generator_spec(const std::string& spec) {
  return spec == "builtin" || spec.rfind("rmat:", 0) == 0 || spec.rfind("er:", 0) == 0 ||
         spec.rfind("planted:", 0) == 0;
}

std::string describe_spec(const std::string& spec) {
  if (spec == "builtin") return "builtin (R-MAT scale 16, edge factor 16, symmetrised, seed 1)";
  return spec;
}

PlantedPartitionParams planted_params(const std::string& spec, uint64_t default_seed) {
  const auto f = split(spec, ':');
  SPGNN_CHECK(f.size() >= 2 && f.size() <= 4 && f[0] == "planted", InvalidArgument,
              "graph spec '", spec, "': expected planted:N[:CLASSES[:SEED]]");
  PlantedPartitionParams p;
  p.n = to_int(spec, f[1], "N", 2, int64_t{1} << 32);
  if (f.size() > 2) p.num_classes = to_int(spec, f[2], "CLASSES", 2, 1 << 16);
  p.seed = f.size() > 3 ? uint64_t(to_int(spec, f[3], "SEED", 0, INT64_MAX)) : default_seed;
  return p;
}

Graph load_graph(const std::string& spec_in, const ReadOptions& options, bool show_progress) {
  // An empty spec (`info ""`, `--graph ""`) splits into no fields at all, so f[0] below would
  // read past the vector; it names no file either, so say what a spec is.
  SPGNN_CHECK(!spec_in.empty(), InvalidArgument,
              "graph spec is empty: expected a graph file, a dataset directory or a generator "
              "(rmat:SCALE[:EDGE_FACTOR[:SEED]], er:N:AVG_DEGREE[:SEED], "
              "planted:N[:CLASSES[:SEED]], builtin)");
  const std::string spec = spec_in == "builtin" ? "rmat:16:16:1" : spec_in;
  BuildOptions build = options.build;
  if (spec_in == "builtin") build.symmetrize = true;
  const auto f = split(spec, ':');
  if (f[0] == "rmat" && spec.find(':') != std::string::npos) {
    SPGNN_CHECK(f.size() >= 2 && f.size() <= 4, InvalidArgument, "graph spec '", spec,
                "': expected rmat:SCALE[:EDGE_FACTOR[:SEED]]");
    RmatParams p;
    p.scale = static_cast<int>(to_int(spec, f[1], "SCALE", 1, 36));
    if (f.size() > 2) p.edge_factor = to_int(spec, f[2], "EDGE_FACTOR", 1, 1 << 16);
    if (f.size() > 3) p.seed = static_cast<uint64_t>(to_int(spec, f[3], "SEED", 0, INT64_MAX));
    Progress prog("generating R-MAT scale " + std::to_string(p.scale), show_progress);
    Graph g = generate_rmat(p, build);
    prog.done();
    return g;
  }
  if (f[0] == "er" && spec.find(':') != std::string::npos) {
    SPGNN_CHECK(f.size() == 3 || f.size() == 4, InvalidArgument, "graph spec '", spec,
                "': expected er:N:AVG_DEGREE[:SEED]");
    const int64_t n = to_int(spec, f[1], "N", 1, int64_t{1} << 40);
    const double d = to_double(spec, f[2], "AVG_DEGREE", 0, 1e6);
    const uint64_t seed = f.size() > 3 ? uint64_t(to_int(spec, f[3], "SEED", 0, INT64_MAX)) : 1;
    Progress prog("generating Erdos-Renyi n=" + std::to_string(n), show_progress);
    Graph g = generate_erdos_renyi(n, d, seed, build);
    prog.done();
    return g;
  }
  if (f[0] == "planted" && spec.find(':') != std::string::npos)
    return generate_planted_partition(planted_params(spec, PlantedPartitionParams{}.seed)).graph;
  ReadOptions ro = options;
  ro.build = build;
  Progress prog("reading " + spec, show_progress);
  ro.progress = [&](double x) { prog.update(x); };
  Graph g = read_graph(spec, ro);
  prog.done();
  return g;
}

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)),
      enabled_(enabled && isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()) {
  if (enabled_) std::fprintf(stderr, "%s ...", label_.c_str());
}

Progress::~Progress() {
  if (enabled_ && !finished_) std::fprintf(stderr, "\n");
}

void Progress::update(double fraction) {
  if (!enabled_ || finished_) return;
  const int pct = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 100));
  if (pct == last_percent_) return;
  last_percent_ = pct;
  const int width = 30, fill = pct * width / 100;
  std::fprintf(stderr, "\r%s [%s%s] %3d%%", label_.c_str(), std::string(size_t(fill), '#').c_str(),
               std::string(size_t(width - fill), '.').c_str(), pct);
  std::fflush(stderr);
}

void Progress::done() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r%s: done in %.2f s%30s\n", label_.c_str(), s, "");
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return fixed(b, u == 0 ? 0 : 2) + " " + units[u];
}

DType feature_dtype(const std::string& text) {
  return text == "f16" ? DType::f16 : text == "bf16" ? DType::bf16 : DType::f32;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string Table::str() const {
  std::vector<size_t> w(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  };
  widen(header_);
  for (const auto& r : rows_) widen(r);
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string cell = i < r.size() ? r[i] : "";
      const std::string pad(w[i] - cell.size(), ' ');
      s += (i ? "  " : "") + (i == 0 ? cell + pad : pad + cell);
    }
    return s + "\n";
  };
  std::string out = line(header_);
  size_t total = 0;
  for (size_t x : w) total += x + 2;
  out += std::string(total > 2 ? total - 2 : 0, '-') + "\n";
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string Table::csv() const {
  auto line = [](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < r.size(); ++i) {
      const bool quote = r[i].find_first_of(",\"\n") != std::string::npos;
      std::string cell = r[i];
      if (quote) {
        std::string q = "\"";
        for (char c : cell) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        cell = q + "\"";
      }
      s += (i ? "," : "") + cell;
    }
    return s + "\n";
  };
  std::string out = line(header_);
  for (const auto& r : rows_) out += line(r);
  return out;
}

}  // namespace spgnn::cli

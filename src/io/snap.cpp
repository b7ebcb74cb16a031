// SNAP edge lists: one edge "a b [value]" per line, separated by any spaces or tabs, with '#'
// and '%' comment lines. Line "a b" becomes A[a', b'] (row a' receives from column b'), where
// a', b' are the dense ids. Ids are arbitrary (possibly negative, sparse, huge) 64-bit integers
// remapped to 0..n-1 in order of first appearance (a before b on each line); ids[] keeps the
// originals.
//
// Exception, so that write_snap -> read_snap is lossless: a file whose first line is spgnn's own
// header "# spgnn edge list: n_rows=R n_cols=C ..." holds dense 0-based ids already; they are
// kept as they are (range-checked against R and C, ids[] is the identity), which also preserves
// isolated vertices and rectangular shapes.
//
// Parsing follows read_mtx: a parallel counting pass (exact line numbers, output offsets), then
// a parallel parse into the final arrays. Only the remapping is sequential, because "order of
// first appearance" is inherently ordered; it uses a direct table when ids are dense enough and
// an open-addressing hash table otherwise.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"

namespace spgnn {
namespace {

using io::ChunkError;
using io::LineChunk;

constexpr const char* kSnapComments = "#%";
constexpr const char* kSpgnnHeader = "# spgnn edge list:";

struct SnapTask {
  int ncols;              // 2 or 3, fixed by the first edge line
  int64_t first_edge_line;
  bool dense;             // spgnn header: ids are already 0-based indices
  int64_t n_rows, n_cols; // bounds when dense
  bool allow_nonfinite;
  int64_t* src;
  int64_t* dst;
  float* vals;            // null: values are checked but not kept
};

std::string id_error(const char* p, const char* e, const char* what, bool overflow) {
  if (p == e || *p == '\n') return std::string("missing ") + what + " id: expected 'src dst [value]'";
  if (overflow) return std::string(what) + " id '" + io::token_at(p, e) + "' does not fit in 64 bits";
  return std::string("expected a ") + what + " id (integer), found '" + io::token_at(p, e) + "'";
}

bool parse_snap_chunk(const SnapTask& t, const LineChunk& c, int64_t k, ChunkError& err,
                      int64_t& lo, int64_t& hi) {
  const char* p = c.begin;
  const char* const e = c.end;
  int64_t line = 0;
  auto fail = [&](std::string msg) {
    err.line = line;
    err.msg = std::move(msg);
    return false;
  };
  int64_t mn = std::numeric_limits<int64_t>::max(), mx = std::numeric_limits<int64_t>::min();
  while (p < e) {
    p = io::skip_blanks(p, e);
    if (p == e) break;
    if (*p == '\n') {
      ++p;
      ++line;
      continue;
    }
    if (*p == '#' || *p == '%') {
      p = io::find_newline(p, e);
      continue;
    }
    int64_t a = 0, b = 0;
    bool overflow = false;
    const char* q = io::parse_int(p, e, a, overflow);
    if (!q || !io::is_token_end(q, e)) return fail(id_error(p, e, "source", overflow));
    p = io::skip_blanks(q, e);
    q = io::parse_int(p, e, b, overflow);
    if (!q || !io::is_token_end(q, e)) return fail(id_error(p, e, "destination", overflow));
    if (t.dense) {
      if (a < 0 || a >= t.n_rows || b < 0 || b >= t.n_cols) {
        return fail("edge (" + std::to_string(a) + ", " + std::to_string(b) +
                    ") is outside the " + std::to_string(t.n_rows) + " x " +
                    std::to_string(t.n_cols) + " shape declared in the spgnn header on line 1");
      }
    }
    p = io::skip_blanks(q, e);
    float v = 1.f;
    if (t.ncols == 3) {
      if (p == e || *p == '\n') {
        return fail("missing value: line " + std::to_string(t.first_edge_line) +
                    " (the first edge) has a value column, so every line must");
      }
      double d = 0;
      q = io::parse_double(p, e, d);
      if (!q || !io::is_token_end(q, e)) {
        return fail("expected a real value, found '" + io::token_at(p, e) + "'");
      }
      v = static_cast<float>(d);
      if (!std::isfinite(v) && !t.allow_nonfinite) {
        if (std::isfinite(d)) return fail("value '" + io::token_at(p, e) + "' overflows float32");
        return fail("value '" + io::token_at(p, e) +
                    "' is not finite (NaN/Inf are rejected unless ReadOptions.allow_nonfinite)");
      }
      p = io::skip_blanks(q, e);
    }
    if (p < e && *p != '\n') {
      if (t.ncols == 2) {
        return fail("unexpected third column '" + io::token_at(p, e) + "': line " +
                    std::to_string(t.first_edge_line) +
                    " (the first edge) has 2 columns, so every line must");
      }
      return fail("unexpected extra token '" + io::token_at(p, e) +
                  "', expected 'src dst value'");
    }
    t.src[k] = a;
    t.dst[k] = b;
    if (t.vals) t.vals[k] = v;
    mn = std::min(mn, std::min(a, b));
    mx = std::max(mx, std::max(a, b));
    ++k;
  }
  lo = mn;
  hi = mx;
  return true;
}

// Open addressing with linear probing; grows at half load. Only used for ids too sparse for a
// direct table.
class IdTable {
 public:
  IdTable() { rehash(size_t{1} << 16); }
  // Dense id of `key`, assigning the next one (and recording it in ids) when new.
  int64_t get(int64_t key, std::vector<int64_t>& ids) {
    size_t h = slot(key);
    for (;;) {
      if (vals_[h] < 0) break;
      if (keys_[h] == key) return vals_[h];
      h = (h + 1) & mask_;
    }
    const int64_t id = static_cast<int64_t>(ids.size());
    keys_[h] = key;
    vals_[h] = id;
    ids.push_back(key);
    if (++used_ * 2 > keys_.size()) rehash(keys_.size() * 2);
    return id;
  }

 private:
  size_t slot(int64_t key) const {
    return static_cast<size_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  void rehash(size_t cap) {
    std::vector<int64_t> old_k = std::move(keys_), old_v = std::move(vals_);
    keys_.assign(cap, 0);
    vals_.assign(cap, -1);
    mask_ = cap - 1;
    shift_ = 64;
    for (size_t c = cap; c > 1; c >>= 1) --shift_;
    for (size_t i = 0; i < old_k.size(); ++i) {
      if (old_v[i] < 0) continue;
      size_t h = slot(old_k[i]);
      while (vals_[h] >= 0) h = (h + 1) & mask_;
      keys_[h] = old_k[i];
      vals_[h] = old_v[i];
    }
  }
  std::vector<int64_t> keys_, vals_;
  size_t mask_ = 0, used_ = 0;
  int shift_ = 48;
};

// What spgnn's header line declares. nnz and values are -1 when absent: each is checked when
// present, and a header with only n_rows/n_cols is still read.
struct SpgnnHeader {
  int64_t n_rows = -1, n_cols = -1, nnz = -1, values = -1;
};

// Parses "n_rows=R n_cols=C nnz=E values=0|1" out of spgnn's header line.
SpgnnHeader parse_spgnn_header(const std::string& path, const char* p, const char* e) {
  SpgnnHeader h;
  while (p < e) {
    p = io::skip_blanks(p, e);
    const char* q = p;
    while (q < e && !io::is_blank(*q)) ++q;
    const std::string tok(p, q);
    for (auto [key, out] : {std::pair<const char*, int64_t*>{"n_rows=", &h.n_rows},
                            std::pair<const char*, int64_t*>{"n_cols=", &h.n_cols},
                            std::pair<const char*, int64_t*>{"nnz=", &h.nnz},
                            std::pair<const char*, int64_t*>{"values=", &h.values}}) {
      const size_t kl = std::strlen(key);
      if (tok.compare(0, kl, key) != 0) continue;
      uint64_t u = 0;
      bool overflow = false;
      const char* end = tok.data() + tok.size();
      const char* r = io::parse_uint(tok.data() + kl, end, u, overflow);
      if (!r || r != end) {
        io::throw_format(path, 1, "malformed '" + io::token_at(p, q) + "' in the spgnn header, "
                                  "expected a non-negative integer after '" + key + "'");
      }
      *out = static_cast<int64_t>(u);
    }
    p = q;
  }
  if (h.n_rows < 0 || h.n_cols < 0) {
    io::throw_format(path, 1, "spgnn header lacks n_rows=/n_cols=, expected '" +
                                  std::string(kSpgnnHeader) + " n_rows=R n_cols=C ...'");
  }
  if (h.values > 1) {
    io::throw_format(path, 1, "spgnn header has values=" + std::to_string(h.values) +
                                  ", expected values=0 (2 columns) or values=1 (3 columns)");
  }
  return h;
}

// write_snap's header declares the edge count and whether a value column follows, and every
// line it writes ends with '\n'; a file that disagrees was truncated or edited, and reading it
// would silently return a different graph.
void check_spgnn_counts(const std::string& path, const SpgnnHeader& sh, const SnapTask& t,
                        const char* b, const char* e, const std::vector<LineChunk>& chunks,
                        int64_t n_edges) {
  int64_t total_lines = 0;
  for (const LineChunk& c : chunks) total_lines += c.lines;
  const bool ends_with_newline = b < e && e[-1] == '\n';
  const int64_t last_line = total_lines + (ends_with_newline ? 0 : 1);
  if (sh.nnz >= 0 && n_edges < sh.nnz) {
    io::throw_format(path, last_line,
                     "file ends after " + std::to_string(n_edges) + " edges, but the spgnn "
                     "header on line 1 declares nnz=" + std::to_string(sh.nnz) +
                     " (truncated file?)");
  }
  if (sh.nnz >= 0 && n_edges > sh.nnz) {
    io::throw_format(path, io::line_of_entry(chunks, 1, sh.nnz, kSnapComments),
                     "more edges than the nnz=" + std::to_string(sh.nnz) + " declared by the "
                     "spgnn header on line 1 (edit the header, or remove it to read the file as "
                     "a plain edge list)");
  }
  if (sh.values >= 0 && n_edges > 0 && (t.ncols == 3) != (sh.values == 1)) {
    io::throw_format(path, t.first_edge_line,
                     "the spgnn header on line 1 declares values=" + std::to_string(sh.values) +
                         ", so edges have " + (sh.values ? "3" : "2") + " columns, but this "
                         "line has " + std::to_string(t.ncols));
  }
  if (!ends_with_newline && n_edges > 0) {
    // The last line may be a cut-off edge ("12 3" of "12 345"): the counts above cannot tell.
    const char* last = b;
    for (const char* q = e; q > b; --q) {
      if (q[-1] == '\n') {
        last = q;
        break;
      }
    }
    const char* q = io::skip_blanks(last, e);
    if (q < e && *q != '#' && *q != '%') {
      io::throw_format(path, last_line,
                       "the last edge line has no newline, but spgnn ends every line it writes "
                       "with one: the file is probably truncated (add the newline if it is "
                       "complete)");
    }
  }
}

}  // namespace

SnapGraph read_snap(const std::string& path, const ReadOptions& options) {
  const std::string buf = read_file_decompressed(path);
  const char* const b = buf.data();
  const char* const e = b + buf.size();

  SnapTask t{};
  t.allow_nonfinite = options.allow_nonfinite;
  const char* const first_nl = io::find_newline(b, e);
  const size_t hl = std::strlen(kSpgnnHeader);
  SpgnnHeader sh;
  if (static_cast<size_t>(first_nl - b) >= hl && std::equal(kSpgnnHeader, kSpgnnHeader + hl, b)) {
    t.dense = true;
    sh = parse_spgnn_header(path, b + hl, first_nl);
    t.n_rows = sh.n_rows;
    t.n_cols = sh.n_cols;
    // The declared shape sizes the id table and the graph's per-row arrays, whatever the
    // edges; refuse an impossible one before allocating. The id table holds max(R, C) ids.
    // (The edge arrays are sized by the lines actually present, checked below.)
    io::check_graph_fits(path, 1, std::max(sh.n_rows, sh.n_cols), 0,
                         "the spgnn header declares " + std::to_string(sh.n_rows) + " x " +
                             std::to_string(sh.n_cols));
  }

  // The first edge line fixes the number of columns for the whole file.
  int64_t line = 1;
  t.ncols = 0;
  for (const char* p = b; p < e; ++line) {
    const char* q = io::skip_blanks(p, e);
    const char* nl = io::find_newline(q, e);
    if (q < nl && *q != '#' && *q != '%') {
      int tokens = 0;
      for (const char* r = q; r < nl;) {
        r = io::skip_blanks(r, nl);
        if (r == nl) break;
        ++tokens;
        while (r < nl && !io::is_blank(*r)) ++r;
      }
      if (tokens < 2 || tokens > 3) {
        io::throw_format(path, line, "expected 'src dst' or 'src dst value', found " +
                                         std::to_string(tokens) + " column" +
                                         (tokens == 1 ? "" : "s"));
      }
      t.ncols = tokens;
      t.first_edge_line = line;
      break;
    }
    p = nl < e ? nl + 1 : e;
  }

  const int threads = std::max(1, omp_get_max_threads());
  const size_t target = std::clamp<size_t>(buf.size() / (static_cast<size_t>(threads) * 8),
                                           size_t{256} << 10, size_t{8} << 20);
  std::vector<LineChunk> chunks = io::split_lines(b, e, target);
  io::count_lines(chunks, kSnapComments);
  const size_t nc = chunks.size();
  std::vector<int64_t> first_entry(nc + 1, 0), first_line(nc + 1, 1);
  for (size_t i = 0; i < nc; ++i) {
    first_entry[i + 1] = first_entry[i] + chunks[i].entries;
    first_line[i + 1] = first_line[i] + chunks[i].lines;
  }
  const int64_t n_edges = first_entry[nc];
  if (t.dense) check_spgnn_counts(path, sh, t, b, e, chunks, n_edges);
  const bool keep_values = t.ncols == 3 && options.keep_values;
  io::check_fits_in_memory(path, 0,
                           static_cast<uint64_t>(n_edges) * (keep_values ? 20 : 16) * 2,
                           "the " + std::to_string(n_edges) + " edges");

  std::vector<int64_t> src(static_cast<size_t>(n_edges)), dst(static_cast<size_t>(n_edges));
  std::vector<float> vals(keep_values ? static_cast<size_t>(n_edges) : 0);
  t.src = src.data();
  t.dst = dst.data();
  t.vals = keep_values ? vals.data() : nullptr;

  std::vector<ChunkError> errors(nc);
  std::vector<int64_t> lo(nc, std::numeric_limits<int64_t>::max()),
      hi(nc, std::numeric_limits<int64_t>::min());
  std::atomic<uint64_t> done{0};
  io::Progress progress(options.progress);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t ci = 0; ci < static_cast<int64_t>(nc); ++ci) {
    const size_t i = static_cast<size_t>(ci);
    try {
      parse_snap_chunk(t, chunks[i], first_entry[i], errors[i], lo[i], hi[i]);
    } catch (const std::exception& ex) {
      errors[i].line = 0;
      errors[i].msg = ex.what();
    }
    const uint64_t bytes = static_cast<uint64_t>(chunks[i].end - chunks[i].begin);
    const uint64_t d = done.fetch_add(bytes) + bytes;
    // Parsing is ~80% of the time, the remapping the rest.
    if (omp_get_thread_num() == 0) progress.report(0.8 * static_cast<double>(d) / static_cast<double>(buf.size() + 1));
  }
  for (size_t i = 0; i < nc; ++i) {
    if (errors[i].line >= 0) io::throw_format(path, first_line[i] + errors[i].line, errors[i].msg);
  }

  SnapGraph out;
  int64_t n_rows = 0, n_cols = 0;
  if (t.dense) {
    n_rows = t.n_rows;
    n_cols = t.n_cols;
    out.ids.resize(static_cast<size_t>(std::max(n_rows, n_cols)));
    for (size_t i = 0; i < out.ids.size(); ++i) out.ids[i] = static_cast<int64_t>(i);
  } else {
    const int64_t mn = nc ? *std::min_element(lo.begin(), lo.end()) : 0;
    const int64_t mx = nc ? *std::max_element(hi.begin(), hi.end()) : -1;
    // A direct table (one slot per possible id) beats hashing when ids are dense enough.
    const bool direct = n_edges > 0 && mn >= 0 &&
                        static_cast<uint64_t>(mx) < std::max<uint64_t>(uint64_t(n_edges) * 2, 1 << 20);
    if (direct) {
      std::vector<int64_t> map(static_cast<size_t>(mx) + 1, -1);
      auto remap = [&](int64_t& id) {
        int64_t& m = map[static_cast<size_t>(id)];
        if (m < 0) {
          m = static_cast<int64_t>(out.ids.size());
          out.ids.push_back(id);
        }
        id = m;
      };
      for (size_t k = 0; k < src.size(); ++k) {
        remap(src[k]);
        remap(dst[k]);
      }
    } else {
      IdTable table;
      for (size_t k = 0; k < src.size(); ++k) {
        src[k] = table.get(src[k], out.ids);
        dst[k] = table.get(dst[k], out.ids);
      }
    }
    n_rows = n_cols = static_cast<int64_t>(out.ids.size());
  }
  progress.report(0.9);
  try {
    out.graph = graph_from_edges(n_rows, n_cols, src, dst, vals, options.build);
  } catch (const InvalidArgument& ex) {
    io::throw_format(path, 0, ex.what());
  }
  progress.report(1.0);
  return out;
}

void write_snap(const Graph& graph, const std::string& path) {
  const Graph g = io::host_graph(graph);
  io::AtomicWriter w(path);
  const bool values = g.has_values();
  w.write(std::string(kSpgnnHeader) + " n_rows=" + std::to_string(g.n_rows) +
          " n_cols=" + std::to_string(g.n_cols) + " nnz=" + std::to_string(g.nnz()) +
          " values=" + (values ? "1" : "0") + "\n# row col" + (values ? " value" : "") +
          " (0-based; row receives from col, A[row, col])\n");
  io::write_edge_lines(w, g, 0, values);
  w.commit();
}

}  // namespace spgnn

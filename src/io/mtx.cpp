// Matrix Market coordinate reader and writer.
//
// Reading is built for files of hundreds of millions of entries: the whole (decompressed) file
// is held in memory, split into line-aligned chunks, and parsed by hand by OpenMP threads
// straight into the final edge arrays. A first parallel pass counts lines and entries per chunk;
// that gives every chunk its output offset and its first line number, so error messages carry
// exact line numbers and an entry-count mismatch is reported before anything is parsed.
// Declared sizes are checked against the bytes actually present and against physical memory
// before any array is allocated.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"

namespace spgnn {
namespace {

using io::ChunkError;
using io::LineChunk;

enum class Field : uint8_t { real, integer, pattern };
enum class Symmetry : uint8_t { general, symmetric };

constexpr const char* kBannerHelp =
    "'%%MatrixMarket matrix coordinate <real|integer|pattern> <general|symmetric>'";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split_tokens(const char* p, const char* e) {
  std::vector<std::string> toks;
  for (;;) {
    p = io::skip_blanks(p, e);
    if (p == e) break;
    const char* q = p;
    while (q < e && !io::is_blank(*q)) ++q;
    toks.emplace_back(p, q);
    p = q;
  }
  return toks;
}

struct Header {
  Field field = Field::real;
  Symmetry symmetry = Symmetry::general;
  int64_t n_rows = 0, n_cols = 0, nnz = 0;
  int64_t size_line = 0;        // line of "rows cols nnz"
  const char* body = nullptr;   // first byte after the size line
  int64_t body_line = 0;        // line number of `body`
};

Header parse_header(const std::string& path, const char* b, const char* e) {
  Header h;
  if (b == e) io::throw_format(path, 1, std::string("empty file, expected the banner ") + kBannerHelp);
  const char* nl = io::find_newline(b, e);
  const auto toks = split_tokens(b, nl);
  if (toks.empty() || lower(toks[0]) != "%%matrixmarket") {
    io::throw_format(path, 1, "missing Matrix Market banner: expected " + std::string(kBannerHelp) +
                                  ", found '" + io::token_at(io::skip_blanks(b, nl), nl) + "'");
  }
  if (toks.size() < 5) {
    io::throw_format(path, 1, "incomplete banner: expected " + std::string(kBannerHelp));
  }
  const std::string object = lower(toks[1]), format = lower(toks[2]), field = lower(toks[3]),
                    symmetry = lower(toks[4]);
  if (object != "matrix") {
    io::throw_format(path, 1, "unsupported object '" + toks[1] + "': only 'matrix' is supported");
  }
  if (format == "array") {
    io::throw_format(path, 1, "unsupported format 'array' (dense matrix): only 'coordinate' "
                              "(sparse) Matrix Market files can be read as graphs");
  }
  if (format != "coordinate") {
    io::throw_format(path, 1, "unknown format '" + toks[2] + "', expected 'coordinate'");
  }
  if (field == "real" || field == "double") h.field = Field::real;
  else if (field == "integer") h.field = Field::integer;
  else if (field == "pattern") h.field = Field::pattern;
  else if (field == "complex") {
    io::throw_format(path, 1, "unsupported field 'complex': edge values must be real; expected "
                              "real, integer or pattern");
  } else {
    io::throw_format(path, 1, "unknown field '" + toks[3] + "', expected real, integer or pattern");
  }
  if (symmetry == "general") h.symmetry = Symmetry::general;
  else if (symmetry == "symmetric") h.symmetry = Symmetry::symmetric;
  else if (symmetry == "hermitian" || symmetry == "skew-symmetric") {
    io::throw_format(path, 1, "unsupported symmetry '" + toks[4] + "': only general and symmetric "
                              "matrices can be read");
  } else {
    io::throw_format(path, 1, "unknown symmetry '" + toks[4] + "', expected general or symmetric");
  }
  if (toks.size() > 5) {
    io::throw_format(path, 1, "unexpected token '" + toks[5] + "' after the banner's symmetry");
  }

  // Comments and blank lines, then the size line.
  int64_t line = 1;
  const char* p = nl < e ? nl + 1 : e;
  for (;;) {
    if (p == e) {
      io::throw_format(path, line, "file ends before the size line 'rows cols entries'");
    }
    ++line;
    const char* q = io::skip_blanks(p, e);
    nl = io::find_newline(q, e);
    if (q == nl || *q == '%') {
      p = nl < e ? nl + 1 : e;
      continue;
    }
    int64_t vals[3];
    const char* names[3] = {"row count", "column count", "entry count"};
    for (int k = 0; k < 3; ++k) {
      q = io::skip_blanks(q, nl);
      if (q == nl) {
        io::throw_format(path, line, std::string("size line is missing the ") + names[k] +
                                         ", expected 'rows cols entries'");
      }
      uint64_t u = 0;
      bool overflow = false;
      const char* r = io::parse_uint(q, nl, u, overflow);
      if (!r || !io::is_token_end(r, nl)) {
        if (*q == '-') {
          io::throw_format(path, line, std::string("negative ") + names[k] + " '" +
                                           io::token_at(q, nl) + "' on the size line");
        }
        if (overflow) {
          io::throw_format(path, line, std::string(names[k]) + " '" + io::token_at(q, nl) +
                                           "' does not fit in 64 bits");
        }
        io::throw_format(path, line, std::string("expected the ") + names[k] +
                                         " (a non-negative integer) on the size line, found '" +
                                         io::token_at(q, nl) + "'");
      }
      vals[k] = static_cast<int64_t>(u);
      q = r;
    }
    q = io::skip_blanks(q, nl);
    if (q != nl) {
      io::throw_format(path, line, "unexpected token '" + io::token_at(q, nl) +
                                       "' on the size line, expected 'rows cols entries'");
    }
    h.n_rows = vals[0];
    h.n_cols = vals[1];
    h.nnz = vals[2];
    h.size_line = line;
    h.body = nl < e ? nl + 1 : e;
    h.body_line = line + 1;
    return h;
  }
}

// Error for a token that should have been a 1-based index.
std::string index_error(const char* p, const char* e, const char* what, bool overflow) {
  const std::string tok = io::token_at(p, e);
  if (p < e && *p == '-') return std::string("negative ") + what + " index '" + tok + "'";
  if (overflow) return std::string(what) + " index '" + tok + "' does not fit in 64 bits";
  if (p == e || *p == '\n') return std::string("missing ") + what + " index";
  return std::string("expected a ") + what + " index (positive integer), found '" + tok + "'";
}

struct ParseTask {
  Field field;
  uint64_t n_rows, n_cols;
  bool allow_nonfinite;
  int64_t* rows;
  int64_t* cols;
  float* vals;  // null: values are checked but not kept
};

// Parses one chunk into rows/cols/vals starting at `k`; returns false with `err` set at the
// first malformed line. Returns the number of off-diagonal entries in `offdiag`.
bool parse_chunk(const ParseTask& t, const LineChunk& c, int64_t k, ChunkError& err,
                 int64_t& offdiag) {
  const char* p = c.begin;
  const char* const e = c.end;
  int64_t line = 0;
  int64_t off = 0;
  auto fail = [&](std::string msg) {
    err.line = line;
    err.msg = std::move(msg);
    return false;
  };
  while (p < e) {
    p = io::skip_blanks(p, e);
    if (p == e) break;
    if (*p == '\n') {
      ++p;
      ++line;
      continue;
    }
    if (*p == '%') {
      p = io::find_newline(p, e);
      continue;
    }
    uint64_t i = 0, j = 0;
    bool overflow = false;
    const char* q = io::parse_uint(p, e, i, overflow);
    if (!q || !io::is_token_end(q, e)) return fail(index_error(p, e, "row", overflow));
    if (i == 0) return fail("row index 0 is invalid: Matrix Market indices are 1-based");
    if (i > t.n_rows) {
      return fail("row index " + std::to_string(i) + " exceeds the " + std::to_string(t.n_rows) +
                  " rows declared on the size line");
    }
    p = io::skip_blanks(q, e);
    q = io::parse_uint(p, e, j, overflow);
    if (!q || !io::is_token_end(q, e)) return fail(index_error(p, e, "column", overflow));
    if (j == 0) return fail("column index 0 is invalid: Matrix Market indices are 1-based");
    if (j > t.n_cols) {
      return fail("column index " + std::to_string(j) + " exceeds the " +
                  std::to_string(t.n_cols) + " columns declared on the size line");
    }
    float v = 1.f;
    if (t.field != Field::pattern) {
      p = io::skip_blanks(q, e);
      if (p == e || *p == '\n') return fail("missing value after the column index");
      double d = 0;
      if (t.field == Field::integer) {
        int64_t iv = 0;
        q = io::parse_int(p, e, iv, overflow);
        d = static_cast<double>(iv);
      } else {
        q = io::parse_double(p, e, d);
      }
      if (!q || !io::is_token_end(q, e)) {
        return fail(std::string("expected ") + (t.field == Field::integer ? "an integer" : "a real") +
                    " value, found '" + io::token_at(p, e) + "'");
      }
      v = static_cast<float>(d);
      if (!std::isfinite(v) && !t.allow_nonfinite) {
        if (std::isfinite(d)) return fail("value '" + io::token_at(p, e) + "' overflows float32");
        return fail("value '" + io::token_at(p, e) +
                    "' is not finite (NaN/Inf are rejected unless ReadOptions.allow_nonfinite)");
      }
    }
    p = io::skip_blanks(q, e);
    if (p < e && *p != '\n') {
      return fail("unexpected extra token '" + io::token_at(p, e) + "' (a " +
                  (t.field == Field::pattern ? "pattern" : "valued") + " entry has " +
                  (t.field == Field::pattern ? "2" : "3") + " columns)");
    }
    t.rows[k] = static_cast<int64_t>(i - 1);
    t.cols[k] = static_cast<int64_t>(j - 1);
    if (t.vals) t.vals[k] = v;
    off += i != j;
    ++k;
  }
  offdiag = off;
  return true;
}

}  // namespace

Graph read_mtx(const std::string& path, const ReadOptions& options) {
  const std::string buf = read_file_decompressed(path);
  const char* const b = buf.data();
  const char* const e = b + buf.size();
  const Header h = parse_header(path, b, e);
  const bool symmetric = h.symmetry == Symmetry::symmetric;
  if (symmetric && h.n_rows != h.n_cols) {
    io::throw_format(path, h.size_line, "a symmetric matrix must be square, declared " +
                                            std::to_string(h.n_rows) + " x " +
                                            std::to_string(h.n_cols));
  }

  // Impossible sizes are refused before anything is allocated. Each entry needs at least
  // "i j\n" (4 bytes; the last line may lack its newline). The bound deliberately ignores the
  // value column: a truncated file then reaches the parser, whose message names the line.
  const uint64_t body_bytes = static_cast<uint64_t>(e - h.body);
  const uint64_t min_entry = 4;
  if (static_cast<uint64_t>(h.nnz) > (body_bytes + 1) / min_entry) {
    io::throw_format(path, h.size_line,
                     "declares " + std::to_string(h.nnz) + " entries but only " +
                         std::to_string(body_bytes) + " bytes follow the size line; each entry "
                         "needs at least " + std::to_string(min_entry) + " bytes, so the file is "
                         "truncated or the size line is wrong");
  }
  const bool has_values = h.field != Field::pattern;
  const bool keep_values = has_values && options.keep_values;
  {
    // Parse arrays (int64 row/col + f32 value, doubled when symmetric) plus the built graph
    // (at most the same again) plus the per-row arrays of the build (as io::check_graph_fits).
    const double entries = static_cast<double>(h.nnz) * (symmetric ? 2 : 1);
    const double bytes = entries * (16.0 + (keep_values ? 4 : 0)) * 2 +
                         (static_cast<double>(h.n_rows) + 1) * 32;
    const double mem = static_cast<double>(io::physical_memory_bytes());
    if (bytes > mem) {
      io::throw_format(path, h.size_line,
                       "declared sizes (" + std::to_string(h.n_rows) + " x " +
                           std::to_string(h.n_cols) + ", " + std::to_string(h.nnz) +
                           " entries) would need about " +
                           std::to_string(static_cast<uint64_t>(bytes / 1048576)) +
                           " MiB, more than this machine's " +
                           std::to_string(static_cast<uint64_t>(mem / 1048576)) +
                           " MiB of memory; refusing to allocate");
    }
  }

  const int threads = std::max(1, omp_get_max_threads());
  const size_t target = std::clamp<size_t>(body_bytes / (static_cast<size_t>(threads) * 8),
                                           size_t{256} << 10, size_t{8} << 20);
  std::vector<LineChunk> chunks = io::split_lines(h.body, e, target);
  io::count_lines(chunks, "%");
  int64_t found = 0, total_lines = 0;
  for (const LineChunk& c : chunks) {
    found += c.entries;
    total_lines += c.lines;
  }
  if (found < h.nnz) {
    const bool trailing_newline = h.body < e && e[-1] == '\n';
    const int64_t last_line =
        h.body < e ? h.body_line + total_lines - (trailing_newline ? 1 : 0) : h.size_line;
    io::throw_format(path, last_line,
                     "file ends after " + std::to_string(found) + " entries, but line " +
                         std::to_string(h.size_line) + " declares " + std::to_string(h.nnz) +
                         " (truncated file?)");
  }
  if (found > h.nnz) {
    io::throw_format(path, io::line_of_entry(chunks, h.body_line, h.nnz, "%"),
                     "more entries than the " + std::to_string(h.nnz) + " declared on line " +
                         std::to_string(h.size_line));
  }

  const size_t nnz = static_cast<size_t>(h.nnz);
  std::vector<int64_t> rows, cols;
  std::vector<float> vals;
  if (symmetric) {
    // Room for the mirrored entries up front: growing later would copy the arrays.
    rows.reserve(2 * nnz);
    cols.reserve(2 * nnz);
    if (keep_values) vals.reserve(2 * nnz);
  }
  rows.resize(nnz);
  cols.resize(nnz);
  if (keep_values) vals.resize(nnz);

  const size_t nc = chunks.size();
  std::vector<int64_t> first_entry(nc + 1, 0), first_line(nc + 1, h.body_line);
  for (size_t i = 0; i < nc; ++i) {
    first_entry[i + 1] = first_entry[i] + chunks[i].entries;
    first_line[i + 1] = first_line[i] + chunks[i].lines;
  }
  std::vector<ChunkError> errors(nc);
  std::vector<int64_t> offdiag(nc, 0);
  const ParseTask task{h.field,     static_cast<uint64_t>(h.n_rows), static_cast<uint64_t>(h.n_cols),
                       options.allow_nonfinite, rows.data(), cols.data(),
                       keep_values ? vals.data() : nullptr};
  std::atomic<uint64_t> done{0};
  io::Progress progress(options.progress);
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t ci = 0; ci < static_cast<int64_t>(nc); ++ci) {
    const size_t i = static_cast<size_t>(ci);
    try {
      parse_chunk(task, chunks[i], first_entry[i], errors[i], offdiag[i]);
    } catch (const std::exception& ex) {  // only allocation failures in messages can land here
      errors[i].line = 0;
      errors[i].msg = ex.what();
    }
    const uint64_t d = done.fetch_add(static_cast<uint64_t>(chunks[i].end - chunks[i].begin)) +
                       static_cast<uint64_t>(chunks[i].end - chunks[i].begin);
    if (omp_get_thread_num() == 0) progress.report(static_cast<double>(d) / static_cast<double>(body_bytes + 1));
  }
  for (size_t i = 0; i < nc; ++i) {
    if (errors[i].line >= 0) io::throw_format(path, first_line[i] + errors[i].line, errors[i].msg);
  }

  if (symmetric) {
    std::vector<int64_t> first_mirror(nc + 1, static_cast<int64_t>(nnz));
    for (size_t i = 0; i < nc; ++i) first_mirror[i + 1] = first_mirror[i] + offdiag[i];
    const size_t total = static_cast<size_t>(first_mirror[nc]);
    rows.resize(total);
    cols.resize(total);
    if (keep_values) vals.resize(total);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t ci = 0; ci < static_cast<int64_t>(nc); ++ci) {
      const size_t i = static_cast<size_t>(ci);
      int64_t out = first_mirror[i];
      for (int64_t k = first_entry[i]; k < first_entry[i + 1]; ++k) {
        const size_t s = static_cast<size_t>(k);
        if (rows[s] == cols[s]) continue;
        const size_t d = static_cast<size_t>(out++);
        rows[d] = cols[s];
        cols[d] = rows[s];
        if (keep_values) vals[d] = vals[s];
      }
    }
  }
  progress.report(1.0);
  try {
    return graph_from_edges(h.n_rows, h.n_cols, rows, cols, vals, options.build);
  } catch (const InvalidArgument& ex) {
    io::throw_format(path, 0, ex.what());
  }
}

void write_mtx(const Graph& graph, const std::string& path) {
  const Graph g = io::host_graph(graph);
  io::AtomicWriter w(path);
  const bool values = g.has_values();
  w.write(std::string("%%MatrixMarket matrix coordinate ") + (values ? "real" : "pattern") +
          " general\n% written by spgnn: entry \"i j\" is A[i-1, j-1], row i receives from "
          "column j\n" +
          std::to_string(g.n_rows) + " " + std::to_string(g.n_cols) + " " +
          std::to_string(g.nnz()) + "\n");
  io::write_edge_lines(w, g, 1, values);
  w.commit();
}

}  // namespace spgnn

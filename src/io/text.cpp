// Shared machinery of the text formats (Matrix Market, SNAP): splitting a buffer into
// line-aligned chunks that threads parse independently, counting lines so error messages keep
// exact line numbers, and parallel formatting of edge lines for the writers.
#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "io/io_internal.hpp"

namespace spgnn::io {

std::vector<LineChunk> split_lines(const char* b, const char* e, size_t target) {
  std::vector<LineChunk> chunks;
  target = std::max<size_t>(target, 1);
  const char* p = b;
  while (p < e) {
    const char* q = static_cast<size_t>(e - p) <= target ? e : find_newline(p + target, e);
    if (q < e) ++q;  // chunks end just after a '\n'
    chunks.push_back({p, q});
    p = q;
  }
  return chunks;
}

namespace {
bool is_comment(char c, const char* comment_chars) {
  for (const char* k = comment_chars; *k; ++k)
    if (c == *k) return true;
  return false;
}
}  // namespace

void count_lines(std::vector<LineChunk>& chunks, const char* comment_chars) {
  const int64_t nc = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < nc; ++i) {
    LineChunk& c = chunks[static_cast<size_t>(i)];
    int64_t lines = 0, entries = 0;
    const char* p = c.begin;
    while (p < c.end) {
      const char* q = skip_blanks(p, c.end);
      if (q < c.end && *q != '\n' && !is_comment(*q, comment_chars)) ++entries;
      const char* nl = find_newline(q, c.end);
      if (nl == c.end) break;
      ++lines;
      p = nl + 1;
    }
    c.lines = lines;
    c.entries = entries;
  }
}

int64_t line_of_entry(const std::vector<LineChunk>& chunks, int64_t first_line, int64_t k,
                      const char* comment_chars) {
  int64_t line = first_line;
  for (const LineChunk& c : chunks) {
    if (k >= c.entries) {
      k -= c.entries;
      line += c.lines;
      continue;
    }
    const char* p = c.begin;
    while (p < c.end) {
      const char* q = skip_blanks(p, c.end);
      if (q < c.end && *q != '\n' && !is_comment(*q, comment_chars) && k-- == 0) return line;
      const char* nl = find_newline(q, c.end);
      if (nl == c.end) break;
      ++line;
      p = nl + 1;
    }
  }
  return line;
}

namespace {

// Longest line: two 20-digit indices, a value ("-1.23456789e-38" fits in 16), separators.
constexpr size_t kMaxLineBytes = 64;
constexpr int64_t kEdgesPerBlock = int64_t{1} << 17;

template <class Idx>
size_t format_block(const Idx* row, const Idx* col, const float* val, int64_t begin, int64_t end,
                    int64_t base, char* out) {
  char* p = out;
  char* const cap = out + static_cast<size_t>(end - begin) * kMaxLineBytes;
  for (int64_t e = begin; e < end; ++e) {
    p = std::to_chars(p, cap, static_cast<int64_t>(row[e]) + base).ptr;
    *p++ = ' ';
    p = std::to_chars(p, cap, static_cast<int64_t>(col[e]) + base).ptr;
    if (val) {
      *p++ = ' ';
      // Shortest digits that read back to the same float: never longer than %.9g, exact.
      p = std::to_chars(p, cap, val[e]).ptr;
    }
    *p++ = '\n';
  }
  return static_cast<size_t>(p - out);
}

template <class Idx>
void write_lines_typed(AtomicWriter& w, const Graph& g, int64_t base, bool with_values) {
  const Idx* row = g.row.data<Idx>();
  const Idx* col = g.col.data<Idx>();
  const float* val = with_values ? g.val.data<float>() : nullptr;
  const int64_t nnz = g.nnz();
  const int64_t nblocks = (nnz + kEdgesPerBlock - 1) / kEdgesPerBlock;
  // Blocks are formatted a round at a time, in parallel, then written in file order; a round
  // holds a few blocks per thread so memory stays bounded whatever the graph size.
  const int64_t per_round = std::max(1, omp_get_max_threads()) * 2;
  std::vector<std::vector<char>> bufs(static_cast<size_t>(std::min(per_round, std::max<int64_t>(nblocks, 1))));
  std::vector<size_t> lens(bufs.size());
  for (int64_t first = 0; first < nblocks; first += per_round) {
    const int64_t count = std::min(per_round, nblocks - first);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t k = 0; k < count; ++k) {
      const int64_t b = (first + k) * kEdgesPerBlock;
      const int64_t e = std::min(nnz, b + kEdgesPerBlock);
      auto& buf = bufs[static_cast<size_t>(k)];
      if (buf.size() < static_cast<size_t>(kEdgesPerBlock) * kMaxLineBytes)
        buf.resize(static_cast<size_t>(kEdgesPerBlock) * kMaxLineBytes);
      lens[static_cast<size_t>(k)] = format_block(row, col, val, b, e, base, buf.data());
    }
    for (int64_t k = 0; k < count; ++k)
      w.write(bufs[static_cast<size_t>(k)].data(), lens[static_cast<size_t>(k)]);
  }
}

}  // namespace

void write_edge_lines(AtomicWriter& w, const Graph& g, int64_t base, bool with_values) {
  if (g.nnz() == 0) return;
  if (g.index_dtype() == DType::i32) write_lines_typed<int32_t>(w, g, base, with_values);
  else write_lines_typed<int64_t>(w, g, base, with_values);
}

Graph host_graph(const Graph& g) {
  return g.device().is_cuda() ? g.to(Device::cpu()) : g;
}

void check_finite_values(const std::string& path, const Graph& g) {
  if (!g.has_values()) return;
  const float* v = g.val.data<float>();
  const int64_t n = g.val.numel();
  int64_t bad = n;
#pragma omp parallel for reduction(min : bad)
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]) && i < bad) bad = i;
  if (bad < n) {
    throw_format(path, 0, "edge value " + std::to_string(bad) + " is " +
                              (std::isnan(v[bad]) ? "NaN" : "infinite") +
                              " (set ReadOptions.allow_nonfinite to accept)");
  }
}

}  // namespace spgnn::io

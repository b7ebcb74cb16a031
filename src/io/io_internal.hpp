// Internal helpers shared by the readers and writers in src/io: error formatting, raw file
// access (plain or decompressed), the atomic streaming writer, memory limits, and the
// line-chunking / token-parsing primitives of the text formats.
#pragma once
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "spgnn/error.hpp"
#include "spgnn/graph.hpp"
#include "spgnn/io.hpp"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "spgnn io assumes a little-endian host (.npy '<' dtypes and the .spg layout)"
#endif

namespace spgnn::io {

// Throws FormatError "path:line: msg" (line <= 0: "path: msg").
[[noreturn]] void throw_format(const std::string& path, int64_t line, const std::string& msg);

// The .spg checksum of n bytes (spg.cpp describes it): detects corruption, not cryptographic;
// the same value whatever the thread count. Checkpoints use it too.
uint64_t hash_bytes(const void* data, uint64_t n);

// Physical memory of the machine in bytes; the ceiling for any allocation a file may ask for.
uint64_t physical_memory_bytes();
// Refuses (InvalidArgument: "<what> would need X MiB, more than this machine's Y MiB of
// memory") sizes that come from arguments, not files: generators, synthetic features.
void require_memory(double bytes, const std::string& what);
// Refuses (FormatError naming the file and `what`) when `bytes` exceeds physical memory.
void check_fits_in_memory(const std::string& path, int64_t line, uint64_t bytes,
                          const std::string& what);
// Bytes a build of a graph of `n_rows` rows and `nnz` edges needs at its peak: about four 8-byte
// arrays per row (offsets, rowptr, degree counts) and 40 bytes per edge (the edge arrays and
// their sort buffers). In double: the sizes may be anything up to INT64_MAX.
inline double graph_build_bytes(double n_rows, double nnz) { return (n_rows + 1) * 32 + nnz * 40; }
// Refuses a graph of `n_rows` rows and `nnz` edges that cannot be built in memory, before any
// array is allocated (graph_build_bytes). Guards sizes a file declares or implies (a size line,
// a header, the largest vertex id) rather than sizes bounded by the bytes actually present.
void check_graph_fits(const std::string& path, int64_t line, int64_t n_rows, int64_t nnz,
                      const std::string& what);

bool is_gzip_magic(const void* p, size_t n);
bool is_zstd_magic(const void* p, size_t n);

// Random access to a file's bytes: the file itself (pread, no copy) or, when its magic says it
// is gzip/zstd, its decompressed content held in memory. Lets binary readers (npy, spg) read
// arrays straight into tensors for plain files while still accepting compressed ones.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  uint64_t size() const { return size_; }
  bool compressed() const { return compressed_; }
  // Reads exactly n bytes at `offset`; throws FormatError naming the file on a short read.
  void read_at(uint64_t offset, void* dst, size_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  bool compressed_ = false;
  std::string bytes_;  // decompressed content when compressed_
  uint64_t size_ = 0;
};

// Streams bytes into "<path>.tmp.<pid>.<random>" and renames it over `path` on commit(); if
// commit() is never reached (exception, early return) the destructor removes the temporary, so
// a failed write never leaves a partial file under either name.
class AtomicWriter {
 public:
  explicit AtomicWriter(const std::string& path);
  ~AtomicWriter();
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;
  void write(const void* p, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  // Zero bytes up to the next multiple of `alignment` of the bytes written so far.
  void pad_to(size_t alignment);
  uint64_t offset() const { return written_; }
  void commit();

 private:
  void flush();
  [[noreturn]] void fail(const std::string& what);
  std::string path_, tmp_;
  int fd_ = -1;
  std::vector<char> buf_;
  size_t buf_used_ = 0;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// ---- text parsing -------------------------------------------------------------------------------

inline bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
inline bool is_token_end(const char* p, const char* e) {
  return p == e || is_blank(*p) || *p == '\n';
}
inline const char* skip_blanks(const char* p, const char* e) {
  while (p < e && is_blank(*p)) ++p;
  return p;
}
inline const char* find_newline(const char* p, const char* e) {
  const void* q = std::memchr(p, '\n', static_cast<size_t>(e - p));
  return q ? static_cast<const char*>(q) : e;
}
// The token starting at p (up to whitespace), shortened for messages.
std::string token_at(const char* p, const char* e);

// Parses an unsigned decimal integer; returns the end pointer, or nullptr when p does not start
// with a digit or the value overflows int64 (`overflow` tells which).
inline const char* parse_uint(const char* p, const char* e, uint64_t& out, bool& overflow) {
  overflow = false;
  if (p == e || static_cast<unsigned>(*p - '0') > 9) return nullptr;
  uint64_t v = 0;
  const char* start = p;
  while (p < e && static_cast<unsigned>(*p - '0') <= 9) {
    v = v * 10 + static_cast<unsigned>(*p - '0');
    ++p;
    // 18 digits always fit; beyond that check exactly.
    if (p - start > 18 && (p - start > 19 || v > static_cast<uint64_t>(INT64_MAX))) {
      overflow = true;
      return nullptr;
    }
  }
  out = v;
  return p;
}
inline const char* parse_int(const char* p, const char* e, int64_t& out, bool& overflow) {
  bool neg = false;
  if (p < e && (*p == '-' || *p == '+')) {
    neg = *p == '-';
    ++p;
  }
  uint64_t u = 0;
  p = parse_uint(p, e, u, overflow);
  if (!p) return nullptr;
  out = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
  return p;
}
// Parses a floating-point value (from_chars: fast, locale-independent; also "nan", "inf").
// Values beyond double's range read as strtod would: 1e400 as inf, 1e-400 as 0.
inline const char* parse_double(const char* p, const char* e, double& out) {
  if (p < e && *p == '+') {
    ++p;
    if (p < e && (*p == '-' || *p == '+')) return nullptr;  // "+-1" is not a number
  }
  auto r = std::from_chars(p, e, out);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves `out` unset here; long double's wider exponent tells overflow from
    // underflow for any exponent a text file plausibly holds.
    long double wide = 0;
    const auto w = std::from_chars(p, e, wide);
    if (w.ec != std::errc() || w.ptr != r.ptr) return nullptr;
    out = static_cast<double>(wide);
    return r.ptr;
  }
  if (r.ec != std::errc()) return nullptr;
  return r.ptr;
}

// A piece of a text buffer that starts at a line start and ends just after a '\n' (or at the
// buffer's end), so each can be parsed independently.
struct LineChunk {
  const char* begin;
  const char* end;
  int64_t lines = 0;    // '\n' characters inside
  int64_t entries = 0;  // data lines inside (not blank, not comment)
};
// Splits [b, e) into line-aligned chunks of about `target` bytes.
std::vector<LineChunk> split_lines(const char* b, const char* e, size_t target);
// Fills lines/entries of every chunk in parallel. A data line is one whose first non-blank
// character is not '\n' and not one of `comment_chars`.
void count_lines(std::vector<LineChunk>& chunks, const char* comment_chars);
// 1-based line number of the k-th (0-based) data line, found from the chunk counts.
int64_t line_of_entry(const std::vector<LineChunk>& chunks, int64_t first_line, int64_t k,
                      const char* comment_chars);

// First error found in a chunk, kept until all threads finish so the earliest one in the file
// is reported (errors cannot be thrown out of an OpenMP region).
struct ChunkError {
  int64_t line = -1;  // line within the chunk (0-based) or -1 when none
  std::string msg;
};

// Calls `progress` from the calling thread only, with a monotone fraction.
class Progress {
 public:
  explicit Progress(const std::function<void(double)>& f) : f_(f) {}
  void report(double frac) {
    if (f_ && frac > last_) {
      last_ = frac;
      f_(frac);
    }
  }
 private:
  const std::function<void(double)>& f_;
  double last_ = -1;
};

// ---- text writing ---------------------------------------------------------------------------------

// Writes "row col [val]\n" lines for every edge of the host graph, indices offset by `base`,
// values in the shortest form that round-trips float32 (never more than %.9g's 9 digits).
// Formats blocks of edges in parallel and writes them in order.
void write_edge_lines(AtomicWriter& w, const Graph& g, int64_t base, bool with_values);

// ---- NumPy -----------------------------------------------------------------------------------------

// What a .npy header says, read without loading the data.
struct NpyInfo {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  uint64_t data_offset = 0;
};
NpyInfo read_npy_info(const InputFile& f, const std::string& path);
// Refuses a file whose data is shorter or longer than the header's shape and dtype say: numpy
// writes exactly numel * itemsize bytes after the header, so any difference means a truncated
// file or a header (shape, dtype, header length) that lies, and reading on would misplace data.
void check_npy_data_size(const InputFile& f, const NpyInfo& info, const std::string& path);

// ---- dataset directories ------------------------------------------------------------------------

// Graph from an edge_index.npy [2, E] (int32/int64), its rows ordered as options.edge_index_rows
// says (automatic: the dataset directory's spgnn.json, else PyG's src,dst).
// n < 0: n = largest id + 1; otherwise every id must be below n.
// `dataset_dir`: the directory whose spgnn.json may declare the rows' order ("" for a bare file).
Graph read_edge_index(const std::string& path, const ReadOptions& options, int64_t n,
                      const std::string& dataset_dir = "");
// The graph of a dataset directory without loading features: n from x.npy / y.npy headers.
Graph read_dataset_graph(const std::string& dir, const ReadOptions& options);
// edge_index.npy int64 [2, E] of the graph (edge values are not stored).
void write_edge_index(const Graph& g, const std::string& path);

// ---- graph helpers ---------------------------------------------------------------------------------

// Host copy of g when it lives on a device.
Graph host_graph(const Graph& g);
// Throws FormatError naming the file when a value is NaN or Inf.
void check_finite_values(const std::string& path, const Graph& g);

}  // namespace spgnn::io

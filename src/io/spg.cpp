// spgnn's native binary graph format (.spg), version 1. All fields little-endian.
//
//   offset 0    SpgHeader (128 bytes, below)
//   rowptr_off  rowptr[n_rows + 1]   index type (4 or 8 bytes)   64-byte aligned
//   col_off     col[nnz]             index type                  64-byte aligned
//   val_off     val[nnz]             float32 (only with values)  64-byte aligned
//   file_bytes  end of file (padding between arrays is zero)
//
// row[] is not stored: it is rebuilt from rowptr on load (one parallel pass, far cheaper than
// reading it), which makes files a third smaller. Arrays sit at 64-byte offsets so the file can
// also be mapped directly. Loading reads each array straight into its tensor, hashes it
// (checksum below) and checks rowptr/col consistency, so a corrupt file fails with a message
// instead of producing a graph that crashes a kernel later.
//
// Checksum (payload_hash): each array is cut into 1 MiB blocks; a block is hashed by four
// independent multiply-rotate lanes over its 8-byte little-endian words (zero-padded tail, length
// mixed in) so the CPU overlaps the multiplies; block hashes are folded in order, then the
// arrays' hashes in file order. Blocks are hashed in parallel, and the result does not depend on
// the thread count. It detects corruption, it is not cryptographic. header_hash uses the same
// function over the 128 header bytes with header_hash itself zeroed.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "io/io_internal.hpp"
#include "spgnn/io.hpp"

namespace spgnn {
namespace {

constexpr char kSpgMagic[8] = {'S', 'P', 'G', 'N', 'N', 'G', 'R', 'F'};
constexpr uint32_t kSpgVersion = 1;
constexpr uint32_t kFlagValues = 1u;
constexpr uint64_t kAlign = 64;

struct SpgHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t index_bytes;
  uint32_t flags;
  int64_t n_rows, n_cols, nnz;
  uint64_t rowptr_offset, col_offset, val_offset;  // val_offset is 0 without values
  uint64_t file_bytes;
  uint64_t payload_hash;
  uint64_t header_hash;
  uint8_t reserved[32];
};
static_assert(sizeof(SpgHeader) == 128, "the .spg header is 128 bytes on disk");

// ---- checksum -----------------------------------------------------------------------------------

constexpr uint64_t kMul1 = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kMul2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kHashBlock = uint64_t{1} << 20;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline uint64_t lane_step(uint64_t s, uint64_t w) { return rotl(s ^ (w * kMul1), 31) * kMul2; }
inline uint64_t fmix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return h;
}

uint64_t hash_block(const unsigned char* p, uint64_t n) {
  uint64_t s[4] = {kMul1, kMul2, kMul1 ^ 0x5bd1e995ULL, kMul2 ^ 0x27d4eb2fULL};
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s[0] = lane_step(s[0], load64(p + i));
    s[1] = lane_step(s[1], load64(p + i + 8));
    s[2] = lane_step(s[2], load64(p + i + 16));
    s[3] = lane_step(s[3], load64(p + i + 24));
  }
  for (int l = 0; i < n; ++l, i += 8) {
    unsigned char tail[8] = {};
    std::memcpy(tail, p + i, static_cast<size_t>(std::min<uint64_t>(8, n - i)));
    s[l] = lane_step(s[l], load64(tail));
  }
  return fmix(rotl(s[0], 1) + rotl(s[1], 7) + rotl(s[2], 12) + rotl(s[3], 18) + n);
}

}  // namespace

namespace io {
uint64_t hash_bytes(const void* data, uint64_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  const int64_t nb = static_cast<int64_t>((n + kHashBlock - 1) / kHashBlock);
  std::vector<uint64_t> blocks(static_cast<size_t>(nb));
#pragma omp parallel for schedule(static) if (nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    const uint64_t off = static_cast<uint64_t>(b) * kHashBlock;
    blocks[static_cast<size_t>(b)] = hash_block(p + off, std::min(kHashBlock, n - off));
  }
  uint64_t h = n * kMul2;
  for (uint64_t bh : blocks) h = fmix(h ^ bh) * kMul1 + 1;
  return h;
}
}  // namespace io

namespace {
using io::hash_bytes;

uint64_t fold(uint64_t h, uint64_t array_hash) { return fmix(h * kMul1 ^ array_hash); }

uint64_t header_hash_of(SpgHeader h) {
  h.header_hash = 0;
  return hash_bytes(&h, sizeof h);
}

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Layout implied by the sizes; false when a size overflows 64 bits.
bool layout(uint64_t n_rows, uint64_t nnz, uint64_t ib, bool values, SpgHeader& h) {
  if (n_rows >= (UINT64_MAX >> 8) / ib || nnz >= (UINT64_MAX >> 8) / ib) return false;
  h.rowptr_offset = align_up(sizeof(SpgHeader));
  h.col_offset = align_up(h.rowptr_offset + (n_rows + 1) * ib);
  const uint64_t col_end = h.col_offset + nnz * ib;
  h.val_offset = values ? align_up(col_end) : 0;
  h.file_bytes = values ? h.val_offset + nnz * 4 : col_end;
  return true;
}

std::string printable(const char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (c >= 32 && c < 127) s.push_back(static_cast<char>(c));
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    }
  }
  return s;
}

// First inconsistency in rowptr/col, or empty. Every rowptr entry and column is looked at: a
// corrupt-but-checksummed file (written by a buggy producer) must not reach the kernels.
template <class Idx>
std::string check_structure(const Idx* rowptr, const Idx* col, int64_t n_rows, int64_t n_cols,
                            int64_t nnz) {
  if (rowptr[0] != 0) return "rowptr[0] is " + std::to_string(rowptr[0]) + ", expected 0";
  if (static_cast<int64_t>(rowptr[n_rows]) != nnz) {
    return "rowptr[" + std::to_string(n_rows) + "] is " + std::to_string(rowptr[n_rows]) +
           ", expected nnz = " + std::to_string(nnz);
  }
  int64_t bad_row = n_rows;
#pragma omp parallel for schedule(static) reduction(min : bad_row)
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t b = rowptr[r], e = rowptr[r + 1];
    bool ok = b <= e && b >= 0 && e <= nnz;
    for (int64_t k = b; ok && k < e; ++k) {
      ok = col[k] >= 0 && col[k] < n_cols && (k == b || col[k - 1] <= col[k]);
    }
    if (!ok && r < bad_row) bad_row = r;
  }
  if (bad_row < n_rows) {
    return "row " + std::to_string(bad_row) + " is inconsistent (rowptr not monotone, column "
           "out of [0, " + std::to_string(n_cols) + "), or columns not sorted)";
  }
  return {};
}

template <class Idx>
void rebuild_rows(const Idx* rowptr, Idx* row, int64_t n_rows) {
#pragma omp parallel for schedule(dynamic, 4096)
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t k = rowptr[r]; k < static_cast<int64_t>(rowptr[r + 1]); ++k) row[k] = static_cast<Idx>(r);
}

}  // namespace

Graph read_spg(const std::string& path) {
  const io::InputFile f(path);
  if (f.size() < sizeof(SpgHeader)) {
    io::throw_format(path, 0, "truncated: " + std::to_string(f.size()) +
                                  " bytes, a .spg header needs " +
                                  std::to_string(sizeof(SpgHeader)));
  }
  SpgHeader h;
  f.read_at(0, &h, sizeof h);
  if (std::memcmp(h.magic, kSpgMagic, 8) != 0) {
    io::throw_format(path, 0, "bad magic '" + printable(h.magic, 8) +
                                  "': not a .spg file (expected 'SPGNNGRF')");
  }
  if (h.version != kSpgVersion) {
    io::throw_format(path, 0, "unsupported .spg version " + std::to_string(h.version) +
                                  " (this build reads version " + std::to_string(kSpgVersion) + ")");
  }
  if (h.header_hash != header_hash_of(h)) {
    io::throw_format(path, 0, "header checksum mismatch: the .spg header is corrupt");
  }
  if (h.header_bytes != sizeof(SpgHeader) || (h.index_bytes != 4 && h.index_bytes != 8) ||
      (h.flags & ~kFlagValues) != 0 || h.n_rows < 0 || h.n_cols < 0 || h.nnz < 0) {
    io::throw_format(path, 0, "inconsistent header: header_bytes=" + std::to_string(h.header_bytes) +
                                  " (expected 128), index_bytes=" + std::to_string(h.index_bytes) +
                                  " (expected 4 or 8), flags=" + std::to_string(h.flags) +
                                  ", sizes " + std::to_string(h.n_rows) + " x " +
                                  std::to_string(h.n_cols) + " nnz " + std::to_string(h.nnz));
  }
  const bool values = (h.flags & kFlagValues) != 0;
  const DType idx = h.index_bytes == 4 ? DType::i32 : DType::i64;
  if (idx == DType::i32 && (h.n_rows > INT32_MAX - 1 || h.n_cols > INT32_MAX || h.nnz > INT32_MAX)) {
    io::throw_format(path, 0, "inconsistent header: sizes need 64-bit indices but index_bytes is 4");
  }
  SpgHeader want = h;
  if (!layout(static_cast<uint64_t>(h.n_rows), static_cast<uint64_t>(h.nnz), h.index_bytes,
              values, want) ||
      want.rowptr_offset != h.rowptr_offset || want.col_offset != h.col_offset ||
      want.val_offset != h.val_offset || want.file_bytes != h.file_bytes) {
    io::throw_format(path, 0, "inconsistent header: array offsets do not match the sizes (" +
                                  std::to_string(h.n_rows) + " rows, " + std::to_string(h.nnz) +
                                  " edges, expected file size " + std::to_string(want.file_bytes) +
                                  ", header says " + std::to_string(h.file_bytes) + ")");
  }
  if (f.size() != h.file_bytes) {
    io::throw_format(path, 0, std::string(f.size() < h.file_bytes ? "truncated" : "trailing bytes") +
                                  ": the header expects " + std::to_string(h.file_bytes) +
                                  " bytes, the file has " + std::to_string(f.size()));
  }
  io::check_fits_in_memory(path, 0, h.file_bytes + static_cast<uint64_t>(h.nnz) * h.index_bytes,
                           "the graph");

  Graph g;
  g.n_rows = h.n_rows;
  g.n_cols = h.n_cols;
  g.rowptr = Tensor::empty({h.n_rows + 1}, idx);
  g.col = Tensor::empty({h.nnz}, idx);
  g.row = Tensor::empty({h.nnz}, idx);
  f.read_at(h.rowptr_offset, g.rowptr.raw(), g.rowptr.nbytes());
  f.read_at(h.col_offset, g.col.raw(), g.col.nbytes());
  uint64_t hash = fold(0, hash_bytes(g.rowptr.raw(), g.rowptr.nbytes()));
  hash = fold(hash, hash_bytes(g.col.raw(), g.col.nbytes()));
  if (values) {
    g.val = Tensor::empty({h.nnz}, DType::f32);
    f.read_at(h.val_offset, g.val.raw(), g.val.nbytes());
    hash = fold(hash, hash_bytes(g.val.raw(), g.val.nbytes()));
  }
  if (hash != h.payload_hash) {
    io::throw_format(path, 0, "payload checksum mismatch: the arrays are corrupt (expected hash " +
                                  std::to_string(h.payload_hash) + ", computed " +
                                  std::to_string(hash) + ")");
  }
  std::string bad;
  if (idx == DType::i32) {
    bad = check_structure(g.rowptr.data<int32_t>(), g.col.data<int32_t>(), h.n_rows, h.n_cols, h.nnz);
    if (bad.empty()) rebuild_rows(g.rowptr.data<int32_t>(), g.row.data<int32_t>(), h.n_rows);
  } else {
    bad = check_structure(g.rowptr.data<int64_t>(), g.col.data<int64_t>(), h.n_rows, h.n_cols, h.nnz);
    if (bad.empty()) rebuild_rows(g.rowptr.data<int64_t>(), g.row.data<int64_t>(), h.n_rows);
  }
  if (!bad.empty()) io::throw_format(path, 0, "inconsistent graph: " + bad);
  return g;
}

void write_spg(const Graph& graph, const std::string& path) {
  const Graph g = io::host_graph(graph);
  const int64_t nnz = g.nnz();
  const DType idx = g.index_dtype();
  SPGNN_CHECK(g.rowptr.defined() && g.rowptr.numel() == g.n_rows + 1 && g.rowptr.dtype() == idx,
              InvalidArgument, "write_spg('", path, "'): graph has no rowptr of ", g.n_rows + 1,
              " ", dtype_name(idx), " entries");
  SPGNN_CHECK(!g.has_values() || g.val.numel() == nnz, InvalidArgument, "write_spg('", path,
              "'): graph has ", g.val.numel(), " values for ", nnz, " edges");
  const bool values = g.has_values();
  SpgHeader h{};
  std::memcpy(h.magic, kSpgMagic, 8);
  h.version = kSpgVersion;
  h.header_bytes = sizeof(SpgHeader);
  h.index_bytes = static_cast<uint32_t>(dtype_size(idx));
  h.flags = values ? kFlagValues : 0;
  h.n_rows = g.n_rows;
  h.n_cols = g.n_cols;
  h.nnz = nnz;
  layout(static_cast<uint64_t>(g.n_rows), static_cast<uint64_t>(nnz), h.index_bytes, values, h);
  const size_t col_bytes = static_cast<size_t>(nnz) * h.index_bytes;
  const void* col = nnz ? g.col.raw() : nullptr;
  uint64_t hash = fold(0, hash_bytes(g.rowptr.raw(), g.rowptr.nbytes()));
  hash = fold(hash, hash_bytes(col, col_bytes));
  if (values) hash = fold(hash, hash_bytes(g.val.raw(), g.val.nbytes()));
  h.payload_hash = hash;
  h.header_hash = header_hash_of(h);

  io::AtomicWriter w(path);
  w.write(&h, sizeof h);
  w.pad_to(kAlign);
  w.write(g.rowptr.raw(), g.rowptr.nbytes());
  w.pad_to(kAlign);
  w.write(col, col_bytes);
  if (values) {
    w.pad_to(kAlign);
    w.write(g.val.raw(), g.val.nbytes());
  }
  if (w.offset() != h.file_bytes) {
    throw Error("write_spg('" + path + "'): internal layout mismatch");
  }
  w.commit();
}

}  // namespace spgnn

// Tests for include/spgnn/io.hpp: round trips through every format (values, pattern, int32 and
// int64 indices, empty graphs, gzip/zstd inputs), the parsers' details (symmetric expansion,
// SNAP id remapping, npy headers), and every malformed input, each checked for an error that
// names the file (and the line, for text formats).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <typeinfo>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "spgnn/error.hpp"
#include "spgnn/graph.hpp"
#include "spgnn/io.hpp"
#include "spgnn/partition.hpp"
#include "test_util.hpp"

namespace spgnn {
namespace {

// ---- helpers --------------------------------------------------------------------------------------

// A fresh directory per test, removed afterwards.
class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/spgnn_test_io_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { remove_tree(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Files in the test directory (to check that no temporary is left behind).
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static void remove_tree(const std::string& p) {
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
      if (DIR* d = ::opendir(p.c_str())) {
        while (dirent* e = ::readdir(d)) {
          const std::string n = e->d_name;
          if (n != "." && n != "..") remove_tree(p + "/" + n);
        }
        ::closedir(d);
      }
      ::rmdir(p.c_str());
    } else {
      ::unlink(p.c_str());
    }
  }
  std::string dir_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}
std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string gzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
std::string zstd(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(&out[0], out.size(), data.data(), data.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

using test::as_f32;
using test::as_i64;

void expect_same_graph(const Graph& a, const Graph& b, bool compare_dtype = true) {
  EXPECT_EQ(a.n_rows, b.n_rows);
  EXPECT_EQ(a.n_cols, b.n_cols);
  ASSERT_EQ(a.nnz(), b.nnz());
  if (compare_dtype) {
    EXPECT_EQ(a.index_dtype(), b.index_dtype());
  }
  EXPECT_EQ(as_i64(a.row), as_i64(b.row));
  EXPECT_EQ(as_i64(a.col), as_i64(b.col));
  EXPECT_EQ(as_i64(a.rowptr), as_i64(b.rowptr));
  ASSERT_EQ(a.has_values(), b.has_values());
  EXPECT_EQ(as_f32(a.val), as_f32(b.val));  // bit-exact: writers round-trip float32
}

// Expects `fn` to throw `Err` whose message contains every string in `parts`.
template <class Err = FormatError, class Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception containing '" << parts[0] << "'";
  } catch (const Err& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

Graph small_graph(bool values, IndexWidth width = IndexWidth::automatic) {
  BuildOptions opt;
  opt.index_width = width;
  std::vector<float> v;
  if (values) v = {0.5f, -1.25f, 3.0e-7f, 123456.789f, 1.0f / 3.0f};
  return graph_from_edges(4, 4, {0, 0, 2, 3, 3}, {1, 3, 2, 0, 3}, v, opt);
}

// Matrix Market text of a header plus lines.
std::string mtx(const std::string& banner_tail, const std::string& size, const std::string& body) {
  return "%%MatrixMarket matrix coordinate " + banner_tail + "\n" + size + "\n" + body;
}

// A .npy file with the given major version, header dict and data.
std::string make_npy(int major, std::string dict, const std::string& data) {
  const size_t prefix = major == 1 ? 10 : 12;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const size_t len = dict.size();
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + dict + data;
}

// ---- raw files, compression, atomic writes -----------------------------------------------------

TEST_F(IoTest, WriteFileAtomicLeavesNoTemporary) {
  const std::string p = path("a.bin");
  write_file_atomic(p, "hello", 5);
  EXPECT_EQ(read_bytes(p), "hello");
  write_file_atomic(p, "bye", 3);  // replaces
  EXPECT_EQ(read_bytes(p), "bye");
  EXPECT_EQ(listing(), std::vector<std::string>{"a.bin"});
}

TEST_F(IoTest, WriteFileAtomicFailureNamesPathAndCleansUp) {
  expect_error<Error>([&] { write_file_atomic(path("no/such/dir/x.bin"), "x", 1); },
                      {path("no/such/dir/x.bin")});
  // The final name is a directory: the rename fails, the temporary must be removed.
  ASSERT_EQ(::mkdir(path("target").c_str(), 0777), 0);
  expect_error<Error>([&] { write_file_atomic(path("target"), "x", 1); }, {path("target")});
  EXPECT_EQ(listing(), std::vector<std::string>{"target"});
}

TEST_F(IoTest, ReadsPlainGzipAndZstd) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data += std::to_string(i) + "\n";
  write_bytes(path("plain"), data);
  write_bytes(path("g"), gzip(data));
  write_bytes(path("z"), zstd(data));
  write_bytes(path("gg"), gzip(data.substr(0, 1000)) + gzip(data.substr(1000)));  // two members
  EXPECT_EQ(read_file_decompressed(path("plain")), data);
  EXPECT_EQ(read_file_decompressed(path("g")), data);
  EXPECT_EQ(read_file_decompressed(path("z")), data);
  EXPECT_EQ(read_file_decompressed(path("gg")), data);
  write_bytes(path("empty"), "");
  EXPECT_EQ(read_file_decompressed(path("empty")), "");
}

TEST_F(IoTest, CorruptOrTruncatedCompressedInputNamesFile) {
  std::string data;
  for (int i = 0; i < 20000; ++i) data += std::to_string(i * 7919 % 10007) + " x\n";
  const std::string gz = gzip(data), zs = zstd(data);
  write_bytes(path("trunc.gz"), gz.substr(0, gz.size() / 2));
  expect_error([&] { read_file_decompressed(path("trunc.gz")); }, {path("trunc.gz"), "truncated"});
  write_bytes(path("trunc.zst"), zs.substr(0, zs.size() / 2));
  expect_error([&] { read_file_decompressed(path("trunc.zst")); }, {path("trunc.zst"), "truncated"});
  std::string bad = gz;
  for (size_t i = 20; i < 60; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  write_bytes(path("bad.gz"), bad);
  expect_error([&] { read_file_decompressed(path("bad.gz")); }, {path("bad.gz"), "gzip"});
  std::string badz = zs;
  for (size_t i = 8; i < badz.size(); i += 7) badz[i] = static_cast<char>(badz[i] ^ 0x5a);
  write_bytes(path("bad.zst"), badz);
  expect_error([&] { read_file_decompressed(path("bad.zst")); }, {path("bad.zst"), "zstd"});
}

TEST_F(IoTest, NonexistentFileNamesPath) {
  expect_error([&] { read_file_decompressed(path("missing.mtx")); }, {path("missing.mtx"), "No such file"});
  expect_error([&] { read_graph(path("missing.mtx")); }, {path("missing.mtx")});
  expect_error([&] { read_graph(path("missing.spg")); }, {path("missing.spg")});
  expect_error([&] { read_npy(path("missing.npy")); }, {path("missing.npy")});
  expect_error([&] { read_graph(path("missing.txt")); }, {path("missing.txt")});
}

// ---- round trips ------------------------------------------------------------------------------------

struct RoundTripCase {
  const char* ext;
  bool values;
  IndexWidth width;
};

class RoundTrip : public IoTest, public ::testing::WithParamInterface<RoundTripCase> {};

TEST_P(RoundTrip, AllGraphKinds) {
  const RoundTripCase c = GetParam();
  for (test::GraphKind kind : test::all_graph_kinds()) {
    SCOPED_TRACE(test::kind_name(kind));
    const uint64_t seed = test::seed_for(static_cast<uint64_t>(kind) * 31 + 7);
    Graph g = test::random_graph(kind, 300, seed, c.values);
    if (c.width != IndexWidth::automatic) {
      BuildOptions opt;
      opt.index_width = c.width;
      opt.duplicates = DuplicatePolicy::keep;
      g = canonicalize(g, opt);
    }
    const std::string p = path(std::string("g") + c.ext);
    write_graph(g, p);
    ReadOptions ro;
    ro.build.index_width = c.width;
    const Graph back = read_graph(p, ro);
    // .npy edge_index carries no values and n = max id + 1.
    if (std::string(c.ext) == ".npy") {
      EXPECT_EQ(as_i64(back.row), as_i64(g.row));
      EXPECT_EQ(as_i64(back.col), as_i64(g.col));
      EXPECT_FALSE(back.has_values());
    } else {
      expect_same_graph(back, g, c.width != IndexWidth::automatic || std::string(c.ext) == ".spg");
    }
  }
  EXPECT_EQ(listing().size(), 1u);  // no temporaries left
}

INSTANTIATE_TEST_SUITE_P(
    Formats, RoundTrip,
    ::testing::Values(RoundTripCase{".mtx", true, IndexWidth::automatic},
                      RoundTripCase{".mtx", false, IndexWidth::automatic},
                      RoundTripCase{".mtx", true, IndexWidth::i64},
                      RoundTripCase{".txt", true, IndexWidth::automatic},
                      RoundTripCase{".el", false, IndexWidth::automatic},
                      RoundTripCase{".edges", true, IndexWidth::i64},
                      RoundTripCase{".spg", true, IndexWidth::automatic},
                      RoundTripCase{".spg", false, IndexWidth::automatic},
                      RoundTripCase{".spg", true, IndexWidth::i64},
                      RoundTripCase{".spg", false, IndexWidth::i32},
                      RoundTripCase{".npy", false, IndexWidth::automatic}),
    [](const ::testing::TestParamInfo<RoundTripCase>& p) {
      std::string name = std::string(p.param.ext + 1) + (p.param.values ? "_values" : "_pattern");
      if (p.param.width == IndexWidth::i32) name += "_i32";
      if (p.param.width == IndexWidth::i64) name += "_i64";
      return name;
    });

TEST_F(IoTest, EmptyGraphsRoundTrip) {
  for (int64_t n : {0, 5}) {
    const Graph g = graph_from_edges(n, n, {}, {});
    for (const char* ext : {".mtx", ".txt", ".spg"}) {
      SCOPED_TRACE(std::string(ext) + " n=" + std::to_string(n));
      const std::string p = path(std::string("e") + ext);
      write_graph(g, p);
      const Graph back = read_graph(p);
      if (std::string(ext) == ".txt") {
        EXPECT_EQ(back.n_rows, n);  // spgnn's own header keeps n even without edges
      }
      expect_same_graph(back, g, false);
    }
  }
}

TEST_F(IoTest, RectangularGraphRoundTrip) {
  const Graph g = graph_from_edges(3, 7, {0, 2, 2}, {6, 0, 5}, {1.f, 2.f, 3.f});
  for (const char* ext : {".mtx", ".txt", ".spg"}) {
    SCOPED_TRACE(ext);
    const std::string p = path(std::string("r") + ext);
    write_graph(g, p);
    expect_same_graph(read_graph(p), g);
  }
}

TEST_F(IoTest, CompressedInputsByMagic) {
  const Graph g = small_graph(true);
  for (const char* ext : {".mtx", ".txt", ".spg"}) {
    SCOPED_TRACE(ext);
    const std::string p = path(std::string("c") + ext);
    write_graph(g, p);
    const std::string raw = read_bytes(p);
    write_bytes(p + ".gz", gzip(raw));
    write_bytes(p + ".zst", zstd(raw));
    expect_same_graph(read_graph(p + ".gz"), g);
    expect_same_graph(read_graph(p + ".zst"), g);
    // By magic, not by name: a compressed file without the suffix still reads.
    write_bytes(p, zstd(raw));
    expect_same_graph(read_graph(p), g);
  }
  Tensor t = Tensor::from_vector<float>({1.f, 2.f, 3.f});
  write_npy(t, path("a.npy"));
  write_bytes(path("a.npy.gz"), gzip(read_bytes(path("a.npy"))));
  EXPECT_EQ(read_npy(path("a.npy.gz")).to_vector<float>(), t.to_vector<float>());
}

TEST_F(IoTest, WriterOutputFormats) {
  const Graph g = small_graph(true);
  write_mtx(g, path("a.mtx"));
  const std::string m = read_bytes(path("a.mtx"));
  EXPECT_EQ(m.rfind("%%MatrixMarket matrix coordinate real general\n", 0), 0u) << m;
  EXPECT_NE(m.find("\n4 4 5\n1 2 0.5\n"), std::string::npos) << m;
  write_mtx(small_graph(false), path("p.mtx"));
  EXPECT_EQ(read_bytes(path("p.mtx")).rfind("%%MatrixMarket matrix coordinate pattern general\n", 0), 0u);
  write_snap(g, path("a.txt"));
  const std::string s = read_bytes(path("a.txt"));
  EXPECT_EQ(s.rfind("# spgnn edge list", 0), 0u) << s;
  EXPECT_NE(s.find("\n0 1 0.5\n"), std::string::npos) << s;
}

// ---- Matrix Market ------------------------------------------------------------------------------------

TEST_F(IoTest, MtxSymmetricExpandsOffDiagonal) {
  write_bytes(path("s.mtx"), mtx("real symmetric", "3 3 3", "2 1 5.0\n3 3 7\n3 1 -1\n"));
  const Graph g = read_mtx(path("s.mtx"));
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 0, 1, 2, 2}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{1, 2, 0, 0, 2}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{5.f, -1.f, 5.f, -1.f, 7.f}));
  write_bytes(path("ns.mtx"), mtx("pattern symmetric", "3 4 1", "2 1\n"));
  expect_error([&] { read_mtx(path("ns.mtx")); }, {path("ns.mtx") + ":2:", "square"});
}

TEST_F(IoTest, MtxToleratesCommentsCaseWhitespaceAndCrlf) {
  write_bytes(path("a.mtx"),
              "%%matrixmarket MATRIX Coordinate Integer GENERAL\r\n% a comment\r\n\r\n%another\n"
              "  2\t3  2 \r\n1\t3  -4\r\n\n% mid comment\n 2 1 +6  \r\n");
  const Graph g = read_mtx(path("a.mtx"));
  EXPECT_EQ(g.n_rows, 2);
  EXPECT_EQ(g.n_cols, 3);
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{-4.f, 6.f}));
  write_bytes(path("b.mtx"), mtx("real general", "2 2 1", "2 2 1.5e-3"));  // no final newline
  EXPECT_EQ(as_f32(read_mtx(path("b.mtx")).val), (std::vector<float>{1.5e-3f}));
}

TEST_F(IoTest, MtxKeepValuesFalseAndBuildOptions) {
  write_bytes(path("a.mtx"), mtx("real general", "3 3 3", "1 2 1\n1 2 2\n3 1 4\n"));
  ReadOptions ro;
  ro.keep_values = false;
  ro.build.duplicates = DuplicatePolicy::drop;
  const Graph g = read_mtx(path("a.mtx"), ro);
  EXPECT_FALSE(g.has_values());
  EXPECT_EQ(g.nnz(), 2);
  ReadOptions sum;
  const Graph s = read_mtx(path("a.mtx"), sum);
  EXPECT_EQ(as_f32(s.val), (std::vector<float>{3.f, 4.f}));
}

TEST_F(IoTest, MtxBannerErrorsNameWhatIsUnsupported) {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"1 1 1\n1 1 1\n", "banner"},
      {"", "banner"},
      {"%MatrixMarket matrix coordinate real general\n1 1 0\n", "banner"},
      {"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "'array'"},
      {"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "'complex'"},
      {"%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n", "'hermitian'"},
      {"%%MatrixMarket matrix coordinate real skew-symmetric\n1 1 0\n", "'skew-symmetric'"},
      {"%%MatrixMarket matrix coordinate real\n1 1 0\n", "incomplete banner"},
      {"%%MatrixMarket vector coordinate real general\n1 1 0\n", "'vector'"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = path("b" + std::to_string(i) + ".mtx");
    write_bytes(p, cases[i].text);
    expect_error([&] { read_mtx(p); }, {p + ":1:", cases[i].expect});
  }
}

TEST_F(IoTest, MtxEntryErrorsNameFileAndLine) {
  struct Case {
    std::string text;
    int line;
    std::string expect;
  };
  const std::string rg = "%%MatrixMarket matrix coordinate real general\n";
  const std::vector<Case> cases = {
      {rg + "3 3 2\n1 1 1\n0 2 1\n", 4, "1-based"},
      {rg + "3 3 2\n1 1 1\n2 0 1\n", 4, "1-based"},
      {rg + "%c\n3 3 2\n1 1 1\n4 2 1\n", 5, "exceeds the 3 rows"},
      {rg + "3 3 2\n1 1 1\n2 4 1\n", 4, "exceeds the 3 columns"},
      {rg + "3 3 2\n1 1 1\n-1 2 1\n", 4, "negative row index"},
      {rg + "3 3 2\n1 -2 1\n1 2 1\n", 3, "negative column index"},
      {rg + "3 3 2\n1 1 1\nabc 2 1\n", 4, "found 'abc'"},
      {rg + "3 3 2\n1 1 1\n2 2 x1\n", 4, "found 'x1'"},
      {rg + "3 3 2\n1 1 1\n2 2\n", 4, "missing value"},
      {rg + "3 3 2\n1 1 1\n2 2 1 9\n", 4, "extra token '9'"},
      {rg + "3 3 2\n1 1 1\n2 2 nan\n", 4, "not finite"},
      {rg + "3 3 2\n1 1 1\n2 2 -inf\n", 4, "not finite"},
      {rg + "3 3 2\n1 1 1\n2 2 1e300\n", 4, "overflows float32"},
      {rg + "3 3 3\n1 1 1\n2 2 1\n% padding comment\n", 5, "ends after 2 entries"},
      {rg + "3 3 1\n1 1 1\n% c\n2 2 1\n3 3 1\n", 5, "more entries than the 1 declared on line 2"},
      {rg + "3 -3 1\n1 1 1\n", 2, "negative column count"},
      {rg + "3 3\n1 1 1\n", 2, "missing the entry count"},
      {rg + "3 3 1 7\n1 1 1\n", 2, "unexpected token '7'"},
      {rg + "% only comments\n", 2, "size line"},
      {"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1 1\n", 3, "extra token"},
      {"%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1.5\n", 3, "integer"},
      {rg + "3 3 1\n99999999999999999999999 1 1\n", 3, "64 bits"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].text);
    const std::string p = path("e" + std::to_string(i) + ".mtx");
    write_bytes(p, cases[i].text);
    expect_error([&] { read_mtx(p); }, {p + ":" + std::to_string(cases[i].line) + ":", cases[i].expect});
  }
}

TEST_F(IoTest, MtxNonFiniteAcceptedWhenAllowed) {
  write_bytes(path("n.mtx"), mtx("real general", "2 2 2", "1 1 NaN\n2 2 inf\n"));
  ReadOptions ro;
  ro.allow_nonfinite = true;
  const auto v = as_f32(read_mtx(path("n.mtx"), ro).val);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isinf(v[1]));
}

TEST_F(IoTest, MtxImpossibleSizesRefusedBeforeAllocating) {
  // More entries than the bytes could hold.
  write_bytes(path("big.mtx"), mtx("real general", "10 10 100000000000", "1 1 1\n"));
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { read_mtx(path("big.mtx")); }, {path("big.mtx") + ":2:", "100000000000 entries", "bytes"});
  // Arrays larger than physical memory (8 PB of rowptr).
  write_bytes(path("huge.mtx"), mtx("pattern general", "1000000000000000 1000000000000000 0", ""));
  expect_error([&] { read_mtx(path("huge.mtx")); }, {path("huge.mtx") + ":2:", "memory"});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 1.0);
}

// Errors far into a file parsed by several threads in several chunks keep exact line numbers.
TEST_F(IoTest, MtxLineNumbersExactAcrossChunks) {
  const int n = 300000;
  std::string body;
  body.reserve(static_cast<size_t>(n) * 16);
  for (int i = 0; i < n; ++i) {
    if (i % 1000 == 0) body += "% comment\n";
    body += std::to_string(i % 997 + 1) + " " + std::to_string(i % 991 + 1) + " 0.25\n";
  }
  const std::string good = mtx("real general", "1000 1000 " + std::to_string(n), body);
  write_bytes(path("good.mtx"), good);
  std::vector<double> fractions;
  ReadOptions ro;
  ro.progress = [&](double f) { fractions.push_back(f); };
  ro.build.duplicates = DuplicatePolicy::keep;
  const Graph g = read_mtx(path("good.mtx"), ro);
  EXPECT_EQ(g.nnz(), n);
  ASSERT_FALSE(fractions.empty());
  EXPECT_TRUE(std::is_sorted(fractions.begin(), fractions.end()));
  EXPECT_DOUBLE_EQ(fractions.back(), 1.0);

  // Replace the value on data line k (counting from 0) by "bad".
  const int k = 250123;
  const int line = 2 + (k / 1000 + 1) + k + 1;  // banner, size line, comments so far, entries
  size_t pos = 0;
  for (int l = 1; l < line; ++l) pos = good.find('\n', pos) + 1;
  const size_t val = good.find("0.25", pos);
  std::string bad = good;
  bad.replace(val, 4, "bad!");
  write_bytes(path("bad.mtx"), bad);
  expect_error([&] { read_mtx(path("bad.mtx")); }, {path("bad.mtx") + ":" + std::to_string(line) + ":", "'bad!'"});
  // One entry more than declared: the first surplus entry's line.
  write_bytes(path("more.mtx"), mtx("real general", "1000 1000 " + std::to_string(n - 1), body));
  expect_error([&] { read_mtx(path("more.mtx")); },
               {path("more.mtx") + ":" + std::to_string(2 + (n - 1) / 1000 + 1 + n) + ":", "more entries"});
}

// ---- SNAP --------------------------------------------------------------------------------------------

TEST_F(IoTest, SnapRemapsSparseIdsInOrderOfFirstAppearance) {
  write_bytes(path("s.txt"), "# Directed graph\n% another comment\n100 5\n\n5\t7000000000000\n"
                             "  100 7000000000000  \n-3 100\n");
  const SnapGraph s = read_snap(path("s.txt"));
  EXPECT_EQ(s.ids, (std::vector<int64_t>{100, 5, 7000000000000, -3}));
  EXPECT_EQ(s.graph.n_rows, 4);
  EXPECT_FALSE(s.graph.has_values());
  // (0,1) (1,2) (0,2) (3,0), sorted by row.
  EXPECT_EQ(as_i64(s.graph.row), (std::vector<int64_t>{0, 0, 1, 3}));
  EXPECT_EQ(as_i64(s.graph.col), (std::vector<int64_t>{1, 2, 2, 0}));
  // read_graph with an unknown extension is SNAP too.
  EXPECT_EQ(read_graph(path("s.txt")).nnz(), 4);
}

TEST_F(IoTest, SnapHashRemapMatchesReference) {
  std::mt19937_64 rng(test::seed_for(99));
  std::string text = "# random 64-bit ids\n";
  std::vector<int64_t> raw;
  for (int i = 0; i < 20000; ++i) {
    const int64_t a = static_cast<int64_t>(rng() >> 1) % 5000 * 1000000007LL;
    const int64_t b = static_cast<int64_t>(rng() >> 1);
    raw.push_back(a);
    raw.push_back(b);
    text += std::to_string(a) + " " + std::to_string(b) + " " + std::to_string(i % 7) + ".5\n";
  }
  write_bytes(path("h.txt"), text);
  ReadOptions ro;
  ro.build.duplicates = DuplicatePolicy::keep;
  const SnapGraph s = read_snap(path("h.txt"), ro);
  std::unordered_map<int64_t, int64_t> ref;
  std::vector<int64_t> ids;
  for (int64_t id : raw)
    if (ref.emplace(id, static_cast<int64_t>(ids.size())).second) ids.push_back(id);
  EXPECT_EQ(s.ids, ids);
  EXPECT_EQ(s.graph.nnz(), 20000);
  EXPECT_TRUE(s.graph.has_values());
}

TEST_F(IoTest, SnapErrorsNameFileAndLine) {
  struct Case {
    std::string text;
    int line;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"# c\n1 2\n3 4 1.5\n", 3, "third column"},
      {"# c\n1 2 1\n3 4\n", 3, "missing value"},
      {"1 2\nx 4\n", 2, "found 'x'"},
      {"1 2\n3 y\n", 2, "found 'y'"},
      {"1\n", 1, "1 column"},
      {"1 2 3 4\n", 1, "4 columns"},
      {"1 2 1\n3 4 1 5\n", 2, "extra token"},
      {"1 2 1\n3 4 nan\n", 2, "not finite"},
      {"1 2\n3 99999999999999999999\n", 2, "64 bits"},
      {"# spgnn edge list: n_rows=3 n_cols=3 nnz=1 values=0\n0 3\n", 2, "outside"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].text);
    const std::string p = path("e" + std::to_string(i) + ".txt");
    write_bytes(p, cases[i].text);
    expect_error([&] { read_snap(p); }, {p + ":" + std::to_string(cases[i].line) + ":", cases[i].expect});
  }
  write_bytes(path("n.txt"), "1 2 inf\n");
  ReadOptions ro;
  ro.allow_nonfinite = true;
  EXPECT_TRUE(std::isinf(as_f32(read_snap(path("n.txt"), ro).graph.val)[0]));
}

// ---- NumPy ----------------------------------------------------------------------------------------

template <class T>
void npy_round_trip(const std::string& p, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<T> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>((i * 37 + 11) % 251);
  const Tensor t = Tensor::from_vector(v, shape.empty() ? std::vector<int64_t>{n} : shape).reshape(shape);
  write_npy(t, p);
  const std::string bytes = read_bytes(p);
  const size_t hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(bytes[10 + hlen - 1], '\n');
  const Tensor back = read_npy(p);
  EXPECT_EQ(back.dtype(), t.dtype());
  EXPECT_EQ(back.shape(), shape);
  EXPECT_EQ(back.to_vector<T>(), v);
}

TEST_F(IoTest, NpyRoundTripAllDtypesAndShapes) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{}, {7}, {0}, {3, 5}, {2, 3, 4}, {4, 0}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    npy_round_trip<float>(path("f4.npy"), shape);
    npy_round_trip<double>(path("f8.npy"), shape);
    npy_round_trip<int32_t>(path("i4.npy"), shape);
    npy_round_trip<int64_t>(path("i8.npy"), shape);
    npy_round_trip<uint8_t>(path("u1.npy"), shape);
    npy_round_trip<uint16_t>(path("u2.npy"), shape);
  }
}

TEST_F(IoTest, NpyHeaderVariants) {
  const std::string data{"\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00", 12};
  const std::vector<std::string> dicts = {
      "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }",
      "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"=i4\"}",
      "{'descr':'<i4','fortran_order':True,'shape':(3L,)}",  // 1-D: Fortran order is C order
      "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 3), }",
  };
  for (int major : {1, 2, 3}) {
    for (size_t i = 0; i < dicts.size(); ++i) {
      const std::string p = path("v" + std::to_string(major) + "_" + std::to_string(i) + ".npy");
      write_bytes(p, make_npy(major, dicts[i], data));
      const Tensor t = read_npy(p);
      EXPECT_EQ(t.dtype(), DType::i32);
      EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3})) << p;
    }
  }
  write_bytes(path("u1.npy"), make_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,)}", "ab"));
  EXPECT_EQ(read_npy(path("u1.npy")).to_vector<uint8_t>(), (std::vector<uint8_t>{'a', 'b'}));
}

TEST_F(IoTest, NpyErrorsNameFileAndProblem) {
  struct Case {
    std::string bytes, expect;
  };
  auto hdr = [](const std::string& descr, const std::string& extra = "False", const std::string& shape = "(2, 2)") {
    return "{'descr': '" + descr + "', 'fortran_order': " + extra + ", 'shape': " + shape + ", }";
  };
  const std::string d16(16, '\0');
  const std::vector<Case> cases = {
      {make_npy(1, hdr("<f4", "True"), d16), "Fortran order not supported, save with np.ascontiguousarray"},
      {make_npy(1, hdr("|b1"), d16), "bool"},
      {make_npy(1, hdr("|i1"), d16), "int8"},
      {make_npy(1, hdr("<u4"), d16), "uint32"},
      {make_npy(1, hdr("<u8"), d16), "uint64"},
      {make_npy(1, hdr("<i2"), d16), "int16"},
      {make_npy(1, hdr("|O"), d16), "object"},
      {make_npy(1, hdr("<c8"), d16), "complex64"},
      {make_npy(1, hdr(">f4"), d16), "big-endian dtype '>f4'"},
      {make_npy(1, hdr("|f4"), d16), "'|f4'"},
      {make_npy(1, hdr("<U5"), d16), "'<U5'"},
      {make_npy(1, hdr("<f4"), d16.substr(0, 10)), "needs 16 data bytes, but only 10"},
      {make_npy(1, hdr("<f8", "False", "(4611686018427387904, 4)"), d16), "overflows"},
      {make_npy(1, hdr("<f4", "False", "(-1, 2)"), d16), "non-negative"},
      {make_npy(1, "{'descr': '<f4', 'shape': (2,)}", d16), "fortran_order"},
      {make_npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", d16), "structured"},
      {make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", d16), "malformed"},
      {make_npy(4, hdr("<f4"), d16), "version 4.0"},
      {std::string("PK\x03\x04 not numpy at all"), "magic"},
      {std::string("\x93NUMPY\x01\x00\xff\x7f{'descr'", 18), "truncated"},
      {std::string("\x93NUM"), "truncated"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].expect);
    const std::string p = path("bad" + std::to_string(i) + ".npy");
    write_bytes(p, cases[i].bytes);
    expect_error([&] { read_npy(p); }, {p, cases[i].expect});
  }
}

// ---- .spg ----------------------------------------------------------------------------------------

TEST_F(IoTest, SpgRowArrayIsRebuilt) {
  const Graph g = small_graph(true);
  write_spg(g, path("a.spg"));
  // Header + rowptr + col + val, no row[]: (128) + 64 (5 x i32 rowptr) + 64 (col) + 20 (val).
  EXPECT_EQ(read_bytes(path("a.spg")).size(), 128u + 64u + 64u + 20u);
  expect_same_graph(read_spg(path("a.spg")), g);
}

TEST_F(IoTest, SpgCorruptionIsDetected) {
  const Graph g = test::random_graph(test::GraphKind::uniform, 500, test::seed_for(5), true);
  write_spg(g, path("g.spg"));
  const std::string good = read_bytes(path("g.spg"));

  std::string bad = good;
  bad[0] = 'X';
  write_bytes(path("magic.spg"), bad);
  expect_error([&] { read_spg(path("magic.spg")); }, {path("magic.spg"), "bad magic", "SPGNNGRF"});

  bad = good;
  bad[8] = 2;  // version u32 at offset 8
  write_bytes(path("version.spg"), bad);
  expect_error([&] { read_spg(path("version.spg")); }, {path("version.spg"), "version 2", "version 1"});

  bad = good;
  bad[40] = static_cast<char>(bad[40] ^ 1);  // inside nnz
  write_bytes(path("header.spg"), bad);
  expect_error([&] { read_spg(path("header.spg")); }, {path("header.spg"), "header checksum"});

  for (size_t pos : {size_t{128} + 3, good.size() / 2, good.size() - 1}) {
    bad = good;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    write_bytes(path("payload.spg"), bad);
    expect_error([&] { read_spg(path("payload.spg")); }, {path("payload.spg"), "checksum"});
  }

  write_bytes(path("trunc.spg"), good.substr(0, good.size() - 100));
  expect_error([&] { read_spg(path("trunc.spg")); }, {path("trunc.spg"), "truncated", std::to_string(good.size())});
  write_bytes(path("short.spg"), good.substr(0, 50));
  expect_error([&] { read_spg(path("short.spg")); }, {path("short.spg"), "truncated"});
  write_bytes(path("long.spg"), good + "xx");
  expect_error([&] { read_spg(path("long.spg")); }, {path("long.spg"), "trailing"});
  write_bytes(path("text.spg"), "%%MatrixMarket matrix coordinate real general\n");
  expect_error([&] { read_graph(path("text.spg")); }, {path("text.spg")});
}

TEST_F(IoTest, SpgReadOptionsApplied) {
  const Graph g = small_graph(true);
  write_spg(g, path("a.spg"));
  ReadOptions ro;
  ro.keep_values = false;
  ro.build.index_width = IndexWidth::i64;
  const Graph back = read_graph(path("a.spg"), ro);
  EXPECT_FALSE(back.has_values());
  EXPECT_EQ(back.index_dtype(), DType::i64);
  EXPECT_EQ(as_i64(back.col), as_i64(g.col));
}

// ---- read_graph / write_graph / datasets ----------------------------------------------------------

TEST_F(IoTest, FormatNames) {
  for (GraphFormat f : {GraphFormat::automatic, GraphFormat::mtx, GraphFormat::snap, GraphFormat::spg,
                        GraphFormat::npy}) {
    EXPECT_EQ(parse_graph_format(graph_format_name(f)), f);
  }
  expect_error<InvalidArgument>([] { parse_graph_format("csv"); }, {"'csv'", "mtx"});
  expect_error<InvalidArgument>([&] { write_graph(small_graph(false), path("x.weird")); }, {"x.weird"});
}

TEST_F(IoTest, ExplicitFormatOverridesExtension) {
  const Graph g = small_graph(true);
  write_graph(g, path("graph.bin"), GraphFormat::mtx);
  expect_same_graph(read_graph(path("graph.bin"), {}, GraphFormat::mtx), g);
}

TEST_F(IoTest, EdgeIndexNpyAndDatasetDirectories) {
  // PyG's order: row 0 = source (Graph.col), row 1 = target (Graph.row); int32 accepted too.
  // Edges 2 -> 1, 0 -> 2, 1 -> 0.
  write_npy(Tensor::from_vector<int32_t>({2, 0, 1, 1, 2, 0}, {2, 3}), path("ei.npy"));
  const Graph g = read_graph(path("ei.npy"));
  EXPECT_EQ(g.n_rows, 3);
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{1, 2, 0}));
  // The other order, asked for explicitly.
  ReadOptions dst_first;
  dst_first.edge_index_rows = EdgeIndexRows::dst_src;
  const Graph t = read_graph(path("ei.npy"), dst_first);
  EXPECT_EQ(as_i64(t.row), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(as_i64(t.col), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(parse_edge_index_rows("src,dst"), EdgeIndexRows::src_dst);
  expect_error<InvalidArgument>([&] { parse_edge_index_rows("sources"); },
                                {"sources", "src,dst", "dst,src"});
  // write -> read is the identity, and the file is in PyG's order.
  write_graph(g, path("back.npy"));
  expect_same_graph(read_graph(path("back.npy")), g, false);
  EXPECT_EQ(read_npy(path("back.npy")).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 0, 0, 1, 2}));
  write_npy(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), path("f.npy"));
  expect_error([&] { read_graph(path("f.npy")); }, {path("f.npy"), "int32 or int64", "[2, E]"});
  write_npy(Tensor::from_vector<int64_t>({0, -1}, {2, 1}), path("neg.npy"));
  expect_error([&] { read_graph(path("neg.npy")); }, {path("neg.npy"), "negative"});

  // Directory without edge_index.npy.
  ASSERT_EQ(::mkdir(path("empty").c_str(), 0777), 0);
  expect_error([&] { read_graph(path("empty")); }, {path("empty"), "edge_index.npy"});
  expect_error([&] { read_dataset_dir(path("empty")); }, {path("empty"), "edge_index.npy"});

  // A dataset with isolated vertices: n comes from x/y, not from the largest edge id.
  Dataset d;
  d.graph = graph_from_edges(6, 6, {0, 1, 3}, {1, 0, 1});
  d.x = test::random_tensor({6, 3}, test::seed_for(3));
  d.y = Tensor::from_vector<int64_t>({0, 1, 2, -1, 1, 0});
  d.train_idx = Tensor::from_vector<int64_t>({0, 1});
  d.val_idx = Tensor::from_vector<int64_t>({2});
  d.test_idx = Tensor::from_vector<int64_t>({4, 5});
  write_dataset_dir(d, path("ds/nested"));
  const Graph dg = read_graph(path("ds/nested"));
  EXPECT_EQ(dg.n_rows, 6);
  expect_same_graph(dg, d.graph, false);
  const Dataset back = read_dataset_dir(path("ds/nested/"));
  EXPECT_EQ(back.name, "nested");
  EXPECT_EQ(back.num_classes, 3);
  EXPECT_EQ(back.x.to_vector<float>(), d.x.to_vector<float>());
  EXPECT_EQ(back.y.to_vector<int64_t>(), d.y.to_vector<int64_t>());
  EXPECT_EQ(back.test_idx.to_vector<int64_t>(), d.test_idx.to_vector<int64_t>());
  // The directory says which order its edge_index is in; an explicit option wins over it.
  const std::string meta = path("ds/nested/spgnn.json");
  EXPECT_NE(read_file_decompressed(meta).find("\"src\""), std::string::npos);
  const std::string flipped = "{\"edge_index_rows\": [\"dst\", \"src\"]}";
  write_file_atomic(meta, flipped.data(), flipped.size());
  const Graph rev = read_graph(path("ds/nested"));
  expect_same_graph(rev, transpose(d.graph).graph, false);
  ReadOptions src_first;
  src_first.edge_index_rows = EdgeIndexRows::src_dst;
  expect_same_graph(read_graph(path("ds/nested"), src_first), d.graph, false);
  for (const std::string bad : {"{not json", "[1, 2]", "{\"edge_index_rows\": [\"a\", \"b\"]}"}) {
    write_file_atomic(meta, bad.data(), bad.size());
    expect_error([&] { read_dataset_dir(path("ds/nested")); }, {"spgnn.json"});
  }
  ::remove(meta.c_str());  // without spgnn.json: PyG's order
  expect_same_graph(read_graph(path("ds/nested")), d.graph, false);
  // A split index out of range names the file.
  write_npy(Tensor::from_vector<int64_t>({7}), path("ds/nested/val_idx.npy"));
  expect_error([&] { read_dataset_dir(path("ds/nested")); }, {"val_idx.npy", "outside [0, 6)"});
}

// ---- mutation fuzzing --------------------------------------------------------------------------
// Every reader, fed a few hundred deterministic mutations of a valid file, must return a graph or
// throw spgnn's Error naming the file: never crash, hang, throw anything else, or allocate what a
// lying size asks for. The mutations only write sizes that are tiny or impossibly large (>= 2^40
// vertices), so nothing they produce can make this test allocate much on any machine.

constexpr uint64_t kFuzzSeed = 20261126;

// Portable draws (std's distributions differ between standard libraries; rng() % n does not), so
// every platform runs the same mutations.
class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }
  template <class T>
  T pick(std::initializer_list<T> v) {
    return *(v.begin() + below(v.size()));
  }

  // One byte-level edit within the first `span` bytes (truncation and appending anywhere).
  // Inserted bytes are never digits, so numbers in text can only shrink, merge or break.
  std::string bytes(std::string s, std::string& what, size_t span = SIZE_MAX) {
    static const std::string kInsert("\0\xff \t\n\rx-.#%(),'}e", 17);
    const size_t n = std::min(s.size(), span);
    const char c = kInsert[below(kInsert.size())];
    switch (below(6)) {
      case 0: {
        const size_t k = below(s.size() + 1);
        what += " truncate@" + std::to_string(k);
        s.resize(k);
        break;
      }
      case 1:
        if (n > 0) {
          const size_t k = below(n), len = 1 + below(8);
          what += " erase@" + std::to_string(k) + "+" + std::to_string(len);
          s.erase(k, len);
        }
        break;
      case 2: {
        const size_t k = below(n + 1);
        what += " insert@" + std::to_string(k);
        s.insert(k, 1 + below(3), c);
        break;
      }
      case 3:
        if (n > 0) {
          const size_t k = below(n);
          what += " set@" + std::to_string(k);
          s[k] = c;
        }
        break;
      case 4:
        if (n > 0) {
          const size_t k = below(n);
          what += " flip@" + std::to_string(k);
          s[k] = static_cast<char>(s[k] ^ (1 << below(8)));
        }
        break;
      default: {
        const size_t k = below(s.size() + 1);
        what += " append-tail@" + std::to_string(k);
        s += s.substr(k);
        break;
      }
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

// Replaces one number of a text file by a hostile one: malformed, out of range, or >= 2^40.
std::string mutate_text(Mutator& m, const std::string& text, std::string& what) {
  if (m.chance(40)) return m.bytes(text, what);
  std::vector<std::pair<size_t, size_t>> numbers;
  for (size_t i = 0; i < text.size();) {
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) ||
                                 text[j] == '.' || text[j] == '-' || text[j] == '+'))
        ++j;
      numbers.push_back({i, j - i});
      i = j;
    } else {
      ++i;
    }
  }
  if (numbers.empty()) return m.bytes(text, what);
  const auto [at, len] = numbers[m.below(numbers.size())];
  const std::string rep = m.pick<const char*>(
      {"0", "-1", "+-1", "1.5", "-0", "abc", "0x10", "1e400", "1e-400", "nan", "-inf", "1e39",
       "1099511627776", "4611686018427387904", "9223372036854775807", "9223372036854775808",
       "99999999999999999999", "1 2", "#"});
  what += " number@" + std::to_string(at) + "='" + rep + "'";
  return text.substr(0, at) + rep + text.substr(at + len);
}

// A .npy file built from parts, so that its header can be rewritten.
struct NpyParts {
  std::string descr, shape, data;
  int itemsize;
};

std::string mutate_npy(Mutator& m, const NpyParts& p, std::string& what) {
  std::string descr = p.descr, fortran = "False", shape = p.shape, data = p.data;
  int major = 1, minor = 0, hlen_delta = 0;
  bool nest = false;
  const int items = static_cast<int>(data.size()) / p.itemsize;
  const int e = items / 2;
  for (uint64_t op = 0, ops = 1 + m.below(2); op < ops; ++op) {
    switch (m.below(8)) {
      case 0:
        descr = m.pick<const char*>({"<i8", "<i4", "<f4", "<f8", "|u1", ">i8", "<u8", "i8",
                                     "<i2", "|b1", "O", "", "<U3"});
        break;
      case 1:
        fortran = m.pick<const char*>({"True", "1", "None", "'False'"});
        break;
      case 2: {
        const std::string E = std::to_string(e);
        shape = m.pick<std::string>(
            {"(2, " + std::to_string(e - 1) + ")", "(2, " + std::to_string(e + 1) + ")",
             "(" + E + ", 2)", "(" + std::to_string(items) + ",)", "()", "(2, 0)", "(0,)",
             "(-1, " + E + ")", "(4611686018427387904, 4)", "(2, 1152921504606846976)",
             "[2, " + E + "]", "(2, " + E + ", 1)", "((2, " + E + "),)", "(2, 'x')",
             "(1099511627776, 0)", "(0, 1099511627776)"});
        break;
      }
      case 3:
        major = m.pick({0, 1, 2, 3, 4});
        minor = m.chance(30) ? 1 : 0;
        break;
      case 4:
        hlen_delta = m.pick({-1, 1, -16, 64});
        break;
      case 5:
        nest = m.chance(50);
        break;
      case 6:
        if (items > 0) {
          // Vertex ids that are wrong but never ask for a mid-sized allocation.
          const int64_t v = m.pick<int64_t>({-1, 0, 1, 2, 3, 5, INT64_MAX, INT64_MIN,
                                             int64_t{1} << 50, INT32_MIN});
          const size_t k = m.below(static_cast<uint64_t>(items)) * static_cast<size_t>(p.itemsize);
          std::memcpy(&data[k], &v, static_cast<size_t>(p.itemsize));  // low bytes: little-endian
          what += " word@" + std::to_string(k) + "=" + std::to_string(v);
        }
        break;
      default:
        if (m.chance(50)) data.resize(m.below(data.size() + 1));
        else data += std::string(1 + m.below(16), '\0');
        break;
    }
  }
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + fortran +
                     ", 'shape': " + shape + ", }";
  if (nest) {
    dict = "{'descr': '<i8', 'fortran_order': False, 'shape': " + std::string(100000, '(') + "}";
    major = 2;
  }
  what += " npy{v" + std::to_string(major) + "." + std::to_string(minor) + " " +
          (nest ? std::string("nested") : dict) + " data " + std::to_string(data.size()) + "}";
  std::string file = make_npy(major == 1 ? 1 : 2, dict, data);
  file[6] = static_cast<char>(major);
  file[7] = static_cast<char>(minor);
  if (hlen_delta != 0) {
    const uint16_t hl = static_cast<uint16_t>((static_cast<unsigned char>(file[8]) |
                                               (static_cast<unsigned char>(file[9]) << 8)) +
                                              hlen_delta);
    file[8] = static_cast<char>(hl & 0xff);
    file[9] = static_cast<char>(hl >> 8);
    what += " hlen" + std::to_string(hlen_delta);
  }
  if (m.chance(25)) file = m.bytes(file, what, 128);
  return file;
}

NpyParts npy_parts(const std::string& descr, const std::string& shape, const void* data,
                   size_t bytes, int itemsize) {
  return {descr, shape, std::string(static_cast<const char*>(data), bytes), itemsize};
}

// A .spg with a header field overwritten (the header checksum then fails, as it should) or a
// byte edit anywhere.
std::string mutate_spg(Mutator& m, const std::string& good, std::string& what) {
  std::string s = good;
  if (m.chance(50)) {
    const size_t off = m.pick<size_t>({8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 80, 88});
    const uint64_t v = m.pick<uint64_t>({0, 1, 4, 8, 128, uint64_t{1} << 40, UINT64_MAX,
                                         uint64_t{INT64_MAX}, uint64_t{1} << 62});
    std::memcpy(&s[off], &v, off < 24 ? 4 : 8);
    what += " field@" + std::to_string(off) + "=" + std::to_string(v);
  }
  if (s == good || m.chance(50)) s = m.bytes(s, what, m.chance(50) ? 128 : SIZE_MAX);
  return s;
}

// Runs `read` on a mutated input: success, or spgnn's Error naming `name`. Anything else fails
// the test with the mutation that caused it.
template <class Fn>
void expect_read_or_named_error(Fn&& read, const std::string& name, const std::string& what,
                                int& accepted, int& refused) {
  try {
    read();
    ++accepted;
  } catch (const Error& e) {
    ++refused;
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
        << what << ": the error does not name " << name << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << typeid(e).name() << " instead of spgnn::Error: " << e.what();
  }
}

void expect_small(const Graph& g, const std::string& what) {
  EXPECT_LT(g.n_rows, 1 << 20) << what << ": accepted a graph larger than any mutation allows";
}

TEST_F(IoTest, MutatedInputsFailCleanly) {
  constexpr int kPerFormat = 300;
  const Graph g = small_graph(true);
  // Seeds: every format, with and without values, plain and compressed.
  write_mtx(g, path("seed.mtx"));
  write_snap(g, path("seed.txt"));
  write_spg(g, path("seed.spg"));
  write_spg(small_graph(false, IndexWidth::i64), path("seed64.spg"));
  const std::vector<std::string> texts = {
      read_bytes(path("seed.mtx")),
      mtx("integer symmetric", "4 4 4", "1 1 3\n2 1 -1\n4 2 7\n4 4 1\n"),
      mtx("pattern general", "% c\n3 5 3", "1 5\n3 1\n2 2\n"),
      read_bytes(path("seed.txt")),
      "# raw\n10\t20 1.5\n-3 10 2\n99999 10 0.25\n",
      "% pattern\n5 6\n6 7\n7 5\n",
  };
  const std::vector<int64_t> ei64 = {1, 3, 2, 0, 3, 0, 0, 2, 3, 3};  // [2, 5]: src row, dst row
  const std::vector<int32_t> ei32(ei64.begin(), ei64.end());
  const std::vector<NpyParts> npys = {
      npy_parts("<i8", "(2, 5)", ei64.data(), ei64.size() * 8, 8),
      npy_parts("<i4", "(2, 5)", ei32.data(), ei32.size() * 4, 4),
  };
  const std::vector<std::string> spgs = {read_bytes(path("seed.spg")),
                                         read_bytes(path("seed64.spg"))};

  std::map<std::string, std::pair<int, int>> counts;  // format -> (accepted, refused)
  auto check_file = [&](const std::string& fmt, int i, const std::string& bytes,
                        const std::string& what, bool compress) {
    const std::string p = path("m" + std::to_string(i) + "." + fmt + (compress ? ".gz" : ""));
    write_bytes(p, compress ? gzip(bytes) : bytes);
    auto& [acc, ref] = counts[fmt];
    const std::string trace = fmt + " #" + std::to_string(i) + ":" + what;
    if (fmt == "mtx") {
      expect_read_or_named_error([&] { expect_small(read_mtx(p), trace); }, p, trace, acc, ref);
    } else if (fmt == "txt") {
      expect_read_or_named_error([&] { expect_small(read_snap(p).graph, trace); }, p, trace, acc,
                                 ref);
    } else if (fmt == "npy") {
      expect_read_or_named_error([&] { read_npy(p); }, p, trace, acc, ref);
      expect_read_or_named_error([&] { expect_small(read_graph(p), trace); }, p, trace, acc, ref);
    } else {
      expect_read_or_named_error([&] { expect_small(read_spg(p), trace); }, p, trace, acc, ref);
      expect_read_or_named_error([&] { expect_small(read_graph(p), trace); }, p, trace, acc, ref);
    }
    ::unlink(p.c_str());
  };

  uint64_t salt = 0;
  for (const char* fmt : {"mtx", "txt", "npy", "spg"}) {
    Mutator m(kFuzzSeed + 1000 * ++salt);
    for (int i = 0; i < kPerFormat; ++i) {
      std::string what, bytes;
      const std::string f = fmt;
      if (f == "mtx") bytes = mutate_text(m, texts[m.below(3)], what);
      else if (f == "txt") bytes = mutate_text(m, texts[3 + m.below(3)], what);
      else if (f == "npy") bytes = mutate_npy(m, npys[m.below(npys.size())], what);
      else bytes = mutate_spg(m, spgs[m.below(spgs.size())], what);
      SCOPED_TRACE("seed " + std::to_string(kFuzzSeed + 1000 * salt) + ", " + f +
                   " mutation " + std::to_string(i) + ":" + what);
      check_file(f, i, bytes, what, m.chance(15));
    }
  }

  // Dataset directories: one file of a valid directory mutated at a time.
  Dataset d;
  d.graph = graph_from_edges(4, 4, {0, 2, 3, 3, 0}, {1, 0, 0, 3, 3});
  write_dataset_dir(d, path("seed_ds"));
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int64_t> y = {0, 1, -1, 1}, train = {0, 3};
  const std::vector<std::pair<std::string, NpyParts>> files = {
      {"edge_index.npy", npy_parts("<i8", "(2, 5)", ei64.data(), ei64.size() * 8, 8)},
      {"x.npy", npy_parts("<f4", "(4, 2)", x.data(), x.size() * 4, 4)},
      {"y.npy", npy_parts("<i8", "(4,)", y.data(), y.size() * 8, 8)},
      {"train_idx.npy", npy_parts("<i8", "(2,)", train.data(), train.size() * 8, 8)},
  };
  const std::string meta = read_bytes(path("seed_ds/spgnn.json"));
  Mutator m(kFuzzSeed + 1);
  for (int i = 0; i < kPerFormat; ++i) {
    const std::string dir = path("ds" + std::to_string(i));
    ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
    const size_t victim = m.below(files.size() + 1);
    std::string what = " " + (victim < files.size() ? files[victim].first : "spgnn.json") + ":";
    for (size_t k = 0; k < files.size(); ++k) {
      const NpyParts& f = files[k].second;
      write_bytes(dir + "/" + files[k].first,
                  k == victim ? mutate_npy(m, f, what)
                              : make_npy(1, "{'descr': '" + f.descr + "', 'fortran_order': "
                                            "False, 'shape': " + f.shape + ", }", f.data));
    }
    write_bytes(dir + "/spgnn.json", victim == files.size() ? m.bytes(meta, what) : meta);
    SCOPED_TRACE("seed " + std::to_string(kFuzzSeed + 1) + ", dataset mutation " +
                 std::to_string(i) + ":" + what);
    auto& [acc, ref] = counts["dataset"];
    expect_read_or_named_error([&] { expect_small(read_dataset_dir(dir).graph, what); }, dir,
                               what, acc, ref);
    expect_read_or_named_error([&] { expect_small(read_graph(dir), what); }, dir, what, acc, ref);
    remove_tree(dir);
  }

  // Partition meta.json: values of the wrong type or range.
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"format", "\"spgnn-partition\""}, {"version", "1"}, {"parts", "1"},
      {"method", "\"range\""}, {"note", "\"\""}, {"source", "\"g\""}, {"num_nodes", "4"},
      {"num_edges", "5"}, {"edge_cut", "0"}, {"halo_volume", "0"}, {"feature_dim", "2"},
      {"num_classes", "2"}, {"part", "[{\"owned\": 4, \"halo\": 0, \"edges\": 5}]"}};
  const std::string pdir = path("partition");
  ASSERT_EQ(::mkdir(pdir.c_str(), 0777), 0);
  for (int i = 0; i < kPerFormat; ++i) {
    std::string what, text = "{";
    const size_t victim = m.below(fields.size());
    const bool drop = m.chance(20);
    for (size_t k = 0; k < fields.size(); ++k) {
      if (k == victim && drop) continue;
      std::string value = fields[k].second;
      if (k == victim) {
        value = m.pick<const char*>({"5", "-1", "0", "1e300", "\"x\"", "null", "[]", "{}",
                                     "true", "4294967297", "18446744073709551616",
                                     "9223372036854775808", "[1, 2]"});
      }
      text += (k ? ", \"" : "\"") + fields[k].first + "\": " + value;
    }
    text += "}";
    what = " meta.json field " + fields[victim].first + (drop ? " dropped" : " changed");
    if (m.chance(20)) text = m.bytes(text, what);
    write_bytes(pdir + "/meta.json", text);
    SCOPED_TRACE("partition mutation " + std::to_string(i) + ":" + what + ": " + text);
    auto& [acc, ref] = counts["partition meta"];
    expect_read_or_named_error([&] { read_partition_meta(pdir); }, pdir, what, acc, ref);
  }

  for (const auto& [fmt, c] : counts) {
    // Most mutations must be refused, and some accepted: otherwise the mutations or the seeds
    // have stopped exercising the reader.
    EXPECT_GT(c.second, c.first / 2) << fmt;
    std::cerr << "[fuzz] " << fmt << ": " << c.first << " accepted, " << c.second << " refused\n";
  }
}

// ---- one test per bug the mutation campaign found ----------------------------------------------

// Was: the header's literal parser recursed once per '(' and overflowed the stack (SIGSEGV).
TEST_F(IoTest, NpyDeeplyNestedHeaderIsRefused) {
  const std::string p = path("nested.npy");
  write_bytes(p, make_npy(2, "{'descr': '<i8', 'fortran_order': False, 'shape': " +
                                 std::string(500000, '(') + "}", ""));
  expect_error([&] { read_npy(p); }, {p, "nested more than"});
  write_bytes(p, make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': ((((2,),),),)}",
                          std::string(16, '\0')));
  expect_error([&] { read_npy(p); }, {p, "'shape' must hold non-negative integers"});
}

// Was: data after the array was ignored, so a header whose shape or length lied (one byte short,
// a smaller shape) was read as a scrambled array without a word.
TEST_F(IoTest, NpyDataMustMatchTheHeaderExactly) {
  const std::vector<int64_t> v = {0, 1, 2, 1, 2, 0};  // edge_index [2, 3]
  const std::string data(reinterpret_cast<const char*>(v.data()), v.size() * 8);
  auto dict = [](const std::string& shape) {
    return "{'descr': '<i8', 'fortran_order': False, 'shape': " + shape + ", }";
  };
  const std::string good = make_npy(1, dict("(2, 3)"), data);
  write_bytes(path("good.npy"), good);
  EXPECT_EQ(read_graph(path("good.npy")).nnz(), 3);

  write_bytes(path("shape.npy"), make_npy(1, dict("(2, 2)"), data));
  expect_error([&] { read_graph(path("shape.npy")); },
               {path("shape.npy"), "trailing bytes", "needs 32 data bytes, but 48 follow"});
  std::string hlen = good;
  hlen[8] = static_cast<char>(hlen[8] - 1);  // header one byte short: data starts one byte early
  write_bytes(path("hlen.npy"), hlen);
  expect_error([&] { read_npy(path("hlen.npy")); }, {path("hlen.npy"), "trailing bytes"});
  write_bytes(path("twice.npy.gz"), gzip(good) + gzip(good));  // two gzip members: two arrays
  expect_error([&] { read_npy(path("twice.npy.gz")); },
               {path("twice.npy.gz"), "more than one array"});
  write_bytes(path("short.npy"), good.substr(0, good.size() - 1));
  expect_error([&] { read_npy(path("short.npy")); }, {path("short.npy"), "truncated", "only 47"});
}

// Was: 1.255 and 3.1 were read as 1.0 and 3.0.
TEST_F(IoTest, NpyMinorVersionIsChecked) {
  std::string bytes = make_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }",
                               std::string(4, '\0'));
  bytes[7] = static_cast<char>(255);
  write_bytes(path("v.npy"), bytes);
  expect_error([&] { read_npy(path("v.npy")); },
               {path("v.npy"), "version 1.255", "1.0, 2.0 or 3.0"});
}

// Was: n = largest id + 1 was allocated as the graph's rowptr: "out of memory", or
// std::length_error ("cannot create std::vector larger than max_size()") without the file name.
TEST_F(IoTest, EdgeIndexHugeVertexIdRefusedBeforeAllocating) {
  for (int64_t id : {int64_t{1} << 50, INT64_MAX}) {
    SCOPED_TRACE(id);
    write_npy(Tensor::from_vector<int64_t>({0, 1, id, 0}, {2, 2}), path("ei.npy"));
    expect_error([&] { read_graph(path("ei.npy")); }, {path("ei.npy"), std::to_string(id)});
    ASSERT_EQ(::mkdir(path("ds").c_str(), 0777), 0);
    write_npy(Tensor::from_vector<int64_t>({0, 1, id, 0}, {2, 2}), path("ds/edge_index.npy"));
    expect_error([&] { read_dataset_dir(path("ds")); },
                 {path("ds/edge_index.npy"), std::to_string(id)});
    remove_tree(path("ds"));
  }
}

// Was: read_graph(dir) took n from x.npy's header alone: a truncated x.npy was accepted, and a
// shape of (2^40, 0) (no data needed) made the graph's rowptr allocation fail with "out of memory".
TEST_F(IoTest, DatasetGraphChecksFeatureFiles) {
  Dataset d;
  d.graph = graph_from_edges(3, 3, {0, 1, 2}, {1, 2, 0});
  d.x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  write_dataset_dir(d, path("ds"));
  EXPECT_EQ(read_graph(path("ds")).n_rows, 3);
  const std::string x = read_bytes(path("ds/x.npy"));
  write_bytes(path("ds/x.npy"), x.substr(0, x.size() - 4));
  expect_error([&] { read_graph(path("ds")); }, {path("ds/x.npy"), "truncated"});
  write_bytes(path("ds/x.npy"),
              make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 0)}", ""));
  expect_error([&] { read_graph(path("ds")); },
               {path("ds/edge_index.npy"), "1099511627776 vertices", "refusing"});
  expect_error([&] { read_dataset_dir(path("ds")); }, {path("ds/edge_index.npy"), "refusing"});
}

// Was: a label of 2^62 made num_classes 2^62 + 1 (and INT64_MAX overflowed it), sizing a model's
// output layer from one corrupt value.
TEST_F(IoTest, DatasetLabelsAreBounded) {
  Dataset d;
  d.graph = graph_from_edges(2, 2, {0, 1}, {1, 0});
  d.y = Tensor::from_vector<int64_t>({0, INT64_MAX});
  write_dataset_dir(d, path("ds"));
  expect_error([&] { read_dataset_dir(path("ds")); },
               {path("ds/y.npy"), "y[1]", "implausibly large"});
}

// Was: a NaN/Inf in x.npy was read, and training reported an accuracy computed from it.
TEST_F(IoTest, DatasetFeaturesMustBeFinite) {
  Dataset d;
  d.graph = graph_from_edges(2, 2, {0, 1}, {1, 0});
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity()}) {
    d.x = Tensor::from_vector<float>({0.5f, 1.f, 2.f, bad}, {2, 2});
    write_dataset_dir(d, path("ds"));
    expect_error([&] { read_dataset_dir(path("ds")); },
                 {path("ds/x.npy"), "x[1, 1]", std::isnan(bad) ? "NaN" : "infinite"});
  }
}

// Was: n_rows=/n_cols= of spgnn's SNAP header sized the id table unchecked: std::length_error
// ("vector::_M_default_append", no file name) or "out of memory".
TEST_F(IoTest, SnapSpgnnHeaderHugeShapeRefused) {
  write_bytes(path("h.txt"),
              "# spgnn edge list: n_rows=9223372036854775807 n_cols=2 nnz=1 values=0\n0 1\n");
  expect_error([&] { read_snap(path("h.txt")); }, {path("h.txt") + ":1:", "refusing"});
  write_bytes(path("c.txt"),
              "# spgnn edge list: n_rows=2 n_cols=1099511627776 nnz=1 values=0\n0 1\n");
  expect_error([&] { read_snap(path("c.txt")); }, {path("c.txt") + ":1:", "refusing"});
}

// Was: the header's nnz= and values= were ignored, so a truncated or cut-short spgnn edge list
// was read as a smaller graph.
TEST_F(IoTest, SnapSpgnnHeaderCountsAreChecked) {
  const Graph g = small_graph(true);
  write_snap(g, path("g.txt"));
  const std::string good = read_bytes(path("g.txt"));
  expect_same_graph(read_snap(path("g.txt")).graph, g);
  const size_t last = good.rfind('\n', good.size() - 2) + 1;  // start of the last edge line

  write_bytes(path("drop.txt"), good.substr(0, last));
  expect_error([&] { read_snap(path("drop.txt")); },
               {path("drop.txt") + ":6:", "file ends after 4 edges", "nnz=5"});
  write_bytes(path("more.txt"), good + "1 1 2.5\n");
  expect_error([&] { read_snap(path("more.txt")); },
               {path("more.txt") + ":8:", "more edges than the nnz=5"});
  // The last value loses its final digit and the newline: the edge count cannot tell.
  write_bytes(path("cut.txt"), good.substr(0, good.size() - 2));
  expect_error([&] { read_snap(path("cut.txt")); }, {path("cut.txt") + ":7:", "no newline"});
  std::string vals = good;
  vals.replace(vals.find("values=1"), 8, "values=0");
  write_bytes(path("vals.txt"), vals);
  expect_error([&] { read_snap(path("vals.txt")); },
               {path("vals.txt") + ":3:", "values=0", "2 columns"});
  std::string bad = good;
  bad.replace(bad.find("nnz=5"), 5, "nnz=x");
  write_bytes(path("bad.txt"), bad);
  expect_error([&] { read_snap(path("bad.txt")); }, {path("bad.txt") + ":1:", "'nnz=x'"});
  // Headers without nnz=/values= (and files edited to match them) still read.
  write_bytes(path("old.txt"), "# spgnn edge list: n_rows=3 n_cols=3\n0 1\n2 2\n");
  EXPECT_EQ(read_snap(path("old.txt")).graph.nnz(), 2);
}

// Was: a wrongly typed optional field of meta.json ("note": 5) escaped as nlohmann's type_error,
// which names neither the file nor the field; 4294967297 was read as version 1.
TEST_F(IoTest, PartitionMetaWrongTypesNameTheFile) {
  const std::string dir = path("part");
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  auto meta = [&](const std::string& changed) {
    std::string text = "{\"format\": \"spgnn-partition\", \"version\": 1, \"parts\": 1, "
                       "\"method\": \"range\", \"num_nodes\": 4, \"num_edges\": 5, "
                       "\"edge_cut\": 0, \"halo_volume\": 0, \"part\": [{}]" + changed + "}";
    write_bytes(dir + "/meta.json", text);
  };
  meta("");
  EXPECT_EQ(read_partition_meta(dir).parts, 1);
  const std::string p = dir + "/meta.json";
  for (const auto& [field, expect] : std::vector<std::pair<std::string, std::string>>{
           {", \"note\": 5", "\"note\" is 5"},
           {", \"source\": null", "\"source\" is null"},
           {", \"num_classes\": [1]", "\"num_classes\" is [1]"},
           {", \"feature_dim\": 1e300", "\"feature_dim\" is 1e+300"},
           {", \"version\": 4294967297", "version 4294967297"}}) {
    SCOPED_TRACE(field);
    meta(field);  // a repeated key: the last one wins
    expect_error([&] { read_partition_meta(dir); }, {p, expect});
  }
  write_bytes(p, "{\"format\": [\"spgnn-partition\"]}");
  expect_error([&] { read_partition_meta(dir); }, {p, "not a spgnn partition"});
  // Was: owned + halo overflowed (undefined behaviour) before any file was compared with it.
  meta(", \"part\": [{\"owned\": 17, \"halo\": 9223372036854775807, \"edges\": 5}]");
  expect_error([&] { read_partition_part(dir, 0); }, {p, "halo 9223372036854775807"});
}

// Was: from_chars refuses values beyond double's range, so a valid 1e-400 (0 in any reader) was
// an error that called it "not a real value", and "+-1" was read as -1.
TEST_F(IoTest, TextValuesBeyondDoubleRange) {
  write_bytes(path("tiny.mtx"), mtx("real general", "1 1 1", "1 1 1e-400\n"));
  EXPECT_EQ(as_f32(read_mtx(path("tiny.mtx")).val), (std::vector<float>{0.f}));
  write_bytes(path("huge.mtx"), mtx("real general", "1 1 1", "1 1 -1e400\n"));
  expect_error([&] { read_mtx(path("huge.mtx")); }, {path("huge.mtx") + ":3:", "not finite"});
  ReadOptions ro;
  ro.allow_nonfinite = true;
  EXPECT_TRUE(std::isinf(as_f32(read_mtx(path("huge.mtx"), ro).val)[0]));
  write_bytes(path("sign.txt"), "1 2 +-1\n");
  expect_error([&] { read_snap(path("sign.txt")); }, {path("sign.txt") + ":1:", "'+-1'"});
}

TEST(IoSharedData, CoraGraph) {
  const std::string dir = std::string(SPGNN_SHARED_DATA) + "/cora";
  struct stat st{};
  if (::stat((dir + "/edge_index.npy").c_str(), &st) != 0) {
    GTEST_SKIP() << "shared dataset not found at " << dir;
  }
  const Graph g = read_graph(dir);
  EXPECT_EQ(g.n_rows, 2708);
  EXPECT_EQ(g.nnz(), 10556);
  const auto r = as_i64(g.row), c = as_i64(g.col);
  std::set<std::pair<int64_t, int64_t>> edges;
  for (size_t k = 0; k < r.size(); ++k) edges.insert({r[k], c[k]});
  for (size_t k = 0; k < r.size(); ++k) EXPECT_TRUE(edges.count({c[k], r[k]})) << r[k] << " " << c[k];
  const Dataset d = read_dataset_dir(dir);
  EXPECT_EQ(d.x.shape(), (std::vector<int64_t>{2708, 1433}));
  EXPECT_EQ(d.num_classes, 7);
  EXPECT_EQ(d.train_idx.numel(), 140);
}

}  // namespace
}  // namespace spgnn

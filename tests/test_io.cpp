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
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "spgnn/error.hpp"
#include "spgnn/graph.hpp"
#include "spgnn/io.hpp"
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

std::vector<int64_t> as_i64(const Tensor& t) {
  if (!t.defined()) return {};
  if (t.dtype() == DType::i32) {
    auto v = t.to_vector<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return t.to_vector<int64_t>();
}
std::vector<float> as_f32(const Tensor& t) {
  return t.defined() ? t.to_vector<float>() : std::vector<float>{};
}

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

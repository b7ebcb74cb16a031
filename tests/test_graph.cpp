// Tests for include/spgnn/graph.hpp: the builder's policies (against a naive reference), index
// width selection, validate(), normalisations, transpose, statistics and the generators.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "spgnn/error.hpp"
#include "spgnn/graph.hpp"
#include "test_util.hpp"

namespace spgnn {
namespace {

using test::as_f32;
using test::as_i64;

// Expects `fn` to throw `Err` whose message contains every string in `parts`.
template <class Err, class Fn>
void expect_error(Fn&& fn, std::vector<std::string> parts) {
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

// ---- reference builder: obviously correct, quadratic-ish, for comparison ----------------------
struct RefGraph {
  std::vector<int64_t> row, col, rowptr;
  std::vector<float> val;
};

RefGraph reference_build(int64_t n_rows, const std::vector<int64_t>& rows,
                         const std::vector<int64_t>& cols, const std::vector<float>& vals,
                         const BuildOptions& opt) {
  struct E {
    int64_t r, c, k;
    float v;
  };
  const int64_t m = static_cast<int64_t>(rows.size());
  std::vector<E> es;
  for (int64_t k = 0; k < m; ++k) {
    if (opt.self_loops == SelfLoopPolicy::remove && rows[k] == cols[k]) continue;
    es.push_back({rows[k], cols[k], k, vals.empty() ? 0.f : vals[k]});
  }
  if (opt.symmetrize)
    for (int64_t k = 0; k < m; ++k)
      if (rows[k] != cols[k]) es.push_back({cols[k], rows[k], m + k, vals.empty() ? 0.f : vals[k]});
  std::sort(es.begin(), es.end(),
            [](const E& a, const E& b) { return std::tie(a.r, a.c, a.k) < std::tie(b.r, b.c, b.k); });
  RefGraph g;
  g.rowptr.assign(static_cast<size_t>(n_rows) + 1, 0);
  const bool add = opt.self_loops == SelfLoopPolicy::add;
  size_t i = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    bool has_loop = false;
    auto push = [&](int64_t c, float v) {
      g.row.push_back(r);
      g.col.push_back(c);
      g.val.push_back(v);
    };
    while (i < es.size() && es[i].r == r) {
      size_t j = i;
      double sum = 0;
      while (j < es.size() && es[j].r == r && es[j].c == es[i].c) sum += es[j++].v;
      const int64_t c = es[i].c;
      if (add && !has_loop && c > r) {
        push(r, 1.f);
        has_loop = true;
      }
      const bool is_loop = add && c == r;
      if (is_loop) has_loop = true;
      if (opt.duplicates == DuplicatePolicy::keep && !is_loop) {
        for (size_t q = i; q < j; ++q) push(c, es[q].v);
      } else if (opt.duplicates == DuplicatePolicy::sum) {
        push(c, static_cast<float>(sum));
      } else {
        push(c, es[i].v);
      }
      i = j;
    }
    if (add && !has_loop) push(r, 1.f);
    g.rowptr[static_cast<size_t>(r) + 1] = static_cast<int64_t>(g.row.size());
  }
  if (vals.empty()) g.val.clear();
  return g;
}

void expect_same(const Graph& g, const RefGraph& ref, const std::string& what) {
  EXPECT_EQ(as_i64(g.row), ref.row) << what;
  EXPECT_EQ(as_i64(g.col), ref.col) << what;
  EXPECT_EQ(as_i64(g.rowptr), ref.rowptr) << what;
  EXPECT_EQ(as_f32(g.val), ref.val) << what;
}

std::vector<BuildOptions> all_options() {
  std::vector<BuildOptions> out;
  for (auto d : {DuplicatePolicy::keep, DuplicatePolicy::drop, DuplicatePolicy::sum})
    for (auto s : {SelfLoopPolicy::keep, SelfLoopPolicy::remove, SelfLoopPolicy::add})
      for (bool sym : {false, true}) {
        BuildOptions o;
        o.duplicates = d;
        o.self_loops = s;
        o.symmetrize = sym;
        out.push_back(o);
      }
  return out;
}

std::string describe(const BuildOptions& o) {
  return detail::concat("duplicates=", int(o.duplicates), " self_loops=", int(o.self_loops),
                        " symmetrize=", o.symmetrize);
}

// ---- builder ---------------------------------------------------------------------------------
TEST(GraphBuild, SortsAndBuildsRowptr) {
  const Graph g = graph_from_edges(4, 4, {3, 0, 2, 0, 3}, {1, 3, 2, 1, 0}, {});
  g.validate();
  EXPECT_EQ(g.index_dtype(), DType::i32);
  EXPECT_FALSE(g.has_values());
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 0, 2, 3, 3}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{1, 3, 2, 0, 1}));
  EXPECT_EQ(as_i64(g.rowptr), (std::vector<int64_t>{0, 2, 2, 3, 5}));
  EXPECT_EQ(g.bytes(), size_t{5 * 4 * 2 + 5 * 4});
}

TEST(GraphBuild, DuplicatePolicies) {
  // (1,2) appears three times with values 5, 1, 2 in input order.
  const std::vector<int64_t> r = {1, 0, 1, 1}, c = {2, 1, 2, 2};
  const std::vector<float> v = {5, 7, 1, 2};
  BuildOptions o;
  o.duplicates = DuplicatePolicy::keep;
  Graph g = graph_from_edges(3, 3, r, c, v, o);
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{7, 5, 1, 2}));  // input order kept
  o.duplicates = DuplicatePolicy::drop;
  g = graph_from_edges(3, 3, r, c, v, o);
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{7, 5}));  // first value wins
  o.duplicates = DuplicatePolicy::sum;
  g = graph_from_edges(3, 3, r, c, v, o);
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{7, 8}));
  g.validate();
}

TEST(GraphBuild, SelfLoopPolicies) {
  // Vertex 1 has two loops (3, 4); vertices 0 and 2 have none.
  const std::vector<int64_t> r = {1, 0, 1, 2}, c = {1, 2, 1, 0};
  const std::vector<float> v = {3, 6, 4, 9};
  BuildOptions o;
  o.duplicates = DuplicatePolicy::keep;
  o.self_loops = SelfLoopPolicy::keep;
  Graph g = graph_from_edges(3, 3, r, c, v, o);
  EXPECT_EQ(g.nnz(), 4);
  o.self_loops = SelfLoopPolicy::remove;
  g = graph_from_edges(3, 3, r, c, v, o);
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{2, 0}));
  o.self_loops = SelfLoopPolicy::add;
  g = graph_from_edges(3, 3, r, c, v, o);
  // Exactly one loop per vertex; vertex 1 keeps its first existing value, others get 1.
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 0, 1, 2, 2}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{0, 2, 1, 0, 2}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{1, 6, 3, 9, 1}));
  o.duplicates = DuplicatePolicy::sum;
  g = graph_from_edges(3, 3, r, c, v, o);
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{1, 6, 7, 9, 1}));
  g.validate();
  // Without values, loops are added to the pattern only.
  g = graph_from_edges(3, 3, {}, {}, {}, o);
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FALSE(g.has_values());
}

TEST(GraphBuild, Symmetrize) {
  BuildOptions o;
  o.symmetrize = true;
  o.duplicates = DuplicatePolicy::sum;
  // (0,1)=2 and (1,0)=3 both given: each direction sums both; (2,2) is not doubled; (1,2)
  // mirrors with the same value.
  Graph g = graph_from_edges(3, 3, {0, 1, 2, 1}, {1, 0, 2, 2}, {2, 3, 4, 5}, o);
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 1, 1, 2, 2}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{1, 0, 2, 1, 2}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{5, 5, 5, 5, 4}));
  EXPECT_TRUE(graph_stats(g).symmetric);
  o.duplicates = DuplicatePolicy::drop;
  g = graph_from_edges(3, 3, {0, 1}, {1, 0}, {2, 3}, o);
  // The original (input) edge wins over the mirrored copy of another edge.
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{2, 3}));
  expect_error<InvalidArgument>([&] { graph_from_edges(3, 4, {0}, {3}, {}, o); },
                                {"symmetrize", "3 x 4"});
}

// Runs fn under 1 thread (stable per-thread-histogram path) and 8 threads (more histogram
// memory than edges on most of these small graphs: the atomic-fill fallback), then restores.
template <class Fn>
void with_thread_counts(Fn&& fn) {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 8}) {
    omp_set_num_threads(threads);
    fn(threads);
  }
  omp_set_num_threads(saved);
}

TEST(GraphBuild, MatchesReferenceForAllPolicies) {
  const uint64_t seed = test::seed_for(11);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t m = static_cast<int64_t>(rng() % 300);
    std::vector<int64_t> r(static_cast<size_t>(m)), c(static_cast<size_t>(m));
    std::vector<float> v(static_cast<size_t>(m));
    for (int64_t k = 0; k < m; ++k) {
      // Small id range so that duplicates and loops are frequent.
      r[static_cast<size_t>(k)] = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      c[static_cast<size_t>(k)] = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      v[static_cast<size_t>(k)] = static_cast<float>(rng() % 1000) / 7.f;
    }
    with_thread_counts([&](int threads) {
    for (const BuildOptions& o : all_options()) {
      const std::string what = detail::concat("seed ", seed, " trial ", trial, " threads ",
                                              threads, " ", describe(o));
      for (bool values : {true, false}) {
        const std::vector<float>& vv = values ? v : std::vector<float>{};
        const Graph g = graph_from_edges(n, n, r, c, vv, o);
        g.validate();
        expect_same(g, reference_build(n, r, c, vv, o), what);
      }
      BuildOptions o64 = o;
      o64.index_width = IndexWidth::i64;
      const Graph g64 = graph_from_edges(n, n, r, c, v, o64);
      EXPECT_EQ(g64.index_dtype(), DType::i64);
      g64.validate();
      expect_same(g64, reference_build(n, r, c, v, o), what + " int64");
    }
    });
  }
}

TEST(GraphBuild, RectangularAndEmpty) {
  Graph g = graph_from_edges(2, 5, {1, 0, 1}, {4, 3, 0}, {});
  g.validate();
  EXPECT_EQ(g.n_rows, 2);
  EXPECT_EQ(g.n_cols, 5);
  EXPECT_FALSE(g.square());
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{3, 0, 4}));
  g = graph_from_edges(0, 0, {}, {}, {});
  g.validate();
  EXPECT_EQ(g.nnz(), 0);
  g = graph_from_edges(7, 7, {}, {}, {});
  g.validate();
  EXPECT_EQ(as_i64(g.rowptr), std::vector<int64_t>(8, 0));
}

TEST(GraphBuild, Canonicalize) {
  // An unsorted graph with duplicates, as a loader might produce it before canonicalising.
  Graph raw;
  raw.n_rows = raw.n_cols = 4;
  raw.row = Tensor::from_vector<int64_t>({3, 1, 1, 0, 3});
  raw.col = Tensor::from_vector<int64_t>({0, 2, 2, 3, 0});
  raw.val = Tensor::from_vector<float>({1, 2, 3, 4, 5});
  BuildOptions o;
  o.duplicates = DuplicatePolicy::sum;
  Graph g = canonicalize(raw, o);
  g.validate();
  EXPECT_EQ(g.index_dtype(), DType::i32);
  EXPECT_EQ(as_i64(g.row), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(as_i64(g.col), (std::vector<int64_t>{3, 2, 0}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{4, 5, 6}));
  // Canonicalising a canonical graph with keep policies changes nothing.
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  const Graph h = test::random_graph(test::GraphKind::uniform, 300, test::seed_for(12));
  const Graph h2 = canonicalize(h, keep);
  EXPECT_EQ(as_i64(h2.row), as_i64(h.row));
  EXPECT_EQ(as_i64(h2.col), as_i64(h.col));
  EXPECT_EQ(as_f32(h2.val), as_f32(h.val));
}

// Edge tensors read in place (e.g. a caller's edge_index) build the same graph as vectors, and
// input_pos maps each edge back to its input position: parallel edges keep their input order,
// created loops get -1.
TEST(GraphBuild, FromTensorsWithInputPositions) {
  const std::vector<int64_t> rows = {2, 0, 2, 1, 0, 2, 1};
  const std::vector<int64_t> cols = {1, 2, 0, 1, 2, 1, 0};
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  const Graph ref = graph_from_edges(3, 3, rows, cols, {}, keep);
  auto owner = std::make_shared<std::vector<int64_t>>(rows);
  auto owner2 = std::make_shared<std::vector<int64_t>>(cols);
  const Tensor r = Tensor::from_external(owner->data(), {7}, {1}, DType::i64, Device::cpu(), owner);
  const Tensor c = Tensor::from_external(owner2->data(), {7}, {}, DType::i64, Device::cpu(), owner2);
  EXPECT_TRUE(r.is_external());
  EXPECT_EQ(r.raw(), owner->data());  // a view, not a copy
  Tensor pos;
  Graph g = graph_from_edge_tensors(3, 3, r, c, Tensor(), keep, &pos);
  g.validate();
  EXPECT_EQ(as_i64(g.row), as_i64(ref.row));
  EXPECT_EQ(as_i64(g.col), as_i64(ref.col));
  // (0,2) x2 at inputs 1 and 4; (1,0) at 6; (1,1) at 3; (2,0) at 2; (2,1) x2 at 0 and 5
  EXPECT_EQ(pos.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 6, 3, 2, 0, 5}));
  for (int64_t e = 0; e < g.nnz(); ++e) {
    EXPECT_EQ(as_i64(g.row)[e], rows[pos.to_vector<int64_t>()[e]]);
    EXPECT_EQ(as_i64(g.col)[e], cols[pos.to_vector<int64_t>()[e]]);
  }
  BuildOptions loops = keep;
  loops.self_loops = SelfLoopPolicy::add;
  graph_from_edge_tensors(3, 3, r, c, Tensor(), loops, &pos);
  // row 0 gains a loop before its two (0,2) edges; row 1 keeps its own loop; row 2 gains one
  EXPECT_EQ(pos.to_vector<int64_t>(), (std::vector<int64_t>{-1, 1, 4, 6, 3, 2, 0, 5, -1}));
  BuildOptions sum;
  expect_error<InvalidArgument>([&] { graph_from_edge_tensors(3, 3, r, c, Tensor(), sum, &pos); },
                                {"duplicates=keep"});
  expect_error<InvalidArgument>(
      [&] { graph_from_edge_tensors(3, 3, r, c.reshape({7, 1}), Tensor(), keep); },
      {"1-D of one length"});
}

TEST(TensorExternal, ViewsAreCheckedAndKeepTheirOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(12, 1.f);
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor t = Tensor::from_external(owner->data(), {3, 4}, {4, 1}, DType::f32, Device::cpu(), owner);
  owner.reset();
  EXPECT_FALSE(watch.expired());  // the tensor holds it
  Tensor copy = t;
  t = Tensor();
  EXPECT_FALSE(watch.expired());
  copy = Tensor();
  EXPECT_TRUE(watch.expired());
  auto mem = std::make_shared<std::vector<float>>(12);
  // a transposed (column-major) layout is refused, not copied
  expect_error<InvalidArgument>([&] {
    Tensor::from_external(mem->data(), {3, 4}, {1, 3}, DType::f32, Device::cpu(), mem, "x");
  }, {"x is not contiguous", "dimension 1 has stride 3"});
  // size-1 dimensions may carry any stride
  Tensor::from_external(mem->data(), {1, 12}, {99, 1}, DType::f32, Device::cpu(), mem);
  expect_error<InvalidArgument>([&] {
    Tensor::from_external(mem->data(), {3, 4}, {4, 1}, DType::f32, Device::cpu(), nullptr, "y");
  }, {"y: an external tensor needs an owner"});
}

// ---- index width -------------------------------------------------------------------------------
TEST(GraphIndexWidth, PickIndexDtype) {
  const int64_t lim = (int64_t{1} << 31) - 1;
  EXPECT_EQ(pick_index_dtype(0, 0), DType::i32);
  EXPECT_EQ(pick_index_dtype(lim - 1, lim - 1), DType::i32);
  EXPECT_EQ(pick_index_dtype(lim, 10), DType::i64);
  EXPECT_EQ(pick_index_dtype(10, lim), DType::i64);
  EXPECT_EQ(pick_index_dtype(int64_t{1} << 40, 5), DType::i64);
  EXPECT_EQ(pick_index_dtype(10, 10, IndexWidth::i64), DType::i64);
  EXPECT_EQ(pick_index_dtype(10, 10, IndexWidth::i32), DType::i32);
  expect_error<InvalidArgument>([&] { pick_index_dtype(lim, 10, IndexWidth::i32); },
                                {"int32", "2147483647"});
  expect_error<InvalidArgument>([&] { pick_index_dtype(10, lim, IndexWidth::i32); }, {"int32"});
  expect_error<InvalidArgument>([&] { pick_index_dtype(-1, 0); }, {"negative"});
}

TEST(GraphIndexWidth, Int32RequestedOnHugeGraphFailsBeforeAllocating) {
  BuildOptions o;
  o.index_width = IndexWidth::i32;
  // 2^31 vertices would need 16 GiB of offsets; the request must be refused up front.
  expect_error<InvalidArgument>(
      [&] { graph_from_edges(int64_t{1} << 31, int64_t{1} << 31, {}, {}, {}, o); }, {"int32"});
}

TEST(GraphBuild, RowCountsBeyondMemoryAreRefusedBeforeAnyRowIsWritten) {
  // 2^40 rows need 8 TiB of offsets alone. A machine that overcommits memory hands out the
  // address space, and the build's fill ran until the OOM killer ended the process; refused up
  // front, the caller gets std::bad_alloc (within milliseconds here) on every machine.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(graph_from_edges(int64_t{1} << 40, int64_t{1} << 40, {0}, {1}, {}), std::bad_alloc);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // Many columns cost the build nothing per column: a few rows over 2^40 sources still build,
  // but their transpose (2^40 rows) is refused the same way.
  const Graph wide = graph_from_edges(2, int64_t{1} << 40, {0}, {1}, {});
  EXPECT_EQ(wide.nnz(), 1);
  EXPECT_THROW(transpose(wide), std::bad_alloc);
}

// ---- validate ----------------------------------------------------------------------------------
Graph small_valid() {
  return graph_from_edges(4, 4, {0, 0, 1, 3, 3}, {1, 2, 3, 0, 2}, {1, 2, 3, 4, 5});
}

template <class T>
void set_at(Tensor& t, int64_t i, T v) {
  t.data<T>()[i] = v;
}

TEST(GraphValidate, AcceptsBuiltGraphs) {
  small_valid().validate();
  for (auto kind : test::all_graph_kinds())
    test::random_graph(kind, 200, test::seed_for(20)).validate();
}

TEST(GraphValidate, CatchesEachCorruption) {
  {
    Graph g = small_valid();
    g.col = g.col.clone();
    set_at<int32_t>(g.col, 1, 0);  // row 0: cols 1, 0
    expect_error<FormatError>([&] { g.validate(); },
                              {"edge 1", "row 0 col 0 comes after row 0 col 1", "sorted within a row"});
  }
  {
    Graph g = small_valid();
    g.row = g.row.clone();
    set_at<int32_t>(g.row, 3, 0);  // rows 0 0 1 0 3
    expect_error<FormatError>([&] { g.validate(); }, {"edge 3", "rows must be sorted"});
  }
  {
    Graph g = small_valid();
    g.col = g.col.clone();
    set_at<int32_t>(g.col, 4, 4);
    expect_error<FormatError>([&] { g.validate(); }, {"edge 4", "col 4", "out of range [0, 4)"});
  }
  {
    Graph g = small_valid();
    g.col = g.col.clone();
    set_at<int32_t>(g.col, 2, -1);
    expect_error<FormatError>([&] { g.validate(); }, {"edge 2", "col -1"});
  }
  {
    Graph g = small_valid();
    g.row = g.row.clone();
    set_at<int32_t>(g.row, 4, 9);
    expect_error<FormatError>([&] { g.validate(); }, {"edge 4", "row 9", "out of range"});
  }
  {
    Graph g = small_valid();
    g.rowptr = g.rowptr.clone();
    set_at<int32_t>(g.rowptr, 0, 1);
    expect_error<FormatError>([&] { g.validate(); }, {"rowptr[0]"});
  }
  {
    Graph g = small_valid();  // rowptr 0 2 3 3 5 -> 0 2 4 3 5
    g.rowptr = g.rowptr.clone();
    set_at<int32_t>(g.rowptr, 2, 4);
    expect_error<FormatError>([&] { g.validate(); }, {"rowptr[2] = 4 > rowptr[3] = 3"});
  }
  {
    Graph g = small_valid();  // rowptr 0 2 3 3 5 -> 0 1 3 3 5: edge 1 (row 0) falls in row 1
    g.rowptr = g.rowptr.clone();
    set_at<int32_t>(g.rowptr, 1, 1);
    expect_error<FormatError>([&] { g.validate(); }, {"edge 1", "rowptr"});
  }
  {
    Graph g = small_valid();
    g.rowptr = g.rowptr.clone();
    set_at<int32_t>(g.rowptr, 4, 4);
    expect_error<FormatError>([&] { g.validate(); }, {"rowptr[4]", "nnz = 5"});
  }
  {
    Graph g = small_valid();
    g.val = g.val.clone();
    set_at<float>(g.val, 3, NAN);
    expect_error<FormatError>([&] { g.validate(); }, {"edge 3", "finite"});
    set_at<float>(g.val, 3, INFINITY);
    expect_error<FormatError>([&] { g.validate(); }, {"edge 3", "finite"});
  }
  {
    Graph g = small_valid();
    g.col = g.col.astype(DType::i64);
    expect_error<FormatError>([&] { g.validate(); }, {"col", "int64", "int32"});
  }
  {
    Graph g = small_valid();
    g.val = Tensor::zeros({4}, DType::f32);
    expect_error<FormatError>([&] { g.validate(); }, {"val", "[5]"});
  }
  {
    Graph g = small_valid();
    g.val = Tensor::zeros({5}, DType::f64);
    expect_error<FormatError>([&] { g.validate(); }, {"val", "float64"});
  }
  {
    Graph g = small_valid();
    g.n_rows = 5;
    expect_error<FormatError>([&] { g.validate(); }, {"rowptr", "[6]"});
  }
  {
    Graph g = small_valid();
    g.rowptr = Tensor();
    expect_error<FormatError>([&] { g.validate(); }, {"rowptr: no"});
  }
}

// ---- normalisation -----------------------------------------------------------------------------
TEST(GraphNormalize, GcnOnPathMatchesHandComputation) {
  BuildOptions o;
  o.symmetrize = true;
  // Path 0 - 1 - 2 with arbitrary values and an existing loop on 2 (values are replaced).
  const Graph g = graph_from_edges(3, 3, {0, 1, 2}, {1, 2, 2}, {9, 9, 9}, o);
  const Graph h = gcn_normalize(g);
  h.validate();
  // A + I degrees: 2, 3, 2.
  EXPECT_EQ(as_i64(h.row), (std::vector<int64_t>{0, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(as_i64(h.col), (std::vector<int64_t>{0, 1, 0, 1, 2, 1, 2}));
  const double s6 = 1 / std::sqrt(6.0);
  const std::vector<double> want = {0.5, s6, s6, 1.0 / 3, s6, s6, 0.5};
  const auto got = as_f32(h.val);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "edge " << i;
}

TEST(GraphNormalize, GcnDirectedUsesRowDegrees) {
  // 0 <- 1, 0 <- 2 (row 0 receives from 1 and 2). Row degrees of A + I: 3, 1, 1.
  const Graph h = gcn_normalize(graph_from_edges(3, 3, {0, 0}, {1, 2}, {}));
  EXPECT_EQ(as_i64(h.col), (std::vector<int64_t>{0, 1, 2, 1, 2}));
  const auto v = as_f32(h.val);
  const double s3 = 1 / std::sqrt(3.0);
  EXPECT_NEAR(v[0], 1.0 / 3, 1e-6);
  EXPECT_NEAR(v[1], s3, 1e-6);
  EXPECT_NEAR(v[2], s3, 1e-6);
  EXPECT_NEAR(v[3], 1.0, 1e-6);
  EXPECT_NEAR(v[4], 1.0, 1e-6);
}

TEST(GraphNormalize, GcnCollapsesParallelLoops) {
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  const Graph g = graph_from_edges(2, 2, {0, 0, 1}, {0, 0, 0}, {}, keep);
  const Graph h = gcn_normalize(g);
  EXPECT_EQ(as_i64(h.row), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(as_i64(h.col), (std::vector<int64_t>{0, 0, 1}));
  expect_error<InvalidArgument>([&] { gcn_normalize(graph_from_edges(2, 3, {}, {}, {})); },
                                {"square"});
}

TEST(GraphNormalize, Mean) {
  const Graph g = small_valid();  // row degrees 2, 1, 0, 2
  const Graph h = mean_normalize(g);
  h.validate();
  EXPECT_EQ(as_i64(h.col), as_i64(g.col));
  EXPECT_EQ(as_f32(h.val), (std::vector<float>{0.5f, 0.5f, 1.f, 0.5f, 0.5f}));
  EXPECT_EQ(as_f32(g.val), (std::vector<float>{1, 2, 3, 4, 5}));  // input untouched
}

// ---- transpose ---------------------------------------------------------------------------------
TEST(GraphTranspose, PermAndInvolution) {
  with_thread_counts([&](int threads) {
  for (auto kind : test::all_graph_kinds()) {
    const uint64_t seed = test::seed_for(30 + static_cast<uint64_t>(kind));
    const Graph g = test::random_graph(kind, 500, seed);
    const std::string what =
        detail::concat(test::kind_name(kind), " seed ", seed, " threads ", threads);
    const Transposed t = transpose(g);
    t.graph.validate();
    EXPECT_EQ(t.graph.n_rows, g.n_cols) << what;
    EXPECT_EQ(t.graph.n_cols, g.n_rows) << what;
    EXPECT_EQ(t.graph.index_dtype(), g.index_dtype()) << what;
    const auto perm = t.perm.to_vector<int64_t>();
    const auto gr = as_i64(g.row), gc = as_i64(g.col), tr = as_i64(t.graph.row),
               tc = as_i64(t.graph.col);
    const auto gv = as_f32(g.val), tv = as_f32(t.graph.val);
    ASSERT_EQ(perm.size(), gr.size()) << what;
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], int64_t(i)) << what;
    for (size_t e = 0; e < perm.size(); ++e) {
      const auto p = static_cast<size_t>(perm[e]);
      ASSERT_EQ(tr[e], gc[p]) << what << " edge " << e;
      ASSERT_EQ(tc[e], gr[p]) << what << " edge " << e;
      ASSERT_EQ(tv[e], gv[p]) << what << " edge " << e;
    }
    const Transposed tt = transpose(t.graph);
    EXPECT_EQ(as_i64(tt.graph.row), gr) << what;
    EXPECT_EQ(as_i64(tt.graph.col), gc) << what;
    EXPECT_EQ(as_i64(tt.graph.rowptr), as_i64(g.rowptr)) << what;
    EXPECT_EQ(as_f32(tt.graph.val), gv) << what;
  }
  });
}

TEST(GraphTranspose, RectangularKeepsParallelEdgesInOrder) {
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  const Graph g = graph_from_edges(2, 3, {0, 1, 1, 0}, {2, 2, 2, 0}, {1, 2, 3, 4}, keep);
  const Transposed t = transpose(g);
  EXPECT_EQ(t.graph.n_rows, 3);
  EXPECT_EQ(as_i64(t.graph.rowptr), (std::vector<int64_t>{0, 1, 1, 4}));
  EXPECT_EQ(as_i64(t.graph.col), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(as_f32(t.graph.val), (std::vector<float>{4, 1, 2, 3}));
  EXPECT_EQ(t.perm.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(GraphTranspose, EdgelessGraphKeepsItsValues) {
  // Weighted without edges (mean weights of an edge-less graph): the transpose still has values
  // (an empty array), or a weighted SpMM over it refuses it for want of weights, as the GCN
  // backward over an edge-less graph without self loops did.
  const Graph g = mean_normalize(graph_from_edges(3, 4, {}, {}, {}));
  ASSERT_TRUE(g.has_values());
  const Transposed t = transpose(g);
  EXPECT_TRUE(t.graph.has_values());
  EXPECT_EQ(t.graph.nnz(), 0);
  EXPECT_EQ(t.graph.n_rows, 4);
  EXPECT_EQ(t.graph.n_cols, 3);
  t.graph.validate();
}

// ---- statistics --------------------------------------------------------------------------------
TEST(GraphStats, Star) {
  // Row 0 receives from 1..4: degrees 4, 0, 0, 0, 0.
  const Graph g = graph_from_edges(5, 5, {0, 0, 0, 0}, {1, 2, 3, 4}, {});
  const GraphStats s = graph_stats(g);
  EXPECT_EQ(s.nnz, 4);
  EXPECT_EQ(s.deg_max, 4);
  EXPECT_EQ(s.deg_min, 0);
  EXPECT_DOUBLE_EQ(s.deg_mean, 0.8);
  EXPECT_NEAR(s.deg_stddev, 1.6, 1e-12);
  EXPECT_NEAR(s.gini, 0.8, 1e-12);  // (n - 1) / n
  EXPECT_EQ(s.empty_rows, 4);
  EXPECT_FALSE(s.symmetric);
  EXPECT_EQ(s.index_dtype, "int32");
  EXPECT_EQ(s.bytes, g.bytes());
  EXPECT_FALSE(s.has_values);

  BuildOptions o;
  o.symmetrize = true;
  const GraphStats u = graph_stats(graph_from_edges(5, 5, {0, 0, 0, 0}, {1, 2, 3, 4}, {}, o));
  EXPECT_TRUE(u.symmetric);
  EXPECT_EQ(u.deg_max, 4);
  EXPECT_EQ(u.deg_min, 1);
  EXPECT_EQ(u.empty_rows, 0);
}

TEST(GraphStats, LoopsDuplicatesAndUniform) {
  BuildOptions keep;
  keep.duplicates = DuplicatePolicy::keep;
  const Graph g = graph_from_edges(3, 3, {0, 0, 0, 1, 2, 2}, {0, 1, 1, 1, 1, 1}, {}, keep);
  const GraphStats s = graph_stats(g);
  EXPECT_EQ(s.self_loops, 2);
  EXPECT_EQ(s.duplicates, 2);
  EXPECT_FALSE(s.symmetric);
  // A directed cycle: every degree 1, gini 0, not symmetric; rectangular is never symmetric.
  const GraphStats c = graph_stats(graph_from_edges(3, 3, {0, 1, 2}, {1, 2, 0}, {}));
  EXPECT_NEAR(c.gini, 0.0, 1e-12);
  EXPECT_EQ(c.deg_stddev, 0.0);
  EXPECT_FALSE(c.symmetric);
  EXPECT_FALSE(graph_stats(graph_from_edges(2, 3, {}, {}, {})).symmetric);
  EXPECT_TRUE(graph_stats(graph_from_edges(3, 3, {}, {}, {})).symmetric);
  // Gini by counting (max degree <= n) and by sorting (max degree > n): degrees 0, 1, 2 give
  // 2 * 8 / 9 - 4 / 3 = 4 / 9; degrees 10, 0 give 1 / 2.
  EXPECT_NEAR(graph_stats(graph_from_edges(3, 3, {1, 2, 2}, {0, 0, 1}, {})).gini, 4.0 / 9, 1e-12);
  std::vector<int64_t> zeros(10, 0), ten(10);
  std::iota(ten.begin(), ten.end(), int64_t{0});
  EXPECT_NEAR(graph_stats(graph_from_edges(2, 10, zeros, ten, {})).gini, 0.5, 1e-12);
}

// ---- generators --------------------------------------------------------------------------------
bool same_graph(const Graph& a, const Graph& b) {
  return a.n_rows == b.n_rows && as_i64(a.row) == as_i64(b.row) &&
         as_i64(a.col) == as_i64(b.col) && as_i64(a.rowptr) == as_i64(b.rowptr) &&
         as_f32(a.val) == as_f32(b.val);
}

TEST(GraphGenerate, RmatDeterministicAcrossSeedsAndThreads) {
  RmatParams p;
  p.scale = 12;
  p.edge_factor = 40;  // > one chunk of edges, so chunking matters
  p.seed = 42;
  const int threads = omp_get_max_threads();
  const Graph a = generate_rmat(p);
  a.validate();
  EXPECT_EQ(a.n(), 4096);
  omp_set_num_threads(1);
  const Graph b = generate_rmat(p);
  omp_set_num_threads(std::max(3, threads));
  const Graph c = generate_rmat(p);
  omp_set_num_threads(threads);
  EXPECT_TRUE(same_graph(a, b));
  EXPECT_TRUE(same_graph(a, c));
  p.seed = 43;
  EXPECT_FALSE(same_graph(a, generate_rmat(p)));
}

TEST(GraphGenerate, RmatSkewAndPermutationIsARelabelling) {
  RmatParams p;
  p.scale = 14;
  p.edge_factor = 16;
  p.seed = test::seed_for(40);
  BuildOptions o;
  o.duplicates = DuplicatePolicy::keep;
  const Graph g = generate_rmat(p, o);
  EXPECT_EQ(g.nnz(), 16 << 14);  // keep: every raw edge survives
  const GraphStats s = graph_stats(g);
  EXPECT_GT(static_cast<double>(s.deg_max), 20 * s.deg_mean) << "seed " << p.seed;
  EXPECT_GT(s.gini, 0.5) << "seed " << p.seed;
  // Without relabelling the hubs sit at low ids; with it they do not, but the degree
  // sequence is the same multiset because relabelling is a bijection.
  p.permute = false;
  const Graph raw = generate_rmat(p, o);
  auto degrees = [](const Graph& h) {
    auto rp = as_i64(h.rowptr);
    std::vector<int64_t> d(rp.size() - 1);
    for (size_t i = 0; i + 1 < rp.size(); ++i) d[i] = rp[i + 1] - rp[i];
    return d;
  };
  const auto dr = degrees(raw), dg = degrees(g);
  EXPECT_EQ(std::max_element(dr.begin(), dr.end()) - dr.begin(), 0);  // a = top-left quadrant
  auto sr = dr, sg = dg;
  std::sort(sr.begin(), sr.end());
  std::sort(sg.begin(), sg.end());
  EXPECT_EQ(sr, sg);
  EXPECT_NE(dr, dg);
}

TEST(GraphGenerate, RmatBadParameters) {
  RmatParams p;
  p.a = 0.7;
  p.b = 0.3;
  p.c = 0.2;
  expect_error<InvalidArgument>([&] { generate_rmat(p); }, {"a + b + c"});
  p = RmatParams{};
  p.scale = -1;
  expect_error<InvalidArgument>([&] { generate_rmat(p); }, {"scale"});
}

TEST(GraphGenerate, ErdosRenyi) {
  const Graph a = generate_erdos_renyi(5000, 8, 7);
  a.validate();
  EXPECT_EQ(a.n(), 5000);
  // 40000 draws among 25M pairs: a handful of duplicates at most are merged.
  EXPECT_GT(a.nnz(), 39900);
  EXPECT_LE(a.nnz(), 40000);
  EXPECT_TRUE(same_graph(a, generate_erdos_renyi(5000, 8, 7)));
  EXPECT_FALSE(same_graph(a, generate_erdos_renyi(5000, 8, 8)));
  const GraphStats s = graph_stats(a);
  EXPECT_LT(s.deg_max, 40);
  EXPECT_EQ(generate_erdos_renyi(0, 3, 1).nnz(), 0);
  expect_error<InvalidArgument>([&] { generate_erdos_renyi(-1, 3, 1); }, {"negative"});
  // more edges per row than distinct ones exist
  expect_error<InvalidArgument>([&] { generate_erdos_renyi(10, 20, 1); }, {"exceeds n = 10"});
  EXPECT_LE(generate_erdos_renyi(10, 10, 1).nnz(), 100);
  BuildOptions multi;
  multi.duplicates = DuplicatePolicy::keep;
  EXPECT_EQ(generate_erdos_renyi(10, 20, 1, multi).nnz(), 200);
}

TEST(GraphGenerate, PlantedPartition) {
  PlantedPartitionParams p;
  p.n = 4000;
  p.num_classes = 5;
  p.avg_degree = 12;
  p.p_in_ratio = 0.7;
  p.feature_dim = 16;
  p.seed = test::seed_for(50);
  const Dataset ds = generate_planted_partition(p);
  const std::string what = detail::concat("seed ", p.seed);
  EXPECT_EQ(ds.name, "planted");
  EXPECT_EQ(ds.num_classes, 5);
  ds.graph.validate();
  EXPECT_EQ(ds.x.shape(), (std::vector<int64_t>{4000, 16}));
  EXPECT_EQ(ds.x.dtype(), DType::f32);
  EXPECT_EQ(ds.y.shape(), (std::vector<int64_t>{4000}));
  EXPECT_EQ(ds.y.dtype(), DType::i64);

  const GraphStats s = graph_stats(ds.graph);
  EXPECT_TRUE(s.symmetric) << what;
  EXPECT_EQ(s.self_loops, 0) << what;
  EXPECT_EQ(s.duplicates, 0) << what;
  EXPECT_NEAR(s.deg_mean, 12.0, 0.5) << what;

  const auto y = ds.y.to_vector<int64_t>();
  std::vector<int64_t> per_class(5, 0);
  for (int64_t c : y) {
    ASSERT_TRUE(c >= 0 && c < 5);
    ++per_class[static_cast<size_t>(c)];
  }
  for (int64_t k : per_class) EXPECT_EQ(k, 800);

  // Homophily: fraction of edges whose endpoints share a class.
  const auto r = as_i64(ds.graph.row), c = as_i64(ds.graph.col);
  int64_t intra = 0;
  for (size_t e = 0; e < r.size(); ++e)
    intra += y[static_cast<size_t>(r[e])] == y[static_cast<size_t>(c[e])];
  EXPECT_NEAR(static_cast<double>(intra) / static_cast<double>(r.size()), 0.7, 0.03) << what;

  // Class centroids sit at distance ~feature_signal from the origin (noise averages out).
  const auto x = ds.x.to_vector<float>();
  for (int64_t k = 0; k < 5; ++k) {
    std::vector<double> mu(16, 0.0);
    for (int64_t i = 0; i < 4000; ++i)
      if (y[static_cast<size_t>(i)] == k)
        for (int64_t j = 0; j < 16; ++j) mu[static_cast<size_t>(j)] += x[static_cast<size_t>(i * 16 + j)] / 800.0;
    double norm = 0;
    for (double v : mu) norm += v * v;
    EXPECT_NEAR(std::sqrt(norm), 1.0, 0.2) << what << " class " << k;
  }

  // Splits: 10% / 20% / 70%, disjoint, covering all vertices.
  const auto tr = ds.train_idx.to_vector<int64_t>(), va = ds.val_idx.to_vector<int64_t>(),
             te = ds.test_idx.to_vector<int64_t>();
  EXPECT_EQ(tr.size(), 400u);
  EXPECT_EQ(va.size(), 800u);
  EXPECT_EQ(te.size(), 2800u);
  std::set<int64_t> all(tr.begin(), tr.end());
  all.insert(va.begin(), va.end());
  all.insert(te.begin(), te.end());
  EXPECT_EQ(all.size(), 4000u);
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 3999);

  // Deterministic by seed.
  const Dataset again = generate_planted_partition(p);
  EXPECT_TRUE(same_graph(ds.graph, again.graph));
  EXPECT_EQ(again.x.to_vector<float>(), x);
  EXPECT_EQ(again.train_idx.to_vector<int64_t>(), tr);
  p.seed += 1;
  const Dataset other = generate_planted_partition(p);
  EXPECT_NE(other.y.to_vector<int64_t>(), y);
  EXPECT_NE(other.x.to_vector<float>(), x);

  p.train_frac = 0.9;
  expect_error<InvalidArgument>([&] { generate_planted_partition(p); }, {"train_frac"});
  PlantedPartitionParams dense;  // more neighbours than other vertices
  dense.n = 10;
  dense.num_classes = 2;
  dense.avg_degree = 50;
  expect_error<InvalidArgument>([&] { generate_planted_partition(dense); }, {"exceeds n - 1 = 9"});
}

// ---- bad input ---------------------------------------------------------------------------------
TEST(GraphBadInput, InvalidArguments) {
  expect_error<InvalidArgument>([] { graph_from_edges(3, 3, {0, 1, 3}, {0, 0, 0}, {}); },
                                {"position 2", "row id 3", "[0, 3)"});
  expect_error<InvalidArgument>([] { graph_from_edges(3, 3, {0, 1, 2}, {0, -1, 0}, {}); },
                                {"position 1", "col id -1"});
  expect_error<InvalidArgument>([] { graph_from_edges(3, 5, {0, 1, 2}, {0, 5, 9}, {}); },
                                {"position 1", "col id 5", "[0, 5)"});
  expect_error<InvalidArgument>([] { graph_from_edges(3, 3, {0, 1}, {0}, {}); },
                                {"2 row ids", "1 col ids"});
  expect_error<InvalidArgument>([] { graph_from_edges(3, 3, {0, 1}, {0, 1}, {1.f}); },
                                {"1 values", "2 edges"});
  expect_error<InvalidArgument>([] { graph_from_edges(-1, 3, {}, {}, {}); }, {"negative"});
  BuildOptions sym;
  sym.symmetrize = true;
  expect_error<InvalidArgument>([&] { graph_from_edges(2, 3, {0}, {1}, {}, sym); },
                                {"symmetrize", "square"});
  BuildOptions add;
  add.self_loops = SelfLoopPolicy::add;
  expect_error<InvalidArgument>([&] { graph_from_edges(3, 2, {0}, {1}, {}, add); },
                                {"self_loops=add", "n_rows <= n_cols", "3 x 2"});
  // More sources than targets: target i's loop comes from source i (a partition's local graph).
  Graph block = graph_from_edges(2, 3, {0, 1}, {2, 2}, {}, add);
  EXPECT_EQ(block.nnz(), 4);
  EXPECT_EQ(block.col.to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 1, 2}));
  Graph bad = small_valid();
  bad.col = Tensor::from_vector<int32_t>({0});
  expect_error<InvalidArgument>([&] { canonicalize(bad, BuildOptions{}); },
                                {"canonicalize", "col has 1"});
}

}  // namespace
}  // namespace spgnn

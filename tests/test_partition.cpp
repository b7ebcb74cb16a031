// Edge-cut partitions: every method on every awkward graph gives parts whose local edges are
// exactly the input's edges, halos grouped by owner, send lists that match the peers' halos;
// balance; METIS cuts fewer edges than random on a clustered graph; partition directories round
// trip and bad ones are refused with the file named.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "spgnn/error.hpp"
#include "spgnn/io.hpp"
#include "spgnn/partition.hpp"
#include "test_util.hpp"

namespace spgnn {
namespace {

namespace fs = std::filesystem;
using test::GraphKind;

// (row, col, value) of every edge, global ids, sorted.
using EdgeSet = std::vector<std::tuple<int64_t, int64_t, float>>;

EdgeSet edges_of(const Graph& g, const std::vector<int64_t>* row_ids = nullptr,
                 const std::vector<int64_t>* col_ids = nullptr) {
  const Graph h = g.to(Device::cpu());
  const auto row = h.row.astype(DType::i64).to_vector<int64_t>();
  const auto col = h.col.astype(DType::i64).to_vector<int64_t>();
  const std::vector<float> val =
      h.has_values() ? h.val.to_vector<float>() : std::vector<float>(row.size(), 1.f);
  EdgeSet s;
  for (size_t k = 0; k < row.size(); ++k)
    s.emplace_back(row_ids ? (*row_ids)[static_cast<size_t>(row[k])] : row[k],
                   col_ids ? (*col_ids)[static_cast<size_t>(col[k])] : col[k], val[k]);
  std::sort(s.begin(), s.end());
  return s;
}

// Every invariant of build_local_parts' output (partition.hpp).
void check_parts(const Graph& g, const std::vector<int32_t>& owner,
                 const std::vector<LocalPart>& parts, const PartitionSummary& s) {
  const int64_t P = static_cast<int64_t>(parts.size());
  const int64_t n = g.n_rows;
  std::vector<int> seen(static_cast<size_t>(n), 0);
  EdgeSet all;
  int64_t cut = 0, halo = 0;
  for (const LocalPart& lp : parts) {
    SCOPED_TRACE("part " + std::to_string(lp.part));
    ASSERT_EQ(static_cast<int64_t>(lp.global_ids.size()), lp.n_owned + lp.n_halo());
    for (int64_t i = 0; i < lp.n_owned; ++i) {
      const int64_t v = lp.global_ids[static_cast<size_t>(i)];
      EXPECT_EQ(owner[static_cast<size_t>(v)], lp.part);
      if (i > 0) {
        EXPECT_LT(lp.global_ids[static_cast<size_t>(i) - 1], v);  // ascending
      }
      ++seen[static_cast<size_t>(v)];
    }
    ASSERT_EQ(static_cast<int64_t>(lp.halo_offsets.size()), P + 1);
    EXPECT_EQ(lp.halo_offsets.front(), 0);
    EXPECT_EQ(lp.halo_offsets.back(), lp.n_halo());
    for (int64_t q = 0; q < P; ++q) {
      const int64_t b = lp.n_owned + lp.halo_offsets[static_cast<size_t>(q)];
      const int64_t e = lp.n_owned + lp.halo_offsets[static_cast<size_t>(q) + 1];
      if (q == lp.part) {
        EXPECT_EQ(b, e) << "a part's halo holds its own vertices";
      }
      for (int64_t i = b; i < e; ++i) {
        EXPECT_EQ(owner[static_cast<size_t>(lp.global_ids[static_cast<size_t>(i)])], q);
        if (i > b) {
          EXPECT_LT(lp.global_ids[static_cast<size_t>(i) - 1], lp.global_ids[static_cast<size_t>(i)]);
        }
      }
    }
    EXPECT_EQ(lp.graph.n_rows, lp.n_owned);
    EXPECT_EQ(lp.graph.n_cols, lp.n_owned + lp.n_halo());
    EXPECT_NO_THROW(lp.graph.validate());
    const EdgeSet local = edges_of(lp.graph, &lp.global_ids, &lp.global_ids);
    all.insert(all.end(), local.begin(), local.end());
    // every halo vertex is the source of one of the part's edges
    std::vector<int> used(static_cast<size_t>(lp.n_halo()), 0);
    for (int64_t c : lp.graph.col.astype(DType::i64).to_vector<int64_t>())
      if (c >= lp.n_owned) used[static_cast<size_t>(c - lp.n_owned)] = 1;
    EXPECT_EQ(std::count(used.begin(), used.end(), 0), 0) << "a halo vertex no edge reads";
    for (const auto& [r, c, v] : local) cut += owner[static_cast<size_t>(r)] != owner[static_cast<size_t>(c)];
    halo += lp.n_halo();
    // send lists: what this part sends to q is q's halo of this part's vertices, in q's order
    ASSERT_EQ(static_cast<int64_t>(lp.send_offsets.size()), P + 1);
    for (int64_t q = 0; q < P; ++q) {
      const LocalPart& peer = parts[static_cast<size_t>(q)];
      const int64_t hb = peer.n_owned + peer.halo_offsets[static_cast<size_t>(lp.part)];
      const int64_t he = peer.n_owned + peer.halo_offsets[static_cast<size_t>(lp.part) + 1];
      const int64_t sb = lp.send_offsets[static_cast<size_t>(q)];
      ASSERT_EQ(lp.send_offsets[static_cast<size_t>(q) + 1] - sb, he - hb);
      for (int64_t i = 0; i < he - hb; ++i) {
        const int64_t local_id = lp.send_ids[static_cast<size_t>(sb + i)];
        ASSERT_GE(local_id, 0);
        ASSERT_LT(local_id, lp.n_owned);
        EXPECT_EQ(lp.global_ids[static_cast<size_t>(local_id)],
                  peer.global_ids[static_cast<size_t>(hb + i)]);
      }
    }
  }
  for (int64_t v = 0; v < n; ++v) EXPECT_EQ(seen[static_cast<size_t>(v)], 1) << "vertex " << v;
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, edges_of(g)) << "the parts' edges are not the input's";
  EXPECT_EQ(s.edge_cut, cut);
  EXPECT_EQ(s.halo_volume, halo);
  EXPECT_EQ(s.num_edges, g.nnz());
  EXPECT_EQ(s.num_nodes, n);
}

TEST(Partition, EveryMethodOnEveryGraphKind) {
  for (GraphKind kind : test::all_graph_kinds())
    for (PartitionMethod m : {PartitionMethod::metis, PartitionMethod::ldg,
                              PartitionMethod::random, PartitionMethod::range})
      for (int64_t P : {1, 2, 3, 5}) {
        const uint64_t seed = test::seed_for(static_cast<uint64_t>(kind) * 100 + static_cast<uint64_t>(m) * 10 + static_cast<uint64_t>(P));
        const Graph g = test::random_graph(kind, 300, seed);
        SCOPED_TRACE(std::string(test::kind_name(kind)) + " " + partition_method_name(m) +
                     " parts=" + std::to_string(P) + " seed=" + std::to_string(seed));
        if (P > g.n_rows) {
          PartitionOptions o;
          o.parts = P;
          o.method = m;
          EXPECT_THROW(assign_parts(g, o), InvalidArgument);
          continue;
        }
        PartitionOptions o;
        o.parts = P;
        o.method = m;
        o.seed = seed;
        const PartitionAssignment a = assign_parts(g, o);
        ASSERT_EQ(static_cast<int64_t>(a.owner.size()), g.n_rows);
        std::vector<int64_t> sizes(static_cast<size_t>(P), 0);
        for (int32_t p : a.owner) {
          ASSERT_GE(p, 0);
          ASSERT_LT(p, P);
          ++sizes[static_cast<size_t>(p)];
        }
        if (m == PartitionMethod::random) {
          const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
          EXPECT_LE(*hi - *lo, 1);
        }
        if (m == PartitionMethod::range) {
          for (int64_t v = 1; v < g.n_rows; ++v)
            EXPECT_LE(a.owner[static_cast<size_t>(v) - 1], a.owner[static_cast<size_t>(v)]);
          for (int64_t s : sizes) EXPECT_GE(s, 1);
        }
        PartitionSummary s;
        const auto parts = build_local_parts(g, a.owner, P, &s);
        check_parts(g, a.owner, parts, s);
      }
}

TEST(Partition, Int64IndicesAndNoValues) {
  BuildOptions b;
  b.index_width = IndexWidth::i64;
  const Graph g32 = test::random_graph(GraphKind::rmat, 200, test::seed_for(7), false);
  const Graph g = canonicalize(g32, b);
  ASSERT_EQ(g.index_dtype(), DType::i64);
  PartitionOptions o;
  o.parts = 3;
  const PartitionAssignment a = assign_parts(g, o);
  PartitionSummary s;
  check_parts(g, a.owner, build_local_parts(g, a.owner, 3, &s), s);
}

// Load = 1 + in-degree scaled to n / nnz: balanced within the requested imbalance (plus one
// vertex's load, the granularity) for the methods that balance loads.
TEST(Partition, BalancesVerticesAndEdges) {
  const Graph g = generate_erdos_renyi(4000, 12, test::seed_for(11));
  for (PartitionMethod m : {PartitionMethod::metis, PartitionMethod::ldg, PartitionMethod::range}) {
    PartitionOptions o;
    o.parts = 4;
    o.method = m;
    o.imbalance = 1.05;
    const auto a = assign_parts(g, o);
    const auto parts = build_local_parts(g, a.owner, 4);
    for (const LocalPart& lp : parts) {
      SCOPED_TRACE(std::string(partition_method_name(m)) + " part " + std::to_string(lp.part));
      EXPECT_LE(double(lp.n_owned), 1.10 * 1000) << "vertices";
      EXPECT_LE(double(lp.graph.nnz()), 1.10 * double(g.nnz()) / 4) << "edges";
    }
  }
}

// On a clustered graph METIS and LDG find the clusters: far fewer cut edges than random.
TEST(Partition, MetisAndLdgCutLessThanRandom) {
  PlantedPartitionParams p;
  p.n = 2000;
  p.num_classes = 4;
  p.avg_degree = 12;
  p.p_in_ratio = 0.9;
  p.seed = test::seed_for(3);
  const Graph g = generate_planted_partition(p).graph;
  auto cut = [&](PartitionMethod m) {
    PartitionOptions o;
    o.parts = 4;
    o.method = m;
    PartitionSummary s;
    build_local_parts(g, assign_parts(g, o).owner, 4, &s);
    return s.edge_cut;
  };
  const int64_t random = cut(PartitionMethod::random);
  EXPECT_GT(random, g.nnz() / 2);  // 3/4 of the edges expected
  if (have_metis()) {
    EXPECT_LT(cut(PartitionMethod::metis), random / 3);
  }
  EXPECT_LT(cut(PartitionMethod::ldg), random * 2 / 3);
}

TEST(Partition, MetisFallsBackWithANote) {
  const Graph g = test::random_graph(GraphKind::uniform, 100, test::seed_for(5));
  PartitionOptions o;
  o.parts = 2;
  const auto a = assign_parts(g, o);
  if (have_metis()) {
    EXPECT_EQ(a.method_used, PartitionMethod::metis);
    EXPECT_TRUE(a.note.empty());
  } else {
    EXPECT_EQ(a.method_used, PartitionMethod::ldg);
    EXPECT_NE(a.note.find("METIS"), std::string::npos);
  }
}

TEST(Partition, BadArguments) {
  const Graph g = test::random_graph(GraphKind::uniform, 50, test::seed_for(9));
  PartitionOptions o;
  o.parts = 0;
  EXPECT_THROW(assign_parts(g, o), InvalidArgument);
  o.parts = 51;
  EXPECT_THROW(assign_parts(g, o), InvalidArgument);
  o.parts = 2;
  o.imbalance = 0.9;
  EXPECT_THROW(assign_parts(g, o), InvalidArgument);
  EXPECT_THROW(parse_partition_method("kahip"), InvalidArgument);
  std::vector<int32_t> owner(static_cast<size_t>(g.n_rows), 0);
  owner[3] = 2;  // out of range for 2 parts
  EXPECT_THROW(build_local_parts(g, owner, 2), InvalidArgument);
  owner.pop_back();
  EXPECT_THROW(build_local_parts(g, owner, 3), InvalidArgument);
  const Graph rect = graph_from_edges(3, 5, {0, 1}, {4, 2});
  o.imbalance = 1.05;
  EXPECT_THROW(assign_parts(rect, o), InvalidArgument);
}

class PartitionDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/spgnn_test_partition_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(PartitionDir, RoundTripWithFeaturesLabelsAndSplits) {
  PlantedPartitionParams p;
  p.n = 600;
  p.seed = test::seed_for(21);
  const Dataset d = generate_planted_partition(p);
  PartitionOptions o;
  o.parts = 3;
  const auto a = assign_parts(d.graph, o);
  PartitionMeta meta;
  meta.parts = 3;
  meta.method = partition_method_name(a.method_used);
  meta.feature_dim = d.x.dim(1);
  meta.num_classes = d.num_classes;
  const auto parts = build_local_parts(d.graph, a.owner, 3, &meta.summary);
  const std::string dir = root_ + "/p3";
  write_partition_dir(d, a.owner, parts, meta, dir);
  EXPECT_THROW(write_partition_dir(d, a.owner, parts, meta, dir), InvalidArgument);
  write_partition_dir(d, a.owner, parts, meta, dir, /*overwrite=*/true);
  for (const auto& e : fs::directory_iterator(root_))  // no temporary left behind
    EXPECT_EQ(e.path().filename().string(), "p3");

  const auto owner = read_npy(dir + "/owner.npy").to_vector<int32_t>();
  const auto local_id = read_npy(dir + "/local_id.npy").to_vector<int64_t>();
  EXPECT_EQ(owner, a.owner);
  const auto x = d.x.to_vector<float>();
  const auto y = d.y.to_vector<int64_t>();
  const int64_t F = d.x.dim(1);
  int64_t train = 0;
  for (int64_t q = 0; q < 3; ++q) {
    const PartitionPart r = read_partition_part(dir, q);
    const LocalPart& want = parts[static_cast<size_t>(q)];
    EXPECT_EQ(r.meta.summary.edge_cut, meta.summary.edge_cut);
    EXPECT_EQ(r.local.global_ids, want.global_ids);
    EXPECT_EQ(r.local.halo_offsets, want.halo_offsets);
    EXPECT_EQ(r.local.send_offsets, want.send_offsets);
    EXPECT_EQ(r.local.send_ids, want.send_ids);
    EXPECT_EQ(edges_of(r.local.graph), edges_of(want.graph));
    ASSERT_TRUE(r.x.defined() && r.y.defined() && r.train_idx.defined());
    const auto lx = r.x.to_vector<float>();
    const auto ly = r.y.to_vector<int64_t>();
    for (int64_t i = 0; i < want.n_owned; ++i) {
      const int64_t v = want.global_ids[static_cast<size_t>(i)];
      EXPECT_EQ(local_id[static_cast<size_t>(v)], i);
      EXPECT_EQ(ly[static_cast<size_t>(i)], y[static_cast<size_t>(v)]);
      for (int64_t f = 0; f < F; ++f)
        ASSERT_EQ(lx[static_cast<size_t>(i * F + f)], x[static_cast<size_t>(v * F + f)]);
    }
    for (int64_t t : r.train_idx.to_vector<int64_t>()) {
      const int64_t v = want.global_ids[static_cast<size_t>(t)];
      const auto ti = d.train_idx.to_vector<int64_t>();
      EXPECT_NE(std::find(ti.begin(), ti.end(), v), ti.end());
      ++train;
    }
  }
  EXPECT_EQ(train, d.train_idx.numel());
}

TEST_F(PartitionDir, BadDirectoriesNameTheFile) {
  const Graph g = test::random_graph(GraphKind::uniform, 120, test::seed_for(31));
  Dataset d;
  d.graph = g;
  PartitionOptions o;
  o.parts = 2;
  o.method = PartitionMethod::range;
  const auto a = assign_parts(g, o);
  PartitionMeta meta;
  meta.parts = 2;
  meta.method = "range";
  const auto parts = build_local_parts(g, a.owner, 2, &meta.summary);
  const std::string dir = root_ + "/p2";
  write_partition_dir(d, a.owner, parts, meta, dir);
  auto expect_error = [&](const std::string& needle, int64_t part) {
    try {
      read_partition_part(dir, part);
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("part 2 requested", 2);  // a third rank
  EXPECT_NO_THROW(read_partition_part(dir, 1));
  fs::rename(dir + "/part-1", root_ + "/moved");
  expect_error("part-1", 1);  // a missing part
  fs::rename(root_ + "/moved", dir + "/part-1");
  fs::remove(dir + "/part-0/send_ids.npy");
  expect_error("send_ids.npy", 0);
  // a meta.json that disagrees with the files
  {
    const std::string text = read_file_decompressed(dir + "/meta.json");
    std::ofstream(dir + "/meta.json") << "{ not json";
    expect_error("meta.json", 1);
    std::string three = text;  // three ranks' worth of parts, two parts listed
    const auto pos = three.find("\"parts\": 2");
    ASSERT_NE(pos, std::string::npos);
    three.replace(pos, 10, "\"parts\": 3");
    std::ofstream(dir + "/meta.json") << three;
    expect_error("\"part\" lists 2 parts", 1);
    std::string edges = text;  // a part's edge count that its graph.spg does not have
    const auto e = edges.find("\"edges\": ");
    ASSERT_NE(e, std::string::npos);
    edges.insert(e + 9, "1");
    std::ofstream(dir + "/meta.json") << edges;
    expect_error("graph.spg", 0);
  }
  EXPECT_THROW(read_partition_meta(root_ + "/nowhere"), FormatError);
}

}  // namespace
}  // namespace spgnn

"""spgnn.partition: owners in range and balanced, the same from an edge_index or a Graph, METIS
and LDG cut fewer edges than random on a clustered graph, bad arguments named."""
import pytest
import torch

import spgnn

from conftest import make_edge_index
from spgnn.partition import METHODS


def _cut(ei, owner):
    return int((owner[ei[0]] != owner[ei[1]]).sum())


def _clustered(gen, n=400, clusters=4, deg=10, p_in=0.9):
    """Vertices in `clusters` random groups; p_in of the edges stay inside a group."""
    group = torch.randint(0, clusters, (n,), generator=gen)
    members = [torch.nonzero(group == c).flatten() for c in range(clusters)]
    src = torch.randint(0, n, (n * deg,), generator=gen)
    inside = torch.rand(n * deg, generator=gen) < p_in
    dst = torch.randint(0, n, (n * deg,), generator=gen)
    for i in torch.nonzero(inside).flatten().tolist():
        m = members[int(group[src[i]])]
        dst[i] = m[int(torch.randint(0, len(m), (1,), generator=gen))]
    ei = torch.stack([src, dst])
    return torch.cat([ei, ei.flip(0)], 1), n


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", ["uniform", "skewed", "empty_rows", "loops_dups"])
def test_owners(gen, method, kind):
    ei, n = make_edge_index(kind, gen)
    for parts in (1, 2, 3):
        p = spgnn.partition(ei, parts, method, num_nodes=n, seed=3)
        assert p.owner.dtype == torch.int32 and p.owner.shape == (n,)
        assert int(p.owner.min()) >= 0 and int(p.owner.max()) < parts
        assert set(p.owner.tolist()) == set(range(parts))  # no empty part
        if method == "random":
            counts = torch.bincount(p.owner.long(), minlength=parts)
            assert int(counts.max() - counts.min()) <= 1
        if method == "range":
            assert bool((p.owner[1:] >= p.owner[:-1]).all())
        assert p.method == method or (method == "metis" and p.method == "ldg" and p.note)
        again = spgnn.partition(spgnn.Graph(ei, n), parts, method, seed=3)
        assert torch.equal(again.owner, p.owner)


def test_metis_and_ldg_find_clusters(gen):
    ei, n = _clustered(gen)
    random_cut = _cut(ei, spgnn.partition(ei, 4, "random", num_nodes=n).owner.long())
    for method in ("metis", "ldg"):
        p = spgnn.partition(ei, 4, method, num_nodes=n)
        assert _cut(ei, p.owner.long()) < random_cut / 2, (method, p.method)


def test_bad_arguments(gen):
    ei, n = make_edge_index("uniform", gen)
    with pytest.raises(ValueError, match="parts"):
        spgnn.partition(ei, 0, num_nodes=n)
    with pytest.raises(ValueError, match="method"):
        spgnn.partition(ei, 2, "kahip", num_nodes=n)
    with pytest.raises(ValueError, match="imbalance"):
        spgnn.partition(ei, 2, imbalance=0.5, num_nodes=n)
    with pytest.raises(ValueError, match="seed"):
        spgnn.partition(ei, 2, seed=-1, num_nodes=n)
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\^64\)"):
        spgnn.partition(ei, 2, seed=2**64, num_nodes=n)
    with pytest.raises(TypeError, match="graph"):
        spgnn.partition([[0, 1], [1, 0]], 2)
    with pytest.raises(ValueError, match="every part needs a vertex"):
        spgnn.partition(ei, n + 1, num_nodes=n)
    with pytest.raises(ValueError, match="num_nodes"):
        spgnn.partition(spgnn.Graph(ei, n), 2, num_nodes=n + 1)

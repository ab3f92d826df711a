"""Tests of zslib.methods.zsml.relation: ZSML's relation function R (Eq. 1), similarity function S (Eq. 2)
and the linear relation of Table 9 (xu2019zsml).

Oracles: a hand-computed small case, the paper's Table 1 arithmetic, the literal 2-D convolution over
the stacked m x 2 pair matrix (against the per-vector decomposition), brute-force loops over pairs,
and gradcheck in float64.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from zslib.methods.zsml.relation import (ZSML_ARCHITECTURE, LinearRelation, PairSimilarity, RelationKernels,
                                         SimilarityHead, pair_similarity)


def _hand_kernels():
    """dim 5, two kernels of height 2 and stride 3: output positions read rows 0-1 and 3-4."""
    rel = RelationKernels(5, k=2, height=2, stride=3)
    with torch.no_grad():
        w = torch.zeros(2, 1, 2, 2)
        w[0, 0, :, 0] = torch.tensor([1.0, 0.0])   # kernel 0: x_i[top] + x_j[bottom]
        w[0, 0, :, 1] = torch.tensor([0.0, 1.0])
        w[1, 0, :, 0] = torch.tensor([-1.0, -1.0])  # kernel 1: -(x_i rows) + (x_j rows) + 4
        w[1, 0, :, 1] = torch.tensor([1.0, 1.0])
        rel.conv.weight.copy_(w)
        rel.conv.bias.copy_(torch.tensor([0.0, 4.0]))
    return rel


def test_relation_matches_hand_computed_case():
    rel = _hand_kernels()
    xi = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]])
    xj = torch.tensor([[0.0, 1.0, 0.0, -1.0, 2.0]])
    assert rel.length == 2 and rel.out_features == 4
    # kernel 0: pos 0: 1*1 + 1*x_j[1]=1 -> 2; pos 1: x_i[3]=4 + x_j[4]=2 -> 6
    # kernel 1: pos 0: -(1+2) + (0+1) + 4 = 2; pos 1: -(4+5) + (-1+2) + 4 = -4 -> ReLU 0
    assert rel(xi, xj).tolist() == [[2.0, 6.0, 2.0, 0.0]]
    assert rel.stacked(xi, xj).tolist() == [[2.0, 6.0, 2.0, 0.0]]
    # swapped pair: kernel 0: 0 + 2 = 2, -1 + 5 = 4; kernel 1: -(0+1) + (1+2) + 4 = 6, -(-1+2) + (4+5) + 4 = 12
    assert rel(xj, xi).tolist() == [[2.0, 4.0, 6.0, 12.0]]


def test_table1_arithmetic_fixes_kernel_height_8_stride_10():
    """Table 1: Conv 2 x 8 / 10 on 2,608-dim features gives 96 x 261 outputs and ~400K multiply-adds;
    FC 1,000 on them is ~25M."""
    rel = RelationKernels(2608, **{k: ZSML_ARCHITECTURE[k] for k in ("k", "height", "stride")})
    assert (rel.k, rel.length) == (96, 261)
    assert rel.conv.weight.shape == (96, 1, 8, 2)
    macs = rel.k * rel.length * rel.conv.weight[0].numel()
    assert round(macs, -5) == 400_000
    net = PairSimilarity(rel, ZSML_ARCHITECTURE["hidden"])
    fc = [m for m in net.head.layers if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in fc] == [(96 * 261, 1000), (1000, 1000), (1000, 1)]
    assert round(fc[0].weight.numel(), -6) == 25_000_000
    total = macs + sum(m.weight.numel() for m in fc)
    assert 26.4e6 <= total < 26.5e6  # Table 1: "Total 26.4M" (the sum of its rounded rows)


@pytest.mark.parametrize("dim,k,height,stride", [(13, 3, 2, 1), (40, 4, 8, 10), (29, 5, 3, 4), (8, 2, 8, 3)])
@pytest.mark.parametrize("norm", [None, "lrn", "batch"])
def test_decomposition_equals_literal_convolution(dim, k, height, stride, norm):
    torch.manual_seed(dim + k)
    rel = RelationKernels(dim, k=k, height=height, stride=stride, norm=norm).double().eval()
    if norm == "batch":
        with torch.no_grad():
            rel.norm.running_mean.uniform_(-1, 1)
            rel.norm.running_var.uniform_(0.5, 2)
    xi, xj = torch.randn(7, dim, dtype=torch.float64), torch.randn(7, dim, dtype=torch.float64)
    assert rel.length == (dim - height) // stride + 1
    torch.testing.assert_close(rel(xi, xj), rel.stacked(xi, xj), rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # the in-place inference path
        torch.testing.assert_close(rel(xi, xj), rel.stacked(xi, xj), rtol=1e-12, atol=1e-12)


def test_decomposition_gives_the_literal_gradients():
    torch.manual_seed(0)
    rel = RelationKernels(30, k=4, height=5, stride=3).double()
    xi, xj = torch.randn(6, 30, dtype=torch.float64), torch.randn(6, 30, dtype=torch.float64)
    w = torch.randn(6, rel.out_features, dtype=torch.float64)
    grads = []
    for path in (rel.forward, rel.stacked):
        rel.zero_grad()
        (path(xi, xj) * w).sum().backward()
        grads.append((rel.conv.weight.grad.clone(), rel.conv.bias.grad.clone()))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gradcheck_whole_network_float64():
    torch.manual_seed(1)
    net = pair_similarity(8, k=2, height=3, stride=2, hidden=(4, 3)).double()
    xi = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    xj = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: net(a, b), (xi, xj), fast_mode=True)


def test_relation_is_not_symmetric_unless_kernel_columns_are_equal():
    torch.manual_seed(2)
    rel = RelationKernels(20, k=6, height=4, stride=2).double()
    a, b = torch.randn(10, 20, dtype=torch.float64), torch.randn(10, 20, dtype=torch.float64)
    assert (rel(a, b) - rel(b, a)).abs().max() > 1e-3
    with torch.no_grad():
        rel.conv.weight[..., 1] = rel.conv.weight[..., 0]
    torch.testing.assert_close(rel(a, b), rel(b, a), rtol=0, atol=0)


def test_symmetric_scores_average_both_orders():
    torch.manual_seed(3)
    net = pair_similarity(16, k=4, height=4, stride=3, hidden=(8, 8)).double()
    a, b = torch.randn(9, 16, dtype=torch.float64), torch.randn(9, 16, dtype=torch.float64)
    assert (net(a, b) - net(b, a)).abs().max() > 1e-6  # as printed, s_ij != s_ji
    torch.testing.assert_close(net(a, b, symmetric=True), 0.5 * (net(a, b) + net(b, a)))
    torch.testing.assert_close(net(a, b, symmetric=True), net(b, a, symmetric=True))


@pytest.mark.parametrize("relation", ["kernels", "linear"])
def test_indexed_and_all_pairs_match_pair_by_pair_loops(relation):
    torch.manual_seed(4)
    net = pair_similarity(11, relation, k=3, height=2, stride=2, hidden=(6, 5)).double()
    x = torch.randn(5, 11, dtype=torch.float64)
    with torch.no_grad():
        brute = torch.tensor([[float(net(x[i:i + 1], x[j:j + 1])) for j in range(5)] for i in range(5)],
                             dtype=torch.float64)
    torch.testing.assert_close(net.all_pairs(x), brute, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(net.all_pairs(x, symmetric=True), 0.5 * (brute + brute.T), rtol=1e-12, atol=1e-12)
    first, second = torch.tensor([4, 0, 2, 2]), torch.tensor([1, 3, 2, 0])
    torch.testing.assert_close(net.indexed(x, first, second), brute[first, second], rtol=1e-12, atol=1e-12)


def test_linear_relation_is_the_difference_and_flips_sign():
    torch.manual_seed(5)
    net = pair_similarity(7, "linear", hidden=(9, 9)).double()
    assert isinstance(net.relation, LinearRelation) and net.relation.out_features == 7
    a, b = torch.randn(6, 7, dtype=torch.float64), torch.randn(6, 7, dtype=torch.float64)
    torch.testing.assert_close(net.relation(a, b), a - b, rtol=0, atol=0)
    torch.testing.assert_close(net(a, b), net.head(a - b))
    torch.testing.assert_close(net.relation(b, a), -net.relation(a, b), rtol=0, atol=0)
    assert not list(net.relation.parameters())


def test_similarity_head_has_a_relu_after_every_hidden_layer_and_one_output():
    head = SimilarityHead(10, (7, 5))
    kinds = [type(m).__name__ for m in head.layers]
    assert kinds == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert head(torch.randn(3, 10)).shape == (3,)


def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="exceeds the feature dimension"):
        RelationKernels(5, height=8)
    with pytest.raises(ValueError, match="norm"):
        RelationKernels(50, norm="layer")
    with pytest.raises(ValueError, match="relation"):
        pair_similarity(50, "quadratic")
    rel = RelationKernels(50, k=2)
    with pytest.raises(ValueError, match=r"shape \(n, 50\)"):
        rel(torch.randn(3, 40), torch.randn(3, 40))
    with pytest.raises(TypeError, match="floating-point"):
        rel(torch.ones(3, 50, dtype=torch.long), torch.ones(3, 50, dtype=torch.long))
    net = pair_similarity(50, k=2, hidden=(4,))
    with pytest.raises(ValueError, match="same number of pairs"):
        net(torch.randn(3, 50), torch.randn(2, 50))

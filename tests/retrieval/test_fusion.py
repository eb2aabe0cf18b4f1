from ifqa.retrieval import fusion


def test_rrf_rewards_agreement():
    a = [(1, 9.0), (2, 8.0), (3, 7.0)]
    b = [(3, 0.9), (1, 0.8), (4, 0.7)]
    fused = fusion.reciprocal_rank([a, b], k=4)
    assert [doc for doc, _ in fused] == [1, 3, 2, 4]
    assert fused[0][1] == 1 / 61 + 1 / 62


def test_weights_and_linear():
    a = [(1, 10.0), (2, 0.0)]
    b = [(2, 1.0), (1, 0.5)]
    assert [d for d, _ in fusion.linear([a, b], k=2)] == [1, 2]  # both 1.0 after min-max: tie broken by position
    assert [d for d, _ in fusion.linear([a, b], k=2, weights=[0.2, 0.8])] == [2, 1]
    assert [d for d, _ in fusion.reciprocal_rank([a, b], k=2, weights=[0.1, 1.0])] == [2, 1]

"""Passages tokenized once per tokenizer (retrieval/tokens.py): pairs laid out from ids equal the
tokenizer's own pairs, the cache is read back instead of tokenizing again, and a cache file that is
damaged, made by another tokenizer or cannot be written is rebuilt or named, never used."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from ifqa import feeding
from ifqa.retrieval.encoders import demo_texts, resolve
from ifqa.retrieval.tokens import BatchTokens, PairTokens, TokenCache, tokenizer_identity

QUESTIONS = [
    "If the river dried up, what would the bridge cross?",
    "If Toronto were in France, which language would its mayor speak?",
    "What?",
    " ".join(["If the long question went on"] * 12) + "?",  # too long to leave the passage room at 64
]


@pytest.fixture(scope="module")
def minilm():
    return AutoTokenizer.from_pretrained(resolve("sentence-transformers/all-MiniLM-L6-v2"))


@pytest.fixture(scope="module")
def roberta_like(tmp_path_factory, minilm):
    """A tokenizer whose pair is laid out as RoBERTa's (<s> A </s></s> B </s>, no token types), padded left."""
    from tokenizers import processors

    folder = tmp_path_factory.mktemp("roberta-like")
    tokenizer = AutoTokenizer.from_pretrained(resolve("sentence-transformers/all-MiniLM-L6-v2"))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("which", ["minilm", "roberta_like"])
@pytest.mark.parametrize("max_length", [32, 64, 256])
def test_pairs_from_ids_are_the_tokenizers_own_pairs(request, which, max_length):
    from ifqa.models import pair_inputs

    tokenizer = request.getfixturevalue(which)
    texts = demo_texts()[:40] + ["", "é" * 3, "word " * 300]
    pairs = PairTokens(tokenizer, max_length)
    cache = TokenCache(tokenizer, tokenizer_identity(tokenizer))
    for question in QUESTIONS:
        q = np.asarray(tokenizer(question, add_special_tokens=False)["input_ids"], "<i4")
        rows = [(q, p, pairs.room(q, p)) for p in cache.ids(texts, max_length)]
        own = pair_inputs(tokenizer, [question] * len(texts), texts, max_length, padding=True, return_tensors="np")
        if any(kept is None for *_, kept in rows):  # the tokenizer cuts such a pair on both sides
            assert len(q) + pairs.specials >= max_length
            continue
        built = pairs.rows(rows)
        assert set(built) == set(own)
        for key, value in built.items():
            assert np.array_equal(value.numpy(), np.asarray(own[key])), (which, max_length, question, key)
    assert pairs.matches(QUESTIONS[:2] * 2, texts[:4])


@pytest.mark.parametrize("which", ["minilm", "roberta_like"])
@pytest.mark.parametrize("max_length", [16, 128])
def test_batches_planned_by_tokens_are_the_tokenizers_own_batches_longest_first(request, which, max_length):
    """Each planned batch equals the tokenizer's own padded call on its texts (either padding side, with
    and without token types), every text in one batch, the batches' longest rows longest first."""
    tokenizer = request.getfixturevalue(which)
    texts = demo_texts()[:45] + ["", "1,234 5,678 9,012 " * 20, "é" * 3, "short"]
    made = BatchTokens(tokenizer, max_length)
    planned = made.planned(texts, 8)
    assert sorted(i for positions, _ in planned for i in positions) == list(range(len(texts)))
    assert [len(positions) for positions, _ in planned] == [8] * 6 + [1]
    for positions, batch in planned:
        own = tokenizer([texts[i] for i in positions], truncation=True, max_length=max_length, padding=True)
        assert set(batch) == set(own), which
        for key, value in batch.items():
            assert np.array_equal(value.numpy(), np.asarray(own[key])), (which, max_length, key)
    widths = [batch["attention_mask"].sum(1).max().item() for _, batch in planned]
    assert widths == sorted(widths, reverse=True)


def test_batches_planned_by_tokens_carry_no_padding_where_characters_mislead(minilm):
    """Four texts of each token count, two of words and two of numbers (each number three pieces in
    six characters): planned by tokens every batch is four texts of one length; by characters the
    numbers fall among shorter word texts and are padded to."""
    texts = [text for n in (12, 30, 48, 66) for text in ["word " * n] * 2 + ["1,234 " * (n // 3)] * 2]
    lengths = [len(ids) for ids in minilm(texts, truncation=True, max_length=128)["input_ids"]]
    planned = [positions for positions, _ in BatchTokens(minilm, 128).planned(texts, 4)]
    by_characters = [sorted(range(16), key=lambda i: -len(texts[i]))[start : start + 4] for start in range(0, 16, 4)]

    def padding(batches) -> int:
        return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)

    assert padding(planned) == 0 < padding(by_characters)


def test_a_tokenizers_identity_outlives_its_calls(minilm):
    """A tokenizer's own call resets the truncation and padding its folder saved (128 tokens for
    all-MiniLM-L6-v2): its identity, which names its token cache, stays what it was."""
    from transformers import AutoTokenizer

    fresh = AutoTokenizer.from_pretrained(resolve("sentence-transformers/all-MiniLM-L6-v2"))
    before = tokenizer_identity(fresh)
    fresh(["a passage"], truncation=True, max_length=16, padding="max_length")
    fresh(["a passage"])
    assert tokenizer_identity(fresh) == before == tokenizer_identity(minilm)


def test_passages_are_tokenized_once_and_read_back(minilm, tmp_path, monkeypatch):
    texts = demo_texts()[:50]
    first = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    ids = first.ids(texts + texts[:5], 512)
    assert [list(i) for i in ids[:50]] == minilm(texts, add_special_tokens=False)["input_ids"]
    calls = []
    second = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    monkeypatch.setattr(second, "tokenize", lambda texts: calls.append(texts) or [])
    assert [list(i) for i in second.ids(texts, 512)] == [list(i) for i in ids[:50]] and calls == []


def test_a_forked_process_reads_and_writes_the_cache_on_a_connection_of_its_own(minilm, tmp_path):
    """A feed's worker is forked from a process whose connection is open: it opens its own (SQLite's
    connections must not cross a fork), adds what it tokenized, and leaves the parent's working."""
    import multiprocessing

    texts = demo_texts()[:40]
    cache = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    expected = [list(i) for i in cache.ids(texts[:20], 512)]  # the parent's connection, open across the fork

    def child(done) -> None:
        done.put([list(i) for i in cache.ids(texts, 512)] == minilm(texts, add_special_tokens=False)["input_ids"])

    done = multiprocessing.get_context("fork").Queue()
    worker = multiprocessing.get_context("fork").Process(target=child, args=(done,))
    worker.start()
    assert done.get(timeout=60) is True
    worker.join(60)
    assert worker.exitcode == 0
    assert [list(i) for i in cache.ids(texts[:20], 512)] == expected  # the parent's connection still serves
    calls = []
    again = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    again.tokenize = lambda texts: calls.append(texts) or []
    assert len(again.ids(texts, 512)) == 40 and calls == []  # what the child tokenized is in the file


def test_one_cache_serves_many_threads(minilm, tmp_path):
    """As ``ifqa serve --rerank`` uses it: each request on a thread of a pool, the file opened on the first."""
    texts = demo_texts()[:60]
    cache = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    cache.ids(texts[:10], 512)  # the connection is made on this thread
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: cache.ids(texts[i : i + 30], 512), range(0, 30, 3)))
    for i, ids in zip(range(0, 30, 3), results):
        assert [list(x) for x in ids] == minilm(texts[i : i + 30], add_special_tokens=False)["input_ids"]


def _damage(path):
    path.write_bytes(b"not a database" * 100)


def _another_tokenizer(path):
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = 'another' WHERE key = 'tokenizer'")


def _a_row_flipped(path):
    with sqlite3.connect(path) as db:
        key, blob = db.execute("SELECT key, ids FROM ids LIMIT 1").fetchone()
        db.execute("UPDATE ids SET ids = ? WHERE key = ?", (bytes([blob[0] ^ 1]) + blob[1:], key))


@pytest.mark.parametrize("harm", [_damage, _another_tokenizer, _a_row_flipped])
def test_a_damaged_or_foreign_cache_is_rebuilt_never_used(minilm, tmp_path, harm, caplog):
    texts = demo_texts()[:20]
    expected = minilm(texts, add_special_tokens=False)["input_ids"]
    cache = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    cache.ids(texts, 512)
    harm(cache.path)
    again = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    assert [list(i) for i in again.ids(texts, 512)] == expected
    if harm is not _a_row_flipped:
        assert "tokenizing its passages again" in caplog.text
    third = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)  # and the rebuilt file reads back
    third.tokenize = lambda texts: pytest.fail("tokenized again: the rebuilt cache was not kept")
    assert [list(i) for i in third.ids(texts, 512)] == expected


def test_a_cache_that_cannot_be_used_is_named_and_the_ids_kept_in_memory(minilm, tmp_path, caplog):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    cache = TokenCache(minilm, tokenizer_identity(minilm), blocked)
    texts = demo_texts()[:5]
    assert [list(i) for i in cache.ids(texts, 512)] == minilm(texts, add_special_tokens=False)["input_ids"]
    assert "IFQA_CACHE_DIR" in caplog.text and str(blocked) in caplog.text and caplog.text.count("cannot be used") == 1
    cache.tokenize = lambda texts: pytest.fail("tokenized again: the ids were not kept in memory")
    assert [list(i) for i in cache.ids(texts, 512)] == minilm(texts, add_special_tokens=False)["input_ids"]


def test_a_cache_held_by_another_process_is_left_to_it(minilm, tmp_path, caplog, monkeypatch):
    """Locked past the wait (another ranking writing it): this process goes on in memory, the file stays
    whole (never taken for damage and removed) for the next run to read."""
    import ifqa.retrieval.tokens as tokens

    texts = demo_texts()[:10]
    real = sqlite3.connect
    monkeypatch.setattr(tokens.sqlite3, "connect", lambda *a, **k: real(*a, **{**k, "timeout": 0.1}))
    cache = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    cache.ids(texts[:5], 512)
    other = real(cache.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        assert [list(i) for i in cache.ids(texts, 512)] == minilm(texts, add_special_tokens=False)["input_ids"]
        later = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
        assert [list(i) for i in later.ids(texts[5:], 512)] == minilm(texts[5:], add_special_tokens=False)["input_ids"]
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "locked" in caplog.text and "tokenizing its passages again" not in caplog.text
    kept = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)  # the first five are still in the file
    kept.tokenize = lambda texts: pytest.fail("the file holding the first passages was removed")
    assert len(kept.ids(texts[:5], 512)) == 5


def _a_page_overwritten(path):
    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page : 4 * page] = b"\xff" * page
    path.write_bytes(bytes(data))


def test_a_page_damaged_past_the_header_is_rebuilt(minilm, tmp_path, caplog):
    texts = demo_texts()[:300]
    cache = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    cache.ids(texts, 512)
    cache._close()
    assert cache.path.stat().st_size > 4 * 4096
    _a_page_overwritten(cache.path)
    again = TokenCache(minilm, tokenizer_identity(minilm), tmp_path)
    assert [list(i) for i in again.ids(texts, 512)] == minilm(texts, add_special_tokens=False)["input_ids"]
    assert "tokenizing its passages again" in caplog.text


@pytest.fixture(scope="module")
def cross_encoder(tiny_model, tmp_path_factory):
    from transformers import AutoModelForSequenceClassification

    model = tmp_path_factory.mktemp("tokens") / "cross-encoder"
    AutoModelForSequenceClassification.from_pretrained(str(tiny_model), num_labels=1).save_pretrained(model)
    AutoTokenizer.from_pretrained(str(tiny_model)).save_pretrained(model)
    return model


def test_reranker_scores_are_those_of_pairs_tokenized_one_by_one(cross_encoder, tmp_path, monkeypatch):
    """The reranker's pairs laid out from cached ids score as pairs the tokenizer makes itself (fp32)."""
    from ifqa.retrieval.rerank import load_reranker

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    tiny_model = cross_encoder
    texts = demo_texts()[:30]
    items = [(q, texts[i::4], [0.0] * len(texts[i::4])) for i, q in enumerate(QUESTIONS)]
    fast = load_reranker(str(tiny_model), depth=10, device="cpu", max_length=48)
    assert fast.score_many([(QUESTIONS[0], [], [])]) == [[]]  # a served question may come without passages
    assert fast._pairs is None  # ... and leaves the layout to the first call with pairs
    scores = fast.score_many(items)
    assert fast._pairs and (tmp_path / "cache" / "tokens").is_dir()
    slow = load_reranker(str(tiny_model), depth=10, device="cpu", max_length=48)
    slow._pairs = False
    expected = slow.score_many(items)
    for got, want in zip(scores, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with ThreadPoolExecutor(1) as pool:  # as `ifqa serve` calls it: on another thread than the first call's
        assert pool.submit(fast.score_many, items).result() == scores


def test_pairs_cut_on_both_sides_are_prepared_alike_on_the_feeds_threads(cross_encoder, tmp_path, monkeypatch):
    """A batch holding a question too long for --max-length is tokenized by the tokenizer itself, whose
    call changes its truncation setting: prepared ahead on the GPU feed's threads, every batch is the
    one prepared alone (two threads sharing the tokenizer once cut each other's pairs, or failed)."""
    from ifqa.retrieval.rerank import load_reranker
    from tests.fake_cuda import FakeCuda

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    reranker = load_reranker(str(cross_encoder), depth=10, device="cpu", max_length=24, batch_size=4)
    texts = demo_texts()[:40]
    long_question = " ".join(QUESTIONS)  # leaves no room for a passage in 24 tokens
    items = [(long_question if i % 2 else q, texts[i::8], [0.0] * 5) for i, q in enumerate(QUESTIONS * 2)]
    reranker.score_many(items[:1])  # the layout decided
    groups = [items[i : i + 3] for i in range(0, len(items), 3)] * 10  # a feed item is a group of questions
    assert any(kept is None for *_, kept in reranker._token_rows(items, reranker._pairs))
    alone = [reranker._group_batches(group) for group in groups]
    FakeCuda(count=1).install(monkeypatch)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self)
    fed = feeding.feed(groups, reranker._group_batches, "cuda", workers=0)
    for got, want in zip(
        (batch for group in fed for batch in group), (b for group in alone for b in group), strict=True
    ):
        assert got[0].tolist() == want[0].tolist()
        got, want = got[1], want[1]
        assert {k: v.tolist() for k, v in got.items()} == {k: v.tolist() for k, v in want.items()}


def _three_groups(cross_encoder, tmp_path, monkeypatch) -> tuple:
    """A reranker on the CPU (batches of 4), three groups of three questions and six passages each, and each
    group's scores from ``score_many``: what ``score_groups`` must give group by group."""
    from ifqa.retrieval.rerank import load_reranker

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    reranker = load_reranker(str(cross_encoder), depth=10, device="cpu", max_length=48, batch_size=4)
    texts = demo_texts()[:30]
    groups = [[(q, texts[i + g :: 5][:6], [0.0] * 6) for i, q in enumerate(QUESTIONS[:3])] for g in range(3)]
    expected = [reranker.score_many(group) for group in groups]
    return reranker, groups, expected


def test_a_group_is_looked_up_as_prepared_and_handed_over_once_the_next_is_queued(cross_encoder, tmp_path, monkeypatch):
    """Each group of questions is one item of the feed: its passages are looked up where its batches are
    prepared (ahead of the device, by the feed), never every group's before the first batch is scored. Its
    scores are copied back as queued and handed over (the copy waited for) only after the next group's
    batches: the caller orders and writes them while the device scores the next group."""
    reranker, groups, expected = _three_groups(cross_encoder, tmp_path, monkeypatch)
    events = []
    looked_up, scored, copied = reranker._tokens.ids, reranker._logits, feeding.copy_back
    monkeypatch.setattr(reranker._tokens, "ids", lambda *a: events.append("ids") or looked_up(*a))
    monkeypatch.setattr(reranker, "_logits", lambda features: events.append("score") or scored(features))
    monkeypatch.setattr(feeding, "copy_back", lambda logits: events.append("copy") or copied(logits))
    got = []
    for scores in reranker.score_groups(groups):
        events.append("handed over")
        got.append(scores)
    assert got == expected
    group = ["ids"] + ["score"] * 5 + ["copy"]  # 18 pairs: batches of 4
    assert events == group + (group + ["handed over"]) * 2 + ["handed over"]


def test_on_a_gpu_only_a_groups_inputs_go_to_the_device_and_its_scores_come_back_by_its_event(
    cross_encoder, tmp_path, monkeypatch
):
    """On a GPU (the strict fake: its logits report cuda:0, and anything else sent there fails as torch fails
    without CUDA) a group's scores come back by one pinned copy and its event, and are put in order on the
    host: an order sent to the device would be a blocking copy, waiting there for the whole group."""
    from tests.fake_cuda import FakeCuda, on_gpu

    reranker, groups, expected = _three_groups(cross_encoder, tmp_path, monkeypatch)
    cuda = FakeCuda(count=1).install(monkeypatch)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self)
    monkeypatch.setattr(feeding, "to_device", lambda features, device: features)  # the model itself runs here
    scored = reranker._logits
    monkeypatch.setattr(reranker, "_logits", lambda features: on_gpu(scored(features), 0))
    reranker.device = "cuda"
    assert list(reranker.score_groups(groups)) == expected
    assert len(cuda.events) == len(groups) and cuda.pinned == len(groups)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_feed_workers_score_as_this_process_does(cross_encoder, tmp_path, monkeypatch, workers):
    """With ``IFQA_FEED_WORKERS`` on a CPU, forked workers look up and lay out the groups (tokenizing the
    passages not yet in the cache file into it): the scores are this process's own, bit for bit."""
    from ifqa.retrieval.rerank import load_reranker

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    texts = demo_texts()[:60]
    groups = [[(q, texts[i + g :: 7][:8], [0.0] * 8) for i, q in enumerate(QUESTIONS)] for g in range(5)]
    alone = load_reranker(str(cross_encoder), depth=10, device="cpu", max_length=48, batch_size=4)
    expected = list(alone.score_groups(groups))
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "fresh"))  # the workers tokenize into a file of their own
    monkeypatch.setenv("IFQA_FEED_WORKERS", workers)
    fed = load_reranker(str(cross_encoder), depth=10, device="cpu", max_length=48, batch_size=4)
    assert list(fed.score_groups(groups)) == expected
    calls = []
    cache = TokenCache(fed.encoder.tokenizer, tokenizer_identity(fed.encoder.tokenizer), tmp_path / "fresh")
    cache.tokenize = lambda texts: calls.append(texts) or []
    cache.ids([t for group in groups for _, passages, _ in group for t in passages], 512)
    assert calls == []  # every passage the workers met is in the file

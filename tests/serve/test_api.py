"""The JSON API of `ifqa serve`, against real server processes on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.serve.conftest import ANSWERS

GULF, ARISTOTLE, GERSHWIN = list(ANSWERS)


def test_health_names_the_loaded_index_reader_and_limits(reader_server, search_server):
    health = reader_server.get("/health")
    assert health["status"] == "ok"
    assert health["indexes"][0]["engine"] == "bm25s" and health["indexes"][0]["passages"] > 1000
    assert health["reader"] == {"model": "fake-model", "mode": "open", "backend": "openai"}
    assert health["known_questions"] == 24 and health["limits"]["max_k"] == 100
    bare = search_server.get("/health")
    assert bare["reader"] is None and "--model" in bare["reader_hint"] and bare["limits"]["max_k"] == 30


def test_search_returns_ranked_passages_with_stages_and_flags_for_a_known_question(search_server):
    status, result = search_server.post("/search", {"question": GULF, "k": 5})
    assert status == 200
    assert result["question"] == GULF and result["queries"] == [GULF] and result["query_mode"] == "question"
    assert [p["rank"] for p in result["passages"]] == [1, 2, 3, 4, 5]
    scores = [p["score"] for p in result["passages"]]
    assert scores == sorted(scores, reverse=True)
    assert result["known"]["answers"] == ["Florida"] and result["known"]["split"] == "demo:dev"
    assert any(p["gold"] for p in result["passages"])  # BM25 finds the Alabama passage in the demo collection
    assert all("has_answer" in p for p in result["passages"])
    assert {"alabama", "gulf", "mexico", "border"} <= set(result["terms"]) and "would" not in result["terms"]


def test_an_unknown_question_has_no_flags(search_server):
    status, result = search_server.post("/search", {"question": "If volcanoes were cold, what would lava be?", "k": 3})
    assert status == 200 and result["known"] is None
    assert all("gold" not in p for p in result["passages"]) and len(result["passages"]) == 3


def test_search_matches_ifqa_retrieve_for_the_same_question(search_server, cli):
    result = search_server.post("/search", {"question": ARISTOTLE, "k": 5})[1]
    from ifqa.api import Pipeline

    expected = [hit.id for hit in Pipeline(k=5).search(ARISTOTLE)]
    assert [p["id"] for p in result["passages"]] == expected


def test_answer_returns_prediction_reasoning_prompt_and_passages(reader_server):
    status, result = reader_server.post("/answer", {"question": GULF, "k": 4})
    assert status == 200
    answer = result["answer"]
    assert answer["prediction"] == "Florida" and answer["correct"] is True
    assert answer["model"] == "fake-model" and answer["mode"] == "open"
    assert answer["passages_in_prompt"] == 4 and answer["demos"] == 2
    assert f"Question: {GULF}" in answer["prompt"]
    assert result["passages"][0]["text"][:60] in answer["prompt"]  # the reader saw the retrieved passages
    assert len(result["passages"]) == 4


def test_answer_without_a_reader_says_how_to_configure_one(search_server):
    status, result = search_server.post("/answer", {"question": GULF})
    assert status == 503
    assert result == {
        "error": "no reader is configured; start the server with one: "
        "ifqa serve --model demo:smollm2-ifqa (the trained reader ifqa ships), or --model MODEL_NAME --base-url "
        "http://localhost:8001/v1"
    }


def test_a_failing_llm_endpoint_is_a_502_with_one_line(reader_server, fake_llm):
    fake_llm.fail_always = True
    try:
        status, result = reader_server.post("/answer", {"question": "If bees were blue, what colour would honey be?"})
    finally:
        fake_llm.fail_always = False
    assert status == 502 and "giving up after 1 attempts" in result["error"] and "\n" not in result["error"]


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"question": ""}, 400, "the question is empty"),
        ({"question": "   "}, 400, "the question is empty"),
        ({"question": "x" * 1001}, 400, "longer than 1000 characters"),
        ({"question": "a question", "k": 0}, 400, "k must be between 1 and 30, got 0"),
        ({"question": "a question", "k": 31}, 400, "k must be between 1 and 30, got 31"),
        ({"question": "a question", "k": "ten"}, 422, "k: Input should be a valid integer"),
        ({"k": 3}, 422, "question: Field required"),
        ({"question": "a question", "depth": 3}, 422, "depth: Extra inputs are not permitted"),
        (["a question"], 422, "Input should be a valid dictionary"),
        ({"question": "a question", "k": True}, 422, "k: Input should be a valid integer"),
        ({"question": 42}, 422, "question: Input should be a valid string"),
    ],
)
def test_bad_requests_get_a_clear_4xx(search_server, body, status, message):
    got, result = search_server.post("/search", body)
    assert got == status and message in result["error"] and set(result) == {"error"}


def test_malformed_oversized_and_unsized_bodies(search_server):
    assert search_server.post("/search", None, raw=b"{not json") == (
        422,
        {"error": "the request body is not valid JSON"},
    )
    status, result = search_server.post("/search", None, raw=json.dumps({"question": "q" * 20000}).encode())
    assert status == 413 and "16384 bytes" in result["error"]
    connection = http.client.HTTPConnection("127.0.0.1", search_server.port, timeout=30)
    connection.request(
        "POST",
        "/search",
        body=iter([b'{"question": "chunked"}']),
        headers={"Content-Type": "application/json"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert response.status == 411 and "Content-Length" in json.loads(response.read())["error"]
    connection.close()


def test_concurrent_requests_are_not_mixed(reader_server):
    questions = list(ANSWERS) + [
        f"If the river Thames ran through {city}, what would change?"
        for city in ("Paris", "Berlin", "Madrid", "Oslo", "Rome")
    ]
    expected = {
        q: [p["id"] for p in reader_server.post("/search", {"question": q, "k": 5})[1]["passages"]] for q in questions
    }
    barrier = threading.Barrier(16)

    def ask(n: int):
        question = questions[n % len(questions)]
        barrier.wait()
        path = "/answer" if question in ANSWERS else "/search"
        return question, reader_server.post(path, {"question": question, "k": 5})

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(ask, range(48)))
    for question, (status, result) in results:
        assert status == 200 and result["question"] == question
        assert [p["id"] for p in result["passages"]] == expected[question]
        if question in ANSWERS:
            assert result["answer"]["prediction"] == ANSWERS[question]
            assert f"Question: {question}" in result["answer"]["prompt"]


def test_the_page_and_its_assets_are_served_by_the_process(search_server):
    with urllib.request.urlopen(search_server.url + "/") as response:
        page = response.read().decode()
    assert response.headers["content-type"].startswith("text/html")
    assert '<script src="/static/app.js">' in page and "http" not in page.split("<body>")[1].split("<noscript>")[0]
    for asset in ("/static/app.js", "/static/style.css"):
        with urllib.request.urlopen(search_server.url + asset) as response:
            body = response.read()
        assert body and b"http://" not in body and b"https://" not in body  # nothing fetched from elsewhere
    examples = search_server.get("/examples")["questions"]
    assert examples[0] == GULF and len(examples) == 6


def test_an_unexpected_failure_is_a_500_without_a_stack_trace(caplog):
    import uvicorn

    from ifqa.serve.app import create_app
    from ifqa.serve.service import Limits
    from tests.serve.conftest import free_port

    class Broken:
        limits = Limits()

        def search(self, question, k):
            raise RuntimeError("secret internal detail")

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(Broken()), host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            threading.Event().wait(0.05)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/search", data=b'{"question": "q"}', headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as failure:
            urllib.request.urlopen(request, timeout=30)
        body = failure.value.read().decode()
        assert failure.value.code == 500
        assert json.loads(body) == {"error": "internal error (the server log has the details)"}
        assert "secret" not in body and "Traceback" not in body
    finally:
        server.should_exit = True
        thread.join(10)


def test_reranking_shows_both_ranks_and_matches_ifqa_retrieve(rerank_server, cli, tmp_path):
    results = {
        q: rerank_server.post("/search", {"question": q, "k": 10}) for q in rerank_server.get("/examples")["questions"]
    }
    assert all(status == 200 for status, _ in results.values())
    result = results[GULF][1]
    assert result["reranker"]["depth"] == 20 and "control" in result["reranker"]["kind"]
    passages = result["passages"]
    assert [p["rank"] for p in passages] == list(range(1, 11))
    assert all(1 <= p["first_stage_rank"] <= 20 for _, r in results.values() for p in r["passages"])
    assert any(p["first_stage_rank"] != p["rank"] for _, r in results.values() for p in r["passages"])  # it moved some
    run = tmp_path / "run.jsonl"
    made = cli(
        "retrieve", "--k", "10", "--rerank", rerank_server.model, "--rerank-depth", "20", "-o", run, "--no-progress"
    )
    assert made.returncode == 0, made.stderr
    from ifqa.artifacts import read_run

    expected = next(r for r in read_run(run) if r["question"] == GULF)
    assert [p["id"] for p in passages] == [c["id"] for c in expected["ctxs"]]


def test_unknown_paths_and_methods_get_json_errors(search_server):
    import urllib.error

    for path, code in (("/nope", 404), ("/search", 405)):
        with pytest.raises(urllib.error.HTTPError) as failure:
            urllib.request.urlopen(search_server.url + path, timeout=30)
        assert failure.value.code == code and set(json.loads(failure.value.read())) == {"error"}


def test_wiqa_context_mode_reads_the_known_questions_procedure_and_answers_a_label(fake_llm, tmp_path):
    from ifqa.datasets import QuestionSource
    from tests.serve.conftest import Server

    question = QuestionSource("wiqa-demo", "dev").load().examples[0]
    fake_llm.answers[question.question] = "More."
    server = Server(
        [
            "--setting",
            "wiqa-demo",
            "--mode",
            "context",
            "--model",
            "m",
            "--base-url",
            fake_llm.url,
            "--cache",
            str(tmp_path / "cache.sqlite"),
            "--demos",
            "1",
            "--retries",
            "0",
        ],
        tmp_path / "log",
    )
    try:
        status, result = server.post("/answer", {"question": question.question, "k": 3})
        assert status == 200 and result["answer"]["prediction"] == "more"
        assert question.context[0] in result["answer"]["prompt"]  # the procedure, not retrieved passages
        status, result = server.post("/answer", {"question": "If it snowed in July, what would change?"})
        assert status == 400 and "not in the loaded split" in result["error"]
    finally:
        server.stop()

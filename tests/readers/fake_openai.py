"""A small server speaking the OpenAI chat and completions protocol, for the reader tests.

It answers from a table of known questions, and can be told to fail: a list of planned
failures ("401", "429", "500", "malformed", "slow") is consumed by the next requests.

``thinking`` makes it a reasoning model, in one of the shapes servers send (``SHAPES``): inline
``<think>`` / ``<thinking>`` / ``<reasoning>`` blocks, a block whose opening tag the chat template
wrote (``open``), or a ``reasoning_content`` / ``reasoning`` field. Its thinking holds a wrong draft
answer on a line of its own, as real thinking does; a word is a token, so ``max_tokens`` cuts it
(finish_reason ``length``), stop sequences apply to the whole text as on a server that parses no
reasoning, and a thinking budget (vLLM's ``thinking_token_budget``) closes the thinking early.
"""

from __future__ import annotations

import http.server
import json
import random
import re
import threading
import time
from collections.abc import Callable

SHAPES = ("think", "thinking", "reasoning-tag", "open", "reasoning_content", "reasoning")


class FakeOpenAI:
    def __init__(
        self,
        answers: dict[str, str],
        sampled: dict[int, str] | None = None,
        latency: float = 0.0,
        failure_rate: float = 0.0,
        seed: int = 0,
    ):
        self.thinking: str | None = None  # one of SHAPES: answer as a reasoning model
        self.judge_says: Callable[[str], str] | None = None  # a judge's reply to a prediction
        self.script: Callable[[str, dict], str] | None = None  # any reply, scripted per case (prompt, body)
        self.thinking_words = 60
        self.tags: tuple[str, str] | None = None  # the thinking's opening and closing tags (default <think>)
        self.refuse: set[str] = set()  # request keys answered with HTTP 400 (a parameter the server does not take)
        self.answers = answers  # question -> answer
        self.sampled = sampled or {}  # seed -> answer, used when temperature > 0
        self.failures: list[str] = []
        self.quote_back: Callable[[str], str] = lambda key: key  # how a 401 quotes the refused key (whole, cut, ...)
        self.paths: list[str] = []
        self.fail_always = False
        self.latency, self.failure_rate, self.random = latency, failure_rate, random.Random(seed)
        self.requests: list[dict] = []
        self.in_flight = self.peak_in_flight = 0  # requests in their latency now, and the most at once
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def judged(self, prompt: str) -> str:
        """A judge's reply: yes when a gold answer occurs in the prediction (``judge_says`` overrides)."""
        answers = re.search(r"Gold answer\(s\): (.*)", prompt).group(1).split(" | ")
        prediction = re.search(r"Predicted answer: (.*)", prompt).group(1)
        if self.judge_says is not None:
            return self.judge_says(prediction)
        found = any(a.lower() in prediction.lower() for a in answers)
        return f"The prediction {'names' if found else 'does not name'} the gold answer.\nVerdict: {'yes' if found else 'no'}"

    def reply(self, prompt: str, body: dict) -> str:
        if self.script is not None:
            text = self.script(prompt, body)
            for stop in body.get("stop") or []:  # as a server does: the text up to a stop, the stop left out
                text = text.split(stop, 1)[0]
            return text
        if "Predicted answer:" in prompt:
            return self.judged(prompt)
        question = re.findall(r"Question: (.*)", prompt)[-1].strip()
        if prompt.rstrip().endswith("Background document:"):
            return f"A background document written for: {question}"
        answer = self.answers.get(question, "I do not know")
        if body.get("temperature", 0) > 0 and body.get("seed") in self.sampled:
            answer = self.sampled[body["seed"]]
        if "step by step" in prompt:
            return f"The premise changes one fact.\nWorking it through carefully.\nSo the answer is {answer}."
        return f" {answer}\n"

    def reasoning_reply(self, prompt: str, body: dict) -> tuple[str, str, str]:
        """``(content, reasoning field, finish_reason)`` of a reasoning model answering ``prompt``."""
        answer = self.reply(prompt, body).strip()
        filler = " ".join(f"step{i}" for i in range(self.thinking_words - 8))
        thought = f"Let me think about the premise.\n\nunknown. Wait, reconsider.\n\n{filler}\nI am sure now."
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 10**6
        budget = body.get("thinking_token_budget")
        if budget is not None and len(thought.split()) > budget:
            thought = " ".join(thought.split()[:budget])
        tag = {"thinking": "thinking", "reasoning-tag": "reasoning"}.get(self.thinking, "think")
        opening, closing = self.tags or (f"<{tag}>", f"</{tag}>")
        opening = "" if self.thinking == "open" else opening
        field = self.thinking in ("reasoning_content", "reasoning")
        text = answer if field else f"{opening}{thought}{closing}\n\n{answer}"
        for stop in body.get("stop") or []:
            text = text.split(stop, 1)[0]
        thinking_words = len(thought.split(" ")) if field else 0
        words = text.split(" ")
        finish = "stop"
        if thinking_words + len(words) > limit:
            finish = "length"
            if thinking_words >= limit:
                thought, text = " ".join(thought.split(" ")[:limit]), ""
            else:
                text = " ".join(words[: limit - thinking_words])
        return text, (thought if field else ""), finish

    def _handler(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append(body)
                    fake.paths.append(self.path)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    failure = "500" if fake.fail_always else (fake.failures.pop(0) if fake.failures else None)
                    if failure is None and fake.random.random() < fake.failure_rate:
                        failure = fake.random.choice(["429", "500", "malformed"])
                if fake.latency:
                    with fake.lock:
                        fake.in_flight += 1
                        fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                    time.sleep(fake.latency)
                    with fake.lock:
                        fake.in_flight -= 1
                if failure == "401":  # as some servers do: the refused key quoted back
                    header = self.headers.get("Authorization", "")
                    key, query = header.removeprefix("Bearer "), self.path.partition("?")[2]
                    return self._send(
                        401,
                        {
                            "error": {
                                "message": f"Incorrect API key provided: {fake.quote_back(key)}. See the docs. "
                                f"(header: {header}; query: {query})",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                if failure in ("429", "500"):
                    return self._send(int(failure), {"error": {"message": "try later", "type": "server_error"}})
                if failure == "slow":
                    time.sleep(2)
                if failure == "malformed":
                    return self._send(200, {"unexpected": True})
                refused = sorted(fake.refuse & set(body))
                if refused:
                    return self._send(400, {"error": {"message": f"unsupported parameter: {refused[0]}"}})
                chat = self.path.split("?")[0].endswith("/chat/completions")
                prompt = body["messages"][-1]["content"] if chat else body["prompt"]
                reasoning, finish = "", "stop"
                if fake.thinking:
                    text, reasoning, finish = fake.reasoning_reply(prompt, body)
                else:
                    text = fake.reply(prompt, body)
                message = {"role": "assistant", "content": text if text or finish != "length" else None}
                if reasoning:
                    message[fake.thinking] = reasoning
                choice = {
                    "index": 0,
                    "finish_reason": finish,
                    **({"message": message} if chat else {"text": text}),
                }
                spent = len(text.split()) + len(reasoning.split())
                usage = {
                    "prompt_tokens": len(prompt.split()),
                    "completion_tokens": spent,
                    "total_tokens": len(prompt.split()) + spent,
                }
                if reasoning:
                    usage["completion_tokens_details"] = {"reasoning_tokens": len(reasoning.split())}
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion" if chat else "text_completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [choice],
                        "usage": usage,
                    },
                )

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

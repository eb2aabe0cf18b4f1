"""A small server speaking the OpenAI chat and completions protocol, for the reader tests.

It answers from a table of known questions, and can be told to fail: a list of planned
failures ("401", "429", "500", "malformed", "slow") is consumed by the next requests.
"""

from __future__ import annotations

import http.server
import json
import random
import re
import threading
import time
from collections.abc import Callable


class FakeOpenAI:
    def __init__(
        self,
        answers: dict[str, str],
        sampled: dict[int, str] | None = None,
        latency: float = 0.0,
        failure_rate: float = 0.0,
        seed: int = 0,
    ):
        self.answers = answers  # question -> answer
        self.sampled = sampled or {}  # seed -> answer, used when temperature > 0
        self.failures: list[str] = []
        self.quote_back: Callable[[str], str] = lambda key: key  # how a 401 quotes the refused key (whole, cut, ...)
        self.paths: list[str] = []
        self.fail_always = False
        self.latency, self.failure_rate, self.random = latency, failure_rate, random.Random(seed)
        self.requests: list[dict] = []
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

    def reply(self, prompt: str, body: dict) -> str:
        question = re.findall(r"Question: (.*)", prompt)[-1].strip()
        if prompt.rstrip().endswith("Background document:"):
            return f"A background document written for: {question}"
        answer = self.answers.get(question, "I do not know")
        if body.get("temperature", 0) > 0 and body.get("seed") in self.sampled:
            answer = self.sampled[body["seed"]]
        if "step by step" in prompt:
            return f"The premise changes one fact.\nWorking it through carefully.\nSo the answer is {answer}."
        return f" {answer}\n"

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
                    time.sleep(fake.latency)
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
                chat = self.path.split("?")[0].endswith("/chat/completions")
                prompt = body["messages"][-1]["content"] if chat else body["prompt"]
                text = fake.reply(prompt, body)
                choice = {
                    "index": 0,
                    "finish_reason": "stop",
                    **({"message": {"role": "assistant", "content": text}} if chat else {"text": text}),
                }
                usage = {
                    "prompt_tokens": len(prompt.split()),
                    "completion_tokens": len(text.split()),
                    "total_tokens": len(prompt.split()) + len(text.split()),
                }
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

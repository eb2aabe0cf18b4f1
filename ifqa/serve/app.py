"""The HTTP face of ``QAService``: a FastAPI app with the page, ``/search``, ``/answer`` and ``/health``.

Handlers are plain (sync) functions, so FastAPI runs them in its thread pool and a slow answer does
not block a search. Clients get JSON errors of one line, ``{"error": "..."}``: 400 for a question
or k the service refuses, 413/411 for bodies that are too large or unsized, 422 for malformed
JSON, 502 when the LLM endpoint fails, 503 for an answer without a configured reader, 500 (logged
here with its traceback, never sent) for anything else.
"""

from __future__ import annotations

import logging
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator
from starlette.exceptions import HTTPException

from ifqa.errors import IfqaError
from ifqa.io import SURROGATE_PROBLEM, unpaired_surrogate
from ifqa.redact import redact
from ifqa.serve.service import QAService, ReaderMissing, UpstreamError

log = logging.getLogger(__name__)

PAGE = resources.files("ifqa.serve") / "page"
EXAMPLE_QUESTIONS = [
    "If Los Angeles was on the east coast of the U.S., what would be the time difference between Los Angeles and Paris?",
    "If the Eiffel Tower had been built in London, which river would it stand beside?",
    "If water boiled at 50 degrees Celsius at sea level, what would its boiling point be in Fahrenheit?",
]


class Ask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: StrictStr = Field(description="The question, as a user would type it.")
    k: StrictInt = Field(10, description="Passages to return (at most the server's max_k).")

    @field_validator("question")
    @classmethod
    def unicode_text(cls, question: str) -> str:
        """JSON can carry half of a UTF-16 pair (``"\\ud800"``): not text anything downstream can read."""
        if unpaired_surrogate(question):
            raise ValueError(SURROGATE_PROBLEM)
        return question


def _error(status: int, message: str) -> JSONResponse:
    """``{"error": one line}``, secrets redacted (an endpoint's refusal may quote the key it was sent)."""
    return JSONResponse({"error": redact(" ".join(message.split()))}, status_code=status)


def create_app(service: QAService) -> FastAPI:
    app = FastAPI(
        title="ifqa", summary="Counterfactual QA: retrieve, rerank, read.", docs_url=None, redoc_url=None
    )  # the stock docs pages load scripts from a CDN

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        if request.method == "POST":
            length = request.headers.get("content-length")
            if length is None:
                return _error(411, "send a Content-Length header")
            if not length.isdigit() or int(length) > service.limits.max_body_bytes:
                return _error(413, f"request body over {service.limits.max_body_bytes} bytes")
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            return _error(422, "the request body is not valid JSON")
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        return _error(422, f"{where + ': ' if where else ''}{first.get('msg', 'invalid request')}")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:  # 404, 405 ...
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(ReaderMissing)
    async def no_reader(request: Request, exc: ReaderMissing) -> JSONResponse:
        return _error(503, str(exc))

    @app.exception_handler(UpstreamError)
    async def upstream(request: Request, exc: UpstreamError) -> JSONResponse:
        return _error(502, str(exc))

    @app.exception_handler(IfqaError)
    async def refused(request: Request, exc: IfqaError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return _error(500, "internal error (the server log has the details)")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(str(PAGE / "index.html"), media_type="text/html")

    app.mount("/static", StaticFiles(directory=str(PAGE)), name="static")

    @app.post("/search", summary="Question -> ranked passages, with the pipeline stages' outputs.")
    def search(ask: Ask) -> dict:
        return service.search(ask.question, ask.k)

    @app.post("/answer", summary="Question -> answer, reasoning and the passages the reader saw.")
    def answer(ask: Ask) -> dict:
        return service.answer(ask.question, ask.k)

    @app.get("/health", summary="Loaded indexes and models, and the request limits.")
    def health() -> dict:
        return service.health()

    @app.get("/examples", summary="Example questions for the page (known questions first).")
    def examples() -> dict:
        known = [example.question for _, example in list(service.known.values())[:5]]
        return {"questions": known + EXAMPLE_QUESTIONS[: max(0, 6 - len(known))]}

    return app

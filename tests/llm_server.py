"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests (real HTTP, no model).

    with ScriptedLLM(reply=lambda body: "Globex [1]") as llm:
        spec = LLMSpec(url=llm.url, model="scripted", cache_dir=...)

``reply(body)`` decides each answer from the request body (the chat messages); the queue
:meth:`ScriptedLLM.fail_next` makes the next requests answer an HTTP status (429, 503, ...)
or stall for some seconds before answering, or (``"break"``) send the first half of a
streamed answer and drop the connection. Every request body is kept in ``requests``. A body
with ``"stream": true`` is answered as server-sent events, one word a chunk, the usage last.
The ``llm_server`` fixture (tests/conftest.py) gives one per test.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def words(text: str) -> int:
    return len(text.split())


def first_memory(body: dict[str, Any]) -> str:
    """An answerer: the first numbered memory of the prompt, cited as [1]."""
    user = body["messages"][-1]["content"]
    found = re.search(r"^1\. (.*)$", user, re.M)
    return f"{found.group(1)} [1]" if found else "not mentioned"


def accept_all(body: dict[str, Any]) -> str:
    """A judge that accepts every answer."""
    return "CORRECT"


def exact_judge(body: dict[str, Any]) -> str:
    """A judge that accepts an answer only when it contains the gold answer's text."""
    user = body["messages"][-1]["content"]
    gold = re.search(r"^Gold answer: (.*)$", user, re.M)
    given = re.search(r"^Answer to grade: (.*)$", user, re.M)
    ok = gold and given and gold.group(1).strip().lower() in given.group(1).strip().lower()
    return "CORRECT" if ok else "WRONG"


class ScriptedLLM:
    """The server (module docstring); a context manager that starts and stops it."""

    def __init__(self, reply: Callable[[dict[str, Any]], str] = first_memory,
                 model: str = "scripted-model"):
        self.reply = reply
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script: list[int | float | str] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def fail_next(self, *steps: int | float | str) -> None:
        """Queue answers for the next requests: an int is that HTTP status, a float stalls
        that many seconds and then answers normally, ``"break"`` breaks a stream mid-answer
        (the promised length is never sent), ``"garbage"`` answers 200 with a body that is not
        JSON, ``"array"`` streams an event that is JSON but not an object mid-answer."""
        with self._lock:
            self._script.extend(steps)

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_step(self) -> int | float | str | None:
        with self._lock:
            return self._script.pop(0) if self._script else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json",
                      extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                with llm._lock:
                    llm.requests.append(body)
                    llm.headers.append(dict(self.headers))
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, b'{"error": "no such route"}')
                with llm._lock:
                    llm.in_flight += 1
                    llm.max_in_flight = max(llm.max_in_flight, llm.in_flight)
                try:
                    self._answer(body)
                finally:
                    with llm._lock:
                        llm.in_flight -= 1

            def _answer(self, body: dict[str, Any]) -> None:
                step = llm._next_step()
                if isinstance(step, int):
                    return self._send(step, json.dumps({"error": f"scripted {step}"}).encode(),
                                      extra={"Retry-After": "0"} if step == 429 else None)
                if isinstance(step, float):
                    time.sleep(step)
                if step == "garbage":
                    return self._send(200, b"<html>upstream proxy says hi</html>", "text/html")
                text = llm.reply(body)
                prompt = sum(words(m["content"]) for m in body["messages"])
                usage = {"prompt_tokens": prompt, "completion_tokens": words(text),
                         "total_tokens": prompt + words(text)}
                if not body.get("stream"):
                    out = {"id": "cmpl-1", "object": "chat.completion", "model": llm.model,
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": text}}],
                           "usage": usage}
                    return self._send(200, json.dumps(out).encode())
                pieces = [w + " " for w in text.split(" ")]
                pieces[-1] = pieces[-1].rstrip(" ")
                events = [{"model": llm.model, "choices": [{"index": 0,
                                                            "delta": {"content": p}}]}
                          for p in pieces]
                events.append({"model": llm.model, "choices": [], "usage": usage})
                stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
                whole = (stream + "data: [DONE]\n\n").encode()
                if step == "array":  # a stray event that is JSON but no object, mid-answer
                    events.insert(len(pieces) // 2, [1, 2])  # type: ignore[arg-type]
                    whole = ("".join(f"data: {json.dumps(e)}\n\n" for e in events)
                             + "data: [DONE]\n\n").encode()
                if step != "break":
                    return self._send(200, whole, "text/event-stream")
                half = "".join(f"data: {json.dumps(e)}\n\n" for e in events[:len(pieces) // 2])
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(whole)))
                self.end_headers()
                self.wfile.write(half.encode())
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        return Handler

"""A stand-in llama.cpp server for tests that must not wait for llama-server: a loopback HTTP server (a thread per
request) answering /v1/models, /health, /metrics, /slots, /tokenize, /detokenize and /completion in llama.cpp's
shapes, computed by the bundled model here (the next-token distribution, greedy tokens, streamed as llama.cpp
streams them). The real server is tested against our engine in tests/test_engines.py."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from inference.core.kv_cache import new_cache
from inference.core.measuring import Stopwatch

NOT_FOUND = {"error": {"code": 404, "message": "File Not Found"}}


class FakeLlamaServer:
    def __init__(self, loaded, n_probs_cap: int | None = None, tamper: dict[str, Callable] | None = None, hold=None):
        self.loaded = loaded
        self.n_probs_cap = n_probs_cap  # answer at most this many probabilities (a server that truncates)
        self.tamper = tamper or {}  # a misbehaving server: {path: answer -> the answer sent instead}
        self.hold = hold  # a threading.Event: every stream pauses after its first token until it is set
        self.requests: list[tuple[str, dict]] = []
        self.active: dict[int, int] = {}  # request number -> tokens in its cache, while it decodes
        self.lock, self.numbers = threading.Lock(), itertools.count()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # chunked streams: one cut off mid-way is an error, not an end

            def log_message(self, *args):
                pass

            def _send(self, body, status: int = 200, content_type: str = "application/json"):
                body = fake.tamper[self.path](body) if status == 200 and self.path in fake.tamper else body
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for header in (("Content-Type", content_type), ("Content-Length", str(len(data)))):
                    self.send_header(*header)
                self.send_header("Connection", "close")  # a stopped server then refuses the next request
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                answers = {"/v1/models": fake.models, "/health": dict, "/slots": fake.slots}
                if self.path == "/metrics":
                    self._send(fake.metrics().encode(), content_type="text/plain")
                elif self.path in answers:
                    self._send(answers[self.path]())
                else:
                    self._send(NOT_FOUND, 404)

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake.lock:
                    fake.requests.append((self.path, payload))
                tokenizer = fake.loaded.tokenizer
                if self.path == "/completion" and payload.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()

                    def send(event: dict) -> None:
                        data = f"data: {json.dumps(event)}\n\n".encode()
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()

                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        send(fake.completion(payload, send))
                        self.wfile.write(b"0\r\n\r\n")
                elif self.path == "/completion":
                    self._send(fake.completion(payload))
                elif self.path == "/tokenize":
                    self._send({"tokens": tokenizer(payload["content"], add_special_tokens=False)["input_ids"]})
                elif self.path == "/detokenize":
                    self._send({"content": tokenizer.decode(payload["tokens"])})
                else:
                    self._send(NOT_FOUND, 404)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def models(self) -> dict:
        info = self.loaded.info
        meta = {"n_vocab": info.vocab_size, "n_ctx_train": info.context, "n_params": info.parameters}
        meta["size"] = info.weight_bytes
        return {"data": [{"id": "/fake/storyteller-model-f32.gguf", "owned_by": "llamacpp", "meta": meta}]}

    def metrics(self) -> str:
        with self.lock:
            counts = {"requests_total": len(self.requests), "requests_processing": len(self.active)}
        return "".join(f"llamacpp:{name} {n}\n" for name, n in (counts | {"requests_deferred": 0}).items())

    def slots(self) -> list[dict]:
        with self.lock:
            active = list(self.active.values())
        return [{"id": i, "n_ctx": 512, "is_processing": True, "n_prompt_tokens": n} for i, n in enumerate(active)]

    @torch.inference_mode()
    def completion(self, payload: dict, send: Callable[[dict], None] | None = None) -> dict:
        """One /completion: the first position's top `n_probs` and `n_predict` greedy tokens, one forward pass each on
        a cache of the request's own; with `send`, each token is sent as an event first, the answer is the last."""
        model, ids, decode = self.loaded.model, list(payload["prompt"]), self.loaded.tokenizer.decode
        cache, tokens, n_predict = new_cache(model.config), [], payload.get("n_predict", 1)
        with Stopwatch() as prefill:
            logits = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True).logits[0, -1]
        logprobs = logits.double().log_softmax(-1)
        top = torch.topk(logprobs, min(payload.get("n_probs", 0), self.n_probs_cap or len(logprobs)))
        items = [{"id": int(i), "token": "", "logprob": float(v)} for v, i in zip(top.values, top.indices)]
        chosen = int(logprobs.argmax())
        number = next(self.numbers)
        try:
            for n in range(n_predict):
                tokens.append(int(logits.argmax()))
                with self.lock:
                    self.active[number] = len(ids) + len(tokens)
                if send is not None:
                    send({"content": decode(tokens[-1:]), "tokens": tokens[-1:], "stop": False})
                    if self.hold is not None:
                        self.hold.wait(30)
                if n + 1 < n_predict:
                    logits = model(input_ids=torch.tensor([tokens[-1:]]), past_key_values=cache, use_cache=True).logits[
                        0, -1
                    ]
        finally:
            with self.lock:
                self.active.pop(number, None)
        return {
            "content": "" if send else decode(tokens),
            "tokens": [] if send else tokens,
            "stop": True,
            "stop_type": "limit",
            "completion_probabilities": [{"id": chosen, "logprob": float(logprobs[chosen]), "top_logprobs": items}],
            "timings": {"cache_n": 0, "prompt_n": len(ids), "prompt_ms": prefill.ms, "predicted_n": len(tokens)},
        }

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


StreamingStandIn = FakeLlamaServer  # the name the serving replay's tests know it by

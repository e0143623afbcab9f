"""A stand-in llama.cpp server for page and Step tests that must not wait for llama-server: a loopback HTTP
server (stdlib, one thread) answering /v1/models, /health, /tokenize, /detokenize, /completion and /metrics in
llama.cpp's shapes, its distributions computed by the bundled model in this process. The real server is tested
against our engine in tests/test_engines.py; this one tests what the app does with the answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


class FakeLlamaServer:
    def __init__(self, loaded, n_probs_cap: int | None = None, tamper: dict[str, Callable[[dict], dict]] | None = None):
        self.loaded = loaded
        self.n_probs_cap = n_probs_cap  # answer at most this many probabilities (a server that truncates)
        # A misbehaving server: {"/v1/models" or "/completion": answer -> the answer sent instead}.
        self.tamper = tamper or {}
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body, content_type="application/json"):
                if status == 200 and self.path in fake.tamper:
                    body = fake.tamper[self.path](body)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models":
                    info = fake.loaded.info
                    self._send(
                        200,
                        {
                            "data": [
                                {
                                    "id": "/fake/storyteller-model-f32.gguf",
                                    "owned_by": "llamacpp",
                                    "meta": {
                                        "n_vocab": info.vocab_size,
                                        "n_ctx_train": info.context,
                                        "n_params": info.parameters,
                                        "size": info.weight_bytes,
                                    },
                                }
                            ]
                        },
                    )
                elif self.path == "/health":
                    self._send(200, {"status": "ok"})
                elif self.path == "/metrics":
                    self._send(200, f"llamacpp:requests_total {len(fake.requests)}\n".encode(), "text/plain")
                else:
                    self._send(404, {"error": {"code": 404, "message": "File Not Found"}})

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake.lock:
                    fake.requests.append((self.path, payload))
                tokenizer = fake.loaded.tokenizer
                if self.path == "/tokenize":
                    self._send(200, {"tokens": tokenizer(payload["content"], add_special_tokens=False)["input_ids"]})
                elif self.path == "/detokenize":
                    self._send(200, {"content": tokenizer.decode(payload["tokens"])})
                elif self.path == "/completion":
                    self._send(200, fake.completion(payload))
                else:
                    self._send(404, {"error": {"code": 404, "message": "File Not Found"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def completion(self, payload: dict) -> dict:
        ids = payload["prompt"]
        with torch.inference_mode():
            logits = self.loaded.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1].double()
        logprobs = logits.log_softmax(-1)
        n = min(payload.get("n_probs", 0), self.n_probs_cap or len(logprobs))
        top = torch.topk(logprobs, n)
        items = [{"id": int(i), "token": "", "bytes": [], "logprob": float(v)} for v, i in zip(top.values, top.indices)]
        chosen = int(logprobs.argmax())
        return {
            "content": "",
            "tokens": [chosen],
            "stop": True,
            "completion_probabilities": [{"id": chosen, "logprob": float(logprobs[chosen]), "top_logprobs": items}],
            "timings": {"cache_n": 0, "prompt_n": len(ids), "prompt_ms": 1.0, "predicted_n": 1, "predicted_ms": 0.0},
        }

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

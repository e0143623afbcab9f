"""A stand-in for llama-server's streaming `/completion`, for replay tests that must not wait for the real build:
a loopback HTTP server (stdlib, a thread per request) that decodes greedily with the bundled model in this process,
one forward pass per token on its own KV cache, and streams each token as llama.cpp does (`data: {...}` events with
`content` and `tokens`, a last event with `stop` and `timings`). It also answers `/slots` and `/metrics` in
llama.cpp's shapes. The real server is tested in tests/test_serving_engine.py; this one tests what the replay does
with streams that overlap."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from transformers import DynamicCache


class StreamingStandIn:
    def __init__(self, loaded, hold=None):
        self.loaded = loaded
        self.hold = hold  # a threading.Event: when given, every stream pauses after its first token until it is set
        self.active: dict[int, int] = {}  # request number -> tokens in its cache
        self.lock = threading.Lock()
        self.counter = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, body: bytes, content_type: str):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                with fake.lock:
                    active = dict(fake.active)
                if self.path == "/slots":
                    slots = [
                        {"id": i, "n_ctx": 512, "is_processing": True, "n_prompt_tokens": n}
                        for i, n in enumerate(active.values())
                    ]
                    self._send(json.dumps(slots).encode(), "application/json")
                elif self.path == "/metrics":
                    text = f"llamacpp:requests_processing {len(active)}\nllamacpp:requests_deferred 0\n"
                    self._send(text.encode(), "text/plain")
                else:
                    self._send(b'{"status":"ok"}', "application/json")

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    fake.stream(payload, self._event)
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _event(self, event: dict):
                data = f"data: {json.dumps(event)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @torch.inference_mode()
    def stream(self, payload: dict, send) -> None:
        model, tokenizer = self.loaded.model, self.loaded.tokenizer
        with self.lock:
            self.counter += 1
            number = self.counter
        ids = list(payload["prompt"])
        started = time.perf_counter()
        cache = DynamicCache(config=model.config)
        logits = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True).logits[0, -1]
        prompt_ms = (time.perf_counter() - started) * 1000
        try:
            for _ in range(payload["n_predict"]):
                token = int(logits.argmax())
                with self.lock:
                    self.active[number] = len(ids) + 1
                send({"content": tokenizer.decode([token]), "tokens": [token], "stop": False})
                if self.hold is not None:
                    self.hold.wait(30)
                ids.append(token)
                logits = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True).logits[0, -1]
        finally:
            with self.lock:
                self.active.pop(number, None)
        send(
            {
                "content": "",
                "tokens": [],
                "stop": True,
                "timings": {"prompt_n": len(payload["prompt"]), "prompt_ms": prompt_ms, "cache_n": 0},
            }
        )

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

#!/usr/bin/env bash
# The one serving engine of a lecture hall (docs/CLASSROOM.md), on the engine host: llama-server with 8 slots
# decoding every student's request together. It listens on every address of this host (`--host 0.0.0.0`, which
# overrides serve's loopback; checked: serve still finds it on 127.0.0.1): let only the app hosts reach port 8080,
# e.g. `ufw allow from 10.0.0.0/24 to any port 8080` and nothing else. App hosts: ENGINE_URL=http://<this host>:8080
set -euo pipefail
cd "$(dirname "$0")/../.."
python -m inference.engines llamacpp build   # once, ~5 min on 2 idle cores
exec python -c "
from inference.engines import llamacpp
server = llamacpp.serve(parallel=8, port=8080, extra_args=['--host', '0.0.0.0'])
print('llama-server on port 8080 of every address', flush=True)
server.process.wait()
"

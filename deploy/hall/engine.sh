#!/usr/bin/env bash
# The one serving engine of a lecture hall (docs/CLASSROOM.md), on the engine host: llama-server with 8 slots
# decoding every student's request together, on the private address of this host so the app hosts reach it.
#   ENGINE_ADDRESS=10.0.0.3 deploy/hall/engine.sh      (app hosts: ENGINE_URL=http://10.0.0.3:8080)
set -euo pipefail
cd "$(dirname "$0")/../.."
python -m inference.engines llamacpp build   # once, ~5 min on 2 idle cores
exec python -c "
from inference.engines import llamacpp
server = llamacpp.serve(parallel=8, port=8080, extra_args=['--host', '${ENGINE_ADDRESS:?the private address of this host}'])
print('llama-server on', '${ENGINE_ADDRESS}:8080', flush=True)
server.process.wait()
"

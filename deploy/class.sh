#!/usr/bin/env bash
# A class on one machine (docs/CLASSROOM.md): one llama-server for every student, two app processes in front of it,
# nginx (deploy/nginx.conf) in front of them. tests/test_two_hosts.py checks these flags and variables.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m inference.engines llamacpp build                                  # once, ~5 min on 2 idle cores
python -m inference.engines llamacpp serve --parallel 8 --port 8080 &       # the bundled model, f32, on 127.0.0.1
export INFERENCE_LAB_ENGINES="llama.cpp=http://127.0.0.1:8080" INFERENCE_LAB_ALLOW_LOCAL_FOLDERS=0 INFERENCE_LAB_ALLOW_HUB=0
export INFERENCE_LAB_PUBLIC=1
for port in 8501 8502; do
  streamlit run app.py --server.headless true --server.address 127.0.0.1 --server.port $port \
    --server.fileWatcherType none --browser.gatherUsageStats false &
done
wait

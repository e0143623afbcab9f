#!/usr/bin/env bash
# One app host of a lecture hall (docs/CLASSROOM.md): run it on every app host, with the private address of this host.
# Every host shares the class store (PostgreSQL, deploy/hall/database.sh) and the serving engine
# (deploy/hall/engine.sh); nginx (deploy/hall/nginx.conf) sends each browser to one host.
# tests/test_two_hosts.py runs these flags and variables.
#   HOST_ADDRESS=10.0.0.11 CLASS_DB=postgresql://lab:SECRET@10.0.0.2:5432/lab ENGINE_URL=http://10.0.0.3:8080 \
#     deploy/hall/app-host.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

export INFERENCE_LAB_CLASS_DB="${CLASS_DB:?postgresql://user:password@db-host:5432/dbname}"
export INFERENCE_LAB_ENGINES="llama.cpp=${ENGINE_URL:?http://engine-host:8080}"
export INFERENCE_LAB_PUBLIC=1 INFERENCE_LAB_ALLOW_LOCAL_FOLDERS=0 INFERENCE_LAB_ALLOW_HUB=0
exec streamlit run app.py --server.headless true --server.address "${HOST_ADDRESS:?the private address of this host}" \
  --server.port 8501 --server.fileWatcherType none --browser.gatherUsageStats false

#!/usr/bin/env bash
# The class store's PostgreSQL for a lecture hall (docs/CLASSROOM.md), on the database host, as root, with
# Debian's package: a role and a database for the app hosts, reachable from their network only. The app creates
# its tables on first use (inference/lessons/classroom/store.py, versioned).
#   APP_NETWORK=10.0.0.0/24 DB_PASSWORD=... deploy/hall/database.sh
set -euo pipefail
apt-get update -qq && apt-get install -y --no-install-recommends postgresql
conf_dir=$(ls -d /etc/postgresql/*/main | tail -1)
echo "listen_addresses = '*'" > "$conf_dir/conf.d/inference-lab.conf"
rule="host lab lab ${APP_NETWORK:?e.g. 10.0.0.0/24} scram-sha-256"
grep -qxF "$rule" "$conf_dir/pg_hba.conf" || echo "$rule" >> "$conf_dir/pg_hba.conf"   # once, however often this runs
service postgresql restart
runuser -u postgres -- psql -v ON_ERROR_STOP=1 \
  -c "CREATE ROLE lab LOGIN PASSWORD '${DB_PASSWORD:?a password for the app hosts}'" \
  -c "CREATE DATABASE lab OWNER lab"
echo "CLASS_DB=postgresql://lab:<password>@$(hostname -I | cut -d' ' -f1):5432/lab"

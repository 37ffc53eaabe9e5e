#!/usr/bin/env bash
# Round 1's oversell, reproduced as a user would, against the release coupon-server:
# claim 50, SAVE, claim 40 more, restart Redis from that RDB snapshot, claim on.
# Round 1 issued 140 coupons against a stock of 100; the arbitrating engine must issue 100.
#
# Starts its own redis-server (never the shared one) and its own database; needs
# redis-server, redis-cli, psql, curl and python3, and a Postgres that lets the user create
# databases (COUPON_ADMIN_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres).
# Usage: scripts/stale-restart-demo.sh [path/to/coupon-server]   (default target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
server_bin=${1:-target/release/coupon-server}
admin_url=${COUPON_ADMIN_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
[ -x "$server_bin" ] || { echo "build it first: cargo build --release --workspace --bins" >&2; exit 3; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
redis_port=$(free_port)
http_port=$(free_port)
db="coupon_demo_$(date +%s)_$$"
redis_pid="" server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  [ -n "$redis_pid" ] && kill -9 "$redis_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  psql -q "$admin_url" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

start_redis() {
  redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no \
    --dir "$work" --daemonize no >"$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "redis-server did not start" >&2; exit 3
}

start_redis
psql -q "$admin_url" -c "CREATE DATABASE \"$db\"" >/dev/null
db_url="${admin_url%/*}/$db"
COUPON_LISTEN=127.0.0.1:$http_port COUPON_REDIS_URL=redis://127.0.0.1:$redis_port/ \
  COUPON_DATABASE_URL=$db_url COUPON_ADMIN_TOKEN=demo-admin COUPON_USER_TOKEN_SECRET=demo-secret \
  RUST_LOG=warn "$server_bin" >"$work/server.log" 2>&1 &
server_pid=$!
B=http://127.0.0.1:$http_port
for _ in $(seq 100); do curl -sf "$B/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

A="Authorization: Bearer demo-admin"; J='content-type: application/json'
T=$(curl -sf -X POST "$B/v1/templates" -H "$A" -H "$J" -d '{"name":"demo","total_stock":100,
  "per_user_limit":1,"discount":{"kind":"fixed","amount":500},"valid_days":7,
  "refund_policy":"return_to_stock"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
claim() { # user
  local tok
  tok=$(curl -sf -X POST "$B/v1/admin/user-tokens" -H "$A" -H "$J" -d "{\"user_id\":\"$1\"}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
  curl -s -o /dev/null -w '%{http_code}\n' -X POST "$B/v1/templates/$T/claims" \
    -H "Authorization: Bearer $tok" -H "$J" -d "{\"request_id\":\"r-$1\"}"
}
tally() { sort | uniq -c | awk '{printf "%s×%s ", $1, $2}'; echo; }

echo "claim 50:          $(for n in $(seq 50); do claim "a$n"; done | tally)"
redis-cli -p "$redis_port" SAVE >/dev/null
echo "SAVE; claim 40:    $(for n in $(seq 40); do claim "b$n"; done | tally)"
kill -9 "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
start_redis
echo "redis restarted from the snapshot; its stock key says $(redis-cli -p "$redis_port" --scan --pattern '*:stock' | xargs redis-cli -p "$redis_port" GET)"
echo "claim 200 more:    $(for n in $(seq 200); do claim "c$n"; done | tally)"
issued=$(psql -qtA "$db_url" -c "SELECT count(*) FROM user_coupon WHERE status <> 'revoked'")
echo "coupons issued: $issued of a stock of 100"
audit=$(curl -s "$B/v1/admin/templates/$T/audit" -H "$A" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("ok" if d["ok"] else d["violations"])')
echo "audit: $audit"
[ "$issued" -eq 100 ]

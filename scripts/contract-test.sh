#!/usr/bin/env bash
# Contract test: Schemathesis checks that a freshly started coupon-server does exactly what its
# own /openapi.json says, once with the admin token and once with a user token; then a second
# server on the same stores, started with an order-service token (COUPON_SERVICE_TOKEN), once
# with that token.
#
# Starts the server on a free loopback port, against a database of its own (created with psql
# on the Postgres of COUPON_DATABASE_URL, dropped at exit) and a Redis namespace of its own
# (COUPON_REDIS_URL), and installs a pinned Schemathesis from PyPI into a virtualenv under
# target/ (reused while the pin is unchanged). Any failure exits non-zero.
#
# Usage: scripts/contract-test.sh [path/to/coupon-server]   (default target/release/coupon-server)
# Environment:
#   COUPON_DATABASE_URL      default postgres://postgres@127.0.0.1:5432/test (must exist; the
#                            user must be allowed to CREATE DATABASE)
#   COUPON_REDIS_URL         default redis://127.0.0.1:6379/
#   CONTRACT_SEED            default 20261201
#   CONTRACT_MAX_EXAMPLES    default 100 (examples per operation and phase)
#   CONTRACT_VENV            default target/contract-venv
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned so a new Schemathesis release (with new checks) cannot fail CI on its own; bump on
# purpose and rerun.
SCHEMATHESIS_VERSION=4.32.5
server_bin=${1:-target/release/coupon-server}
db_url=${COUPON_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
redis_url=${COUPON_REDIS_URL:-redis://127.0.0.1:6379/}
seed=${CONTRACT_SEED:-20261201}
max_examples=${CONTRACT_MAX_EXAMPLES:-100}
venv=${CONTRACT_VENV:-target/contract-venv}

log() { printf '[contract-test] %s\n' "$*" >&2; }
die() { log "$*"; exit 3; }

[ -x "$server_bin" ] || die "no server at $server_bin; build it: cargo build --release --workspace --bins"
for tool in python3 psql curl; do
  command -v "$tool" >/dev/null || die "$tool is required"
done

# --- Schemathesis, pinned, in a virtualenv ------------------------------------------------
st="$venv/bin/schemathesis"
if ! "$st" --version 2>/dev/null | grep -qx "schemathesis, version $SCHEMATHESIS_VERSION"; then
  log "installing schemathesis==$SCHEMATHESIS_VERSION into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
log "$("$st" --version)"

# --- A database, a namespace and a port of our own -------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
port=$(free_port)
run_id="$(date +%s)_$$"
db="coupon_contract_$run_id"
namespace="contract-$run_id"
server_db_url="${db_url%/*}/$db"
server_pid=""
service_pid=""
cleanup() {
  status=$?
  for pid in $server_pid $service_pid; do
    log "stopping coupon-server (pid $pid)"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  psql -q "$db_url" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 \
    && log "dropped database $db" || log "could not drop database $db"
  if command -v redis-cli >/dev/null; then
    redis-cli -u "$redis_url" --scan --pattern "$namespace:*" 2>/dev/null \
      | xargs -r -n 100 redis-cli -u "$redis_url" DEL >/dev/null 2>&1 || true
  fi
  if [ "$status" -ne 0 ] && [ -s "$work/server.log" ]; then
    log "server log (last 20 lines):"
    tail -n 20 "$work/server.log" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "creating database $db"
psql -q "$db_url" -c "CREATE DATABASE \"$db\"" >/dev/null

admin_token="contract-admin-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
service_token="contract-service-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
start_server() { # port [VAR=value…]: starts a server on the run's stores; sets $started
  local at=$1
  shift
  log "starting $server_bin on 127.0.0.1:$at (Redis namespace $namespace)"
  env COUPON_LISTEN="127.0.0.1:$at" COUPON_REDIS_URL="$redis_url" \
    COUPON_DATABASE_URL="$server_db_url" COUPON_REDIS_NAMESPACE="$namespace" \
    COUPON_ADMIN_TOKEN="$admin_token" COUPON_USER_TOKEN_SECRET="contract-secret-$run_id" \
    RUST_LOG=warn "$@" "$server_bin" >>"$work/server.log" 2>&1 &
  started=$!
  for _ in $(seq 150); do
    curl -sf "http://127.0.0.1:$at/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$started" 2>/dev/null || die "coupon-server exited at start"
    sleep 0.1
  done
  die "coupon-server on port $at is not healthy"
}
# Without a service token: shoppers redeem with their own tokens (the compatible mode).
start_server "$port"
server_pid=$started
base=http://127.0.0.1:$port

log "minting a user token through the admin API"
user_token=$(curl -sf -X POST "$base/v1/admin/user-tokens" -H "Authorization: Bearer $admin_token" \
  -H 'content-type: application/json' -d '{"user_id":"contract-user"}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')

# --- Schemathesis -----------------------------------------------------------------------------
# One narrow exception, per operation, not a disabled check: `POST /v1/templates` refuses
# `valid_from` >= `valid_until` and `claim_starts_at` >= `claim_ends_at` with 400. JSON Schema
# cannot compare two fields, so the description says it in prose and generated "valid" bodies
# may break it; positive_data_acceptance may therefore see 400 there (and only there). Every
# other check, including negative_data_rejection, runs on that operation as everywhere else.
cat >"$work/schemathesis.toml" <<'EOF'
[[operations]]
include-method = "POST"
include-path = "/v1/templates"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
EOF

# The service run's one further exception: the order's operations (lock, redeem, release,
# refund) require `user_id` with the service token and refuse its absence with 400, a rule
# that depends on the token (each description says it).
cp "$work/schemathesis.toml" "$work/schemathesis-service.toml"
for op in lock redeem release refund; do
  cat >>"$work/schemathesis-service.toml" <<EOF

[[operations]]
include-method = "POST"
include-path = "/v1/coupons/{id}/$op"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
EOF
done

failed=0
run() { # label token [server base] [config]
  log "schemathesis run as $1: --checks all, seed $seed, max-examples $max_examples"
  if "$st" --config-file "${4:-$work/schemathesis.toml}" run "${3:-$base}/openapi.json" \
    -H "Authorization: Bearer $2" --checks all --seed "$seed" --max-examples "$max_examples" \
    --generation-database none --report junit --report-dir "$work/report-$1" \
    --no-color --warnings off; then
    log "$1: 0 failures"
  else
    log "$1: FAILED"
    failed=1
  fi
}
run admin "$admin_token"
run user "$user_token"
kill -0 "$server_pid" 2>/dev/null || die "coupon-server died during the run"

# With a service token, on the same stores: only the order service redeems.
service_port=$(free_port)
start_server "$service_port" COUPON_SERVICE_TOKEN="$service_token"
service_pid=$started
run service "$service_token" "http://127.0.0.1:$service_port" "$work/schemathesis-service.toml"
kill -0 "$service_pid" 2>/dev/null || die "the service-token coupon-server died during the run"
# What the runs reached, by route and outcome: shows which operations got past validation.
log "requests answered, by route and outcome:"
for server in "$base" "http://127.0.0.1:$service_port"; do
  curl -sf "$server/metrics" | grep '^coupon_http_requests_total' | sed 's/^coupon_http_requests_total/  /' >&2 || true
done
[ "$failed" -eq 0 ] || { log "contract test failed"; exit 1; }
log "contract test passed for the admin, user and service tokens"

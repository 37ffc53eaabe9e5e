#!/usr/bin/env bash
# Builds stand-in Docker images of Redis and Postgres from this machine's own binaries and
# tags them with the exact names the testkit asks testcontainers for, so the container path
# of the test suite (way 2 of docs/ARCHITECTURE.md, "Provisioning") runs on an air-gapped CI
# machine that reaches no registry. testcontainers finds the tags locally and never pulls.
#
# Needs: a running dockerd, redis-server and PostgreSQL installed, busybox-static.
# The tags come from testkit/src/images.env, the single source of truth.
# Usage: scripts/standin-images.sh            (builds both)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../testkit/src/images.env
source "$here/testkit/src/images.env"

root=""
cleanup() { if [ -n "$root" ]; then rm -rf "$root"; fi; }
trap cleanup EXIT

copy_bin() {  # copy a binary and its shared libraries into $root
  local b=$1
  mkdir -p "$root$(dirname "$b")"; cp -L "$b" "$root$b"
  for lib in $(ldd "$b" | grep -oE '/[^ ]+\.so[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"
  done
}

base_tree() {
  root=$(mktemp -d)
  mkdir -p "$root/bin" "$root/tmp" "$root/etc"
  cp "$(command -v busybox)" "$root/bin/busybox"
  for c in sh ls cat echo sleep mkdir chown id env su; do ln -sf busybox "$root/bin/$c"; done
  echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
  echo 'postgres:x:999:999:postgres:/var/lib/postgresql:/bin/sh' >> "$root/etc/passwd"
  echo 'root:x:0:' > "$root/etc/group"; echo 'postgres:x:999:' >> "$root/etc/group"
  chmod 1777 "$root/tmp"
}

build_redis() {
  base_tree
  local real; real=$(readlink -f "$(command -v redis-server)")
  copy_bin "$real"
  mkdir -p "$root/usr/local/bin"; ln -sf "$real" "$root/usr/local/bin/redis-server"
  cat > "$root/Dockerfile" <<'D'
FROM scratch
COPY . /
ENV PATH=/usr/local/bin:/usr/bin:/bin
EXPOSE 6379
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", ""]
D
  docker build -q -t "$REDIS_IMAGE:$REDIS_TAG" "$root" >/dev/null
  rm -rf "$root"; root=""
  echo "built $REDIS_IMAGE:$REDIS_TAG (stand-in)"
}

build_postgres() {
  base_tree
  local pgbin pgver
  pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1); pgver=$(basename "$(dirname "$pgbin")")
  for b in postgres initdb pg_ctl psql; do copy_bin "$pgbin/$b"; done
  cp -r "$(dirname "$pgbin")/lib" "$root$(dirname "$pgbin")/"
  for so in "$(dirname "$pgbin")"/lib/*.so; do
    for lib in $(ldd "$so" 2>/dev/null | grep -oE '/[^ ]+\.so[^ ]*'); do
      [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
    done
  done
  mkdir -p "$root/usr/share/postgresql"; cp -r "/usr/share/postgresql/$pgver" "$root/usr/share/postgresql/"
  if [ -d /usr/share/zoneinfo ]; then mkdir -p "$root/usr/share"; cp -r /usr/share/zoneinfo "$root/usr/share/"; fi
  mkdir -p "$root/usr/lib/locale"; cp -r /usr/lib/locale/C.utf8 "$root/usr/lib/locale/" 2>/dev/null || true
  # Mimics the official image: POSTGRES_USER/PASSWORD/DB/HOST_AUTH_METHOD, an init server,
  # then the real one, which prints the log line testcontainers waits for.
  cat > "$root/entrypoint.sh" <<E
#!/bin/sh
set -e
U=\${POSTGRES_USER:-postgres}; P=\${POSTGRES_PASSWORD:-postgres}; DB=\${POSTGRES_DB:-\$U}
AUTH=\${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
mkdir -p /var/lib/postgresql/data /var/run/postgresql
chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql /tmp
if [ ! -s /var/lib/postgresql/data/PG_VERSION ]; then
  echo "\$P" > /tmp/pw; chown postgres /tmp/pw
  su_pg() { busybox su postgres -s /bin/sh -c "\$*"; }
  su_pg "$pgbin/initdb -D /var/lib/postgresql/data -U \$U --pwfile=/tmp/pw -A \$AUTH -E UTF8 --locale=C.UTF-8" >/dev/null
  echo "host all all 0.0.0.0/0 \$AUTH" >> /var/lib/postgresql/data/pg_hba.conf
  # The init server's log goes to stdout, as in the official image: the module waits for
  # "ready to accept connections" there too.
  su_pg "$pgbin/pg_ctl -D /var/lib/postgresql/data -o '-c listen_addresses=' -w start"
  [ "\$DB" != postgres ] && su_pg "PGPASSWORD=\$P $pgbin/psql -h /var/run/postgresql -U \$U -d postgres -c 'CREATE DATABASE \"\$DB\"'" >/dev/null
  su_pg "$pgbin/pg_ctl -D /var/lib/postgresql/data -m fast -w stop" >/dev/null
  echo "PostgreSQL init process complete; ready for start up."
fi
exec busybox su postgres -s /bin/sh -c "$pgbin/postgres -D /var/lib/postgresql/data -c listen_addresses='*' -k /var/run/postgresql \$*"
E
  chmod +x "$root/entrypoint.sh"
  cat > "$root/Dockerfile" <<'D'
FROM scratch
COPY . /
ENV PATH=/usr/bin:/bin LANG=C.UTF-8
EXPOSE 5432
ENTRYPOINT ["/entrypoint.sh"]
D
  docker build -q -t "$POSTGRES_IMAGE:$POSTGRES_TAG" "$root" >/dev/null
  rm -rf "$root"; root=""
  echo "built $POSTGRES_IMAGE:$POSTGRES_TAG (stand-in)"
}

build_redis
build_postgres

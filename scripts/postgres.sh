#!/usr/bin/env bash
# Makes sure PostgreSQL answers at PG_URL's host and port (default 127.0.0.1:5432), for the
# retry table's tests and demo: uses one that is up; else starts an installed cluster
# (Debian's pg_ctlcluster); else, as root with apt, installs Debian's postgresql and starts
# it; else says what to install.
set -euo pipefail

url=${PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
rest=${url#*://}
rest=${rest##*@}
hostport=${rest%%/*}
host=${hostport%%:*}
port=5432
[[ $hostport == *:* ]] && port=${hostport##*:}
wait_secs=${PG_WAIT_SECS:-60}

answers() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$host" -p "$port" -t 2
  else
    timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
  fi
}

if answers; then
  echo "postgres: up at $host:$port"
  exit 0
fi

case $host in
  127.0.0.1 | localhost | ::1) ;;
  *)
    echo "postgres: nothing answers at $host:$port, which is not this machine; start it there or set PG_URL." >&2
    exit 1
    ;;
esac

start_clusters() {
  local any=1
  if command -v pg_lsclusters >/dev/null 2>&1; then
    while read -r version name _; do
      [[ $version =~ ^[0-9]+$ ]] || continue
      pg_ctlcluster --skip-systemctl-redirect "$version" "$name" start 2>/dev/null || true
      any=0
    done < <(pg_lsclusters --no-header 2>/dev/null)
  fi
  return $any
}

if ! start_clusters; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "postgres: installing Debian's postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
    start_clusters || true
  else
    echo "postgres: no PostgreSQL answers at $host:$port and none is installed." >&2
    echo "          install one ('sudo apt-get install postgresql', 'brew install postgresql'), or set PG_URL." >&2
    exit 1
  fi
fi

deadline=$((SECONDS + wait_secs))
until answers; do
  if ((SECONDS >= deadline)); then
    echo "postgres: did not answer at $host:$port within ${wait_secs}s" >&2
    exit 1
  fi
  sleep 1
done
echo "postgres: up at $host:$port"

#!/usr/bin/env bash
# Makes sure a RabbitMQ broker answers at AMQP_URL (default amqp://guest:guest@127.0.0.1:5672):
# uses one that is up; else starts an installed rabbitmq-server; else, as root with apt,
# installs Debian's rabbitmq-server and starts it; else says what to install.
#
# With RABBITMQ_SERIES (4.3 or 4.0) it starts that series instead, in a root of its own, on its
# own port (scripts/broker-root.sh), and never touches the broker on 5672.
set -euo pipefail

if [[ -n ${RABBITMQ_SERIES:-} ]]; then
  exec bash "$(dirname "$0")/broker-root.sh" start
fi

url=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}
rest=${url#*://}
rest=${rest#*@}
hostport=${rest%%/*}
hostport=${hostport%%\?*}
host=${hostport%%:*}
port=5672
[[ $hostport == *:* ]] && port=${hostport##*:}
[[ $url == amqps://* && $hostport != *:* ]] && port=5671
wait_secs=${BROKER_WAIT_SECS:-90}

answers() {
  timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}

wait_until_up() {
  local deadline=$((SECONDS + wait_secs))
  while ((SECONDS < deadline)); do
    if answers; then
      # The port opens before the broker is fully booted; await_startup covers the rest.
      if command -v rabbitmqctl >/dev/null 2>&1; then
        rabbitmqctl -q await_startup --timeout "$wait_secs" >/dev/null 2>&1 || true
      fi
      return 0
    fi
    sleep 1
  done
  return 1
}

if answers; then
  echo "broker: up at $host:$port"
  exit 0
fi

case $host in
  127.0.0.1 | localhost | ::1) ;;
  *)
    echo "broker: nothing answers at $host:$port, and it is not this machine, so it cannot be started from here." >&2
    echo "        start the broker there, or set AMQP_URL to one that runs." >&2
    exit 1
    ;;
esac

if ! command -v rabbitmq-server >/dev/null 2>&1 && [[ -x /usr/sbin/rabbitmq-server ]]; then
  export PATH="$PATH:/usr/sbin"
fi

if ! command -v rabbitmq-server >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "broker: installing Debian's rabbitmq-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq rabbitmq-server >/dev/null
  else
    echo "broker: no RabbitMQ answers at $host:$port and none is installed." >&2
    echo "        install one: 'sudo apt-get install rabbitmq-server' (Debian/Ubuntu)," >&2
    echo "        'brew install rabbitmq' (macOS), or see https://www.rabbitmq.com/docs/download;" >&2
    echo "        or set AMQP_URL to a broker that runs." >&2
    exit 1
  fi
fi

if ! answers; then
  echo "broker: starting rabbitmq-server"
  rabbitmq-server -detached >/dev/null 2>&1 || true
fi
if wait_until_up; then
  echo "broker: up at $host:$port"
else
  echo "broker: rabbitmq-server did not answer at $host:$port within ${wait_secs}s; see its log in /var/log/rabbitmq/" >&2
  exit 1
fi

#!/bin/sh
# Start the relay from 127.0.0.1:3128 to the egress proxy's socket, then idle for the browser's
# lifetime so the container ends by itself even if the host process that started it died.
set -eu

socket=/egress/proxy.sock
lifetime="${BROWSER_LIFETIME_SECONDS:-900}"
case "$lifetime" in
  ''|*[!0-9]*) echo "airlock-entrypoint: BROWSER_LIFETIME_SECONDS must be a whole number of seconds, got '$lifetime'" >&2; exit 2 ;;
esac
if [ ! -S "$socket" ]; then
  echo "airlock-entrypoint: no proxy socket at $socket: mount the egress proxy's directory at /egress" >&2
  exit 2
fi

# /tmp is the only writable place (a tmpfs); agent-browser keeps its home and sockets there.
mkdir -p "$HOME" "$AGENT_BROWSER_SOCKET_DIR"
chmod 0700 "$HOME" "$AGENT_BROWSER_SOCKET_DIR"

# nodelay: small request writes on the relay's TCP side go out at once instead of waiting on
# Nagle's algorithm.
socat -lf /dev/null TCP-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork,nodelay UNIX-CONNECT:"$socket" &

# Mark the relay ready once it listens (127.0.0.1:3128 is 0100007F:0C38 in state 0A, LISTEN), so
# the driver never starts the browser before its one way out exists.
tries=0
until grep -q '0100007F:0C38 00000000:0000 0A' /proc/net/tcp; do
  tries=$((tries + 1))
  if [ "$tries" -gt 250 ]; then
    echo "airlock-entrypoint: the relay did not start listening on 127.0.0.1:3128" >&2
    exit 1
  fi
  sleep 0.02
done
touch /tmp/.airlock-relay-ready
echo "airlock-entrypoint: relay ready; lifetime ${lifetime}s"
exec sleep "$lifetime"

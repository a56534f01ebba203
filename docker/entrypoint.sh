#!/bin/sh
# Start airlock-relay on 127.0.0.1:3128 (where Chromium's proxy setting points), handing each
# connection to the egress proxy, then idle for the browser's lifetime so the container ends by
# itself even if the host process that started it died.
set -eu

handoff=/egress/handoff.sock
proxy=/egress/proxy.sock
lifetime="${BROWSER_LIFETIME_SECONDS:-900}"
# handoff (runc): pass each connection's socket to the proxy. copy (gVisor, whose sockets are not
# host sockets and cannot be passed): copy each connection to a new one on proxy.sock.
mode="${AIRLOCK_RELAY_MODE:-handoff}"
case "$lifetime" in
  ''|*[!0-9]*) echo "airlock-entrypoint: BROWSER_LIFETIME_SECONDS must be a whole number of seconds, got '$lifetime'" >&2; exit 2 ;;
esac
case "$mode" in
  handoff) way_out="--handoff $handoff"; socket=$handoff ;;
  copy) way_out="--copy-to $proxy"; socket=$proxy ;;
  *) echo "airlock-entrypoint: AIRLOCK_RELAY_MODE must be handoff or copy, got '$mode'" >&2; exit 2 ;;
esac
if [ ! -S "$socket" ]; then
  echo "airlock-entrypoint: no proxy socket at $socket: mount the egress proxy's directory at /egress" >&2
  exit 2
fi

# /tmp is the only writable place (a tmpfs); agent-browser keeps its home and sockets there.
mkdir -p "$HOME" "$AGENT_BROWSER_SOCKET_DIR"
chmod 0700 "$HOME" "$AGENT_BROWSER_SOCKET_DIR"

# The relay creates the ready file once it listens and holds its channel to the proxy, so the
# driver never starts the browser before its one way out exists.
# $way_out is two words on purpose (a flag and a fixed path without spaces).
# shellcheck disable=SC2086
airlock-relay --listen 127.0.0.1:3128 $way_out --ready-file /tmp/.airlock-relay-ready &

echo "airlock-entrypoint: relay started ($mode); lifetime ${lifetime}s"
exec sleep "$lifetime"

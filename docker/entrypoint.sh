#!/bin/sh
# Start airlock-relay on 127.0.0.1:3128 (where Chromium's proxy setting points), handing each
# connection to the egress proxy, then idle for the browser's lifetime so the container ends by
# itself even if the host process that started it died.
set -eu

handoff=/egress/handoff.sock
lifetime="${BROWSER_LIFETIME_SECONDS:-900}"
case "$lifetime" in
  ''|*[!0-9]*) echo "airlock-entrypoint: BROWSER_LIFETIME_SECONDS must be a whole number of seconds, got '$lifetime'" >&2; exit 2 ;;
esac
if [ ! -S "$handoff" ]; then
  echo "airlock-entrypoint: no hand-off socket at $handoff: mount the egress proxy's directory at /egress" >&2
  exit 2
fi

# /tmp is the only writable place (a tmpfs); agent-browser keeps its home and sockets there.
mkdir -p "$HOME" "$AGENT_BROWSER_SOCKET_DIR"
chmod 0700 "$HOME" "$AGENT_BROWSER_SOCKET_DIR"

# The relay creates the ready file once it listens and holds its channel to the proxy, so the
# driver never starts the browser before its one way out exists.
airlock-relay --listen 127.0.0.1:3128 --handoff "$handoff" --ready-file /tmp/.airlock-relay-ready &

echo "airlock-entrypoint: relay started; lifetime ${lifetime}s"
exec sleep "$lifetime"

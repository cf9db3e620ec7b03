#!/usr/bin/env bash
# The OpenAI wire format checked with real clients against `tessera serve`:
# curl (a completion, and a streamed chat completion read as raw SSE) and
# the official `openai` npm package (client_test.mjs).
#
#   run_openai_test.sh BINARY_DIR SOURCE_DIR
#
# Makes a nano model in a temporary folder, installs the pinned npm package
# once into BINARY_DIR/openai-client (again only when package-lock.json
# changes), starts `tessera serve --port 0` and reads the URL it prints,
# waits for /health, runs the clients, then stops the server with SIGTERM
# and checks that it exits 0.
#
# Exit: 0 pass, 1 fail, 77 skip (node, npm or curl missing, node older than
# 18, or the npm registry unreachable on the first install).
set -euo pipefail
start_ms=$(date +%s%3N)

if [ $# -ne 2 ]; then
  echo "usage: $0 BINARY_DIR SOURCE_DIR" >&2
  exit 2
fi
bin_dir=$1
src_dir=$2
here=$src_dir/tests/openai
tessera=$bin_dir/cli/tessera
client_dir=$bin_dir/openai-client
model="tessera-nano"
max_tokens=8

skip() {
  echo "openai_client: SKIP: $*"
  exit 77
}
fail() {
  echo "openai_client: FAIL: $*"
  exit 1
}

[ -x "$tessera" ] || fail "no tessera binary at $tessera (build the tessera target first)"
for tool in node npm curl; do
  command -v "$tool" >/dev/null ||
    skip "$tool not found on PATH (scripts/install-deps.sh installs nodejs, npm and curl)"
done
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || skip "node $(node --version) is too old: the openai package needs 18 or newer"
echo "openai_client: node $(node --version), npm $(npm --version), $(curl --version | head -n 1 | cut -d' ' -f1-2)"

# The npm package: `npm ci` from the committed lock, once per lock.
# node_modules/.tessera-lock records which lock is installed (npm ci
# deletes node_modules first, so a failed install leaves no stale record).
mkdir -p "$client_dir"
cp "$here/package.json" "$here/package-lock.json" "$here/client_test.mjs" \
  "$here/check_curl_output.mjs" "$client_dir/"
installed=$client_dir/node_modules/.tessera-lock
if [ -f "$installed" ] && [ -f "$client_dir/node_modules/openai/package.json" ] &&
  cmp -s "$here/package-lock.json" "$installed"; then
  echo "openai_client: npm packages already installed in $client_dir"
else
  echo "openai_client: npm ci in $client_dir"
  if ! (cd "$client_dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error \
    --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=10000) \
    >"$client_dir/npm-ci.log" 2>&1; then
    cat "$client_dir/npm-ci.log"
    if ! (cd "$client_dir" && timeout 30 npm ping --fetch-retries=0) >/dev/null 2>&1; then
      skip "npm ci failed and the npm registry ($(npm config get registry)) cannot be reached"
    fi
    fail "npm ci failed (log above)"
  fi
  cp "$here/package-lock.json" "$installed"
fi
echo "openai_client: openai $(node -p "require('$client_dir/node_modules/openai/package.json').version")"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-openai.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

server_log() {
  echo "---- tessera serve stderr (last 40 lines) ----"
  tail -n 40 "$tmp/serve.err" || true
  echo "----"
}

"$tessera" model init --shape nano --seed 3 --out "$tmp/nano" >"$tmp/init.log" 2>&1 ||
  { cat "$tmp/init.log"; fail "tessera model init failed"; }

# The server's stdout comes through a FIFO so the URL line is waited for,
# not polled for; port 0 lets the server pick a free port.
mkfifo "$tmp/serve.out"
"$tessera" serve --model "$tmp/nano" --served-model-name "$model" --port 0 --kv-cache-mb 32 \
  >"$tmp/serve.out" 2>"$tmp/serve.err" &
server_pid=$!
exec 3<"$tmp/serve.out"
url=
deadline=$((SECONDS + 60))
while [ -z "$url" ] && [ $SECONDS -lt $deadline ]; do
  IFS= read -r -t $((deadline - SECONDS)) -u 3 line || break
  echo "serve> $line"
  if [[ $line =~ listening\ on\ (http://[^ ]+) ]]; then
    url=${BASH_REMATCH[1]}
  fi
done
[ -n "$url" ] || { server_log; fail "tessera serve printed no 'listening on http://...' line within 60 s"; }

# /health answers 200 once the router sees a healthy worker; nothing to
# wait on from outside but the endpoint itself, so poll it (bounded).
deadline=$((SECONDS + 60))
until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url/health")" = 200 ]; do
  kill -0 "$server_pid" 2>/dev/null || { server_log; fail "tessera serve exited before /health was 200"; }
  [ $SECONDS -lt $deadline ] || { server_log; fail "/health was not 200 within 60 s"; }
  sleep 0.2
done
echo "openai_client: $url/health is 200"

failed=0

echo "openai_client: the openai npm client"
if ! (cd "$client_dir" && BASE_URL=$url MODEL=$model timeout 300 node client_test.mjs); then
  failed=1
fi

echo "openai_client: curl"
code=$(curl -sS --max-time 60 -o "$tmp/completion.json" -w '%{http_code}' \
  -H 'Content-Type: application/json' \
  -d "{\"model\": \"$model\", \"prompt\": \"Once upon a time\", \"max_tokens\": $max_tokens, \"temperature\": 0}" \
  "$url/v1/completions") || code="curl exit $?"
if [ "$code" = 200 ]; then
  node "$client_dir/check_curl_output.mjs" completion "$tmp/completion.json" "$model" "$max_tokens" || failed=1
else
  echo "FAIL curl POST /v1/completions: HTTP $code: $(head -c 2000 "$tmp/completion.json" 2>/dev/null)"
  failed=1
fi

code=$(curl -sSN --max-time 60 -D "$tmp/chat.headers" -o "$tmp/chat.sse" -w '%{http_code}' \
  -H 'Content-Type: application/json' \
  -d "{\"model\": \"$model\", \"max_tokens\": $max_tokens, \"stream\": true, \"ignore_eos\": true,
       \"stream_options\": {\"include_usage\": true},
       \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},
                      {\"role\": \"user\", \"content\": \"Say hello.\"}]}" \
  "$url/v1/chat/completions") || code="curl exit $?"
if [ "$code" != 200 ]; then
  echo "FAIL curl -N POST /v1/chat/completions (stream): HTTP $code: $(head -c 2000 "$tmp/chat.sse" 2>/dev/null)"
  failed=1
elif ! grep -qi '^content-type: text/event-stream' "$tmp/chat.headers"; then
  echo "FAIL curl -N POST /v1/chat/completions (stream): not text/event-stream:"
  cat "$tmp/chat.headers"
  failed=1
else
  node "$client_dir/check_curl_output.mjs" chat-sse "$tmp/chat.sse" "$model" "$max_tokens" || failed=1
fi

# SIGTERM: the server stops and exits 0 (bounded wait on its exit).
kill -TERM "$server_pid"
timeout 30 tail --pid="$server_pid" -f /dev/null || true
if kill -0 "$server_pid" 2>/dev/null; then
  server_log
  fail "tessera serve still running 30 s after SIGTERM"
fi
rc=0
wait "$server_pid" || rc=$?
server_pid=
while IFS= read -r -u 3 line; do echo "serve> $line"; done
if [ "$rc" -ne 0 ]; then
  server_log
  fail "tessera serve exited $rc after SIGTERM (expected 0)"
fi
echo "ok   tessera serve exited 0 after SIGTERM"

if [ "$failed" -ne 0 ]; then
  server_log
  fail "some checks failed (above)"
fi
echo "openai_client: all checks passed in $(($(date +%s%3N) - start_ms)) ms"

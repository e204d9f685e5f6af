#!/usr/bin/env bash
# From the sandbox to production, step by step: the README's walkthrough is this file, verbatim,
# and tests/cli/test_walkthrough.py runs it. Run it with capture-sync on the PATH:
#   PATH="$PWD/.venv/bin:$PATH" examples/walkthrough.sh
# PORT (default 8765) and DIR (default ./capture-sync-walkthrough) may be set to other values.
set -euo pipefail
PORT="${PORT:-8765}"
DIR="${DIR:-capture-sync-walkthrough}"
mkdir -p "$DIR" && cd "$DIR"

# 1. The sandbox on a fixed port, with a database file that survives restarts. By hand you would
#    run `capture-sync sandbox serve --db sandbox.sqlite3` in a terminal of its own; here it runs in
#    the background and the script waits for its first line:
#    sandbox Capture API listening on http://127.0.0.1:8765/api/v1/capture
start_sandbox() {
  coproc SANDBOX { exec capture-sync sandbox serve --port "$PORT" --db sandbox.sqlite3; }
  sandbox_pid=$SANDBOX_PID
  read -r listening <&"${SANDBOX[0]}"   # fails (and so does the script) if serve could not start
  echo "$listening"
}
stop_sandbox() { kill "$sandbox_pid" 2>/dev/null && wait "$sandbox_pid" || true; }
trap stop_sandbox EXIT
start_sandbox

# 2. An API client. Its key and secret go to credentials/api_key and credentials/api_secret, created
#    readable by you alone (mode 0600); the command prints the two config lines that name them.
capture-sync sandbox create-client --db sandbox.sqlite3 --name "my integration" --write-credentials credentials

# 3. Your contacts (here three, in a CSV) and a config for them. Relative paths are relative to
#    the config file's folder.
cat > contacts.csv <<'EOF'
id,First name,Last name,E-mail,Phone
1,Ada,Lovelace,ADA@example.com,+44 20 7946 0018
2,Grace,Hopper, grace@example.com ,
3,Alan,Turing,alan@example.com,not a number
EOF
cat > capture-sync.toml <<EOF
[capture]
base_url = "http://127.0.0.1:$PORT/api/v1/capture"
api_key_file = "credentials/api_key"
api_secret_file = "credentials/api_secret"

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "contacts"
type = "csv"
path = "contacts.csv"
primary_key = "id"

[sources.mapping]
first_name = "First name"
last_name = "Last name"
email = { field = "E-mail", transform = ["strip", "lower"] }
phone = { field = "Phone", transform = "e164", region = "GB", on_error = "drop" }
custom_fields.source_file = { constant = "contacts.csv" }
EOF

# 4. Check the setup: GET /info, the source, every mapped column.
capture-sync check -c capture-sync.toml

# 5. The API specification's synthetic test flow, with a disposable test client of its own (the
#    flow creates a few test persons, hence --yes). Its key and secret, given in the environment,
#    take precedence over the files; a pass is recorded for this base URL, whichever client ran it.
capture-sync sandbox create-client --db sandbox.sqlite3 --name "flow test" --write-credentials flow-credentials
CAPTURE_API_KEY="$(cat flow-credentials/api_key)" CAPTURE_API_SECRET="$(cat flow-credentials/api_secret)" \
  capture-sync check -c capture-sync.toml --flow --yes

# 6. What a sync would send, sending nothing.
capture-sync sync -c capture-sync.toml --dry-run

# 7. The sync itself, then what the ledger holds.
capture-sync sync -c capture-sync.toml
capture-sync status -c capture-sync.toml

# 8. Restart the sandbox on the same port and database: the client and the persons are still
#    there, and a second sync sends nothing, because the ledger remembers every contact.
stop_sandbox
start_sandbox
capture-sync check -c capture-sync.toml
capture-sync sync -c capture-sync.toml

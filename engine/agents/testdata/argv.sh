#!/bin/sh
# Records its arguments (NUL-separated) and working directory for the test.
for a in "$@"; do printf '%s\0' "$a"; done > "$ARGV_OUT"
pwd > "$ARGV_OUT.cwd"
echo '{"ok":true}'

#!/bin/sh
# The writer: stdin is the thread as JSON ({threadId, role, depth, prompt,
# steps: [{role, meta, contentHash}]}); stdout is the role's meta as JSON.
# Steps alternate writer, reviewer, so this is draft (steps / 2) + 1.
steps=$(grep -o '"contentHash" *: *"' | wc -l)
draft=$((steps / 2 + 1))
if [ "$draft" -eq 1 ]; then
  greeting="hello world"
else
  greeting="Hello, world!"
fi
printf '{"draft":%d,"greeting":"%s"}\n' "$draft" "$greeting"

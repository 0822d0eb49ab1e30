#!/bin/sh
# A failing agent: some output, a complaint on stderr, exit code 3.
echo "partial work"
echo "boom: the model is unavailable" >&2
exit 3

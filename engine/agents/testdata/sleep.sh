#!/bin/sh
# An agent that never finishes on its own.
echo "thinking..."
exec sleep 300

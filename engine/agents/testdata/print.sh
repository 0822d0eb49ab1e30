#!/bin/sh
# Prints $AGENT_OUTPUT as the agent's answer (set through the spec's env).
printf '%s\n' "$AGENT_OUTPUT"

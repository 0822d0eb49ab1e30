#!/bin/sh
# Answers with the role context the engine put in the environment.
printf '{"role":"%s","thread":"%s","depth":%s,"extra":"%s"}\n' "$WORKFLOW_ROLE" "$WORKFLOW_THREAD_ID" "$WORKFLOW_DEPTH" "$EXTRA"

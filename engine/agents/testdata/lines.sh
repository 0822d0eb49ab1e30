#!/bin/sh
# Prints many lines, then waits for $RELEASE to exist before answering, so
# a test can see the lines in the log while the agent still runs.
i=0
while [ "$i" -lt 500 ]; do
  echo "line $i"
  i=$((i + 1))
done
echo "warning on stderr" >&2
while [ ! -e "$RELEASE" ]; do sleep 0.01; done
echo '{"lines":500}'

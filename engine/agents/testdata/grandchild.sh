#!/bin/sh
# An agent that ignores SIGTERM and leaves a grandchild (which ignores it
# too and holds stdout open). Its pid goes to $PIDFILE once it runs.
trap '' TERM
sleep 300 &
echo "$!" > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"
echo "spawned $!"
wait

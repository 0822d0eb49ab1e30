#!/bin/sh
# Echoes stdin: an exec role's meta becomes the thread context it was given.
cat

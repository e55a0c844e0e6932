#!/bin/sh
echo "Hello from a local script: {{ these braces are not template code }}"

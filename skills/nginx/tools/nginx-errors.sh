#!/bin/sh
# A summary of nginx's error log: how many lines of each level among the
# last 5000, and the ten messages seen most, with the request's details
# (time, client, process) taken off so that alike messages count together.
# Requests write into this log, so what a client sent is there: control
# characters (a terminal's escapes, a carriage return) are taken out before
# anything is read, and each message is cut at 160 characters.
log=/var/log/nginx/error.log
if [ ! -f "$log" ]; then
  echo "No nginx error log at $log."
  exit 0
fi
recent() {
  tail -n 5000 "$log" | tr -d '\000-\010\013-\037\177'
}
lines=$(recent | awk 'END { print NR }')
if [ "$lines" -eq 0 ]; then
  echo "nginx's error log is empty."
  exit 0
fi
first=$(recent | head -n 1 | cut -c1-19)
last=$(recent | tail -n 1 | cut -c1-19)
echo "The last $lines lines of $log, from $first to $last:"
echo
echo "By level:"
recent | sed -n 's/^[0-9/]* [0-9:]* \[\([a-z]*\)\].*/\1/p' | sort | uniq -c | sort -rn
echo
echo "Seen most:"
recent |
  sed -e 's/^[0-9/]* [0-9:]* \[[a-z]*\] [0-9]*#[0-9]*: \(\*[0-9]* \)\{0,1\}//' \
    -e 's/, client: .*//' |
  cut -c1-160 | sort | uniq -c | sort -rn | head -n 10

#!/bin/sh
# The sites nginx is configured to serve: for each enabled configuration
# file, the names it answers to and the ports it listens on.
found=0
for f in /etc/nginx/sites-enabled/* /etc/nginx/conf.d/*.conf; do
  [ -f "$f" ] || continue
  found=1
  echo "$f:"
  grep -hE '^[[:space:]]*(server_name|listen)[[:space:]]' "$f" |
    sed -e 's/^[[:space:]]*/  /' -e 's/;.*$//' | sort -u
done
if [ "$found" -eq 0 ]; then
  echo "No enabled nginx site (nothing in /etc/nginx/sites-enabled or /etc/nginx/conf.d)."
fi

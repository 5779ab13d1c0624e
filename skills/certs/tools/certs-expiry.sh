#!/bin/sh
# When the site's certificate expires, as the chore certs-expiry last read
# it (this tool reads; it reaches nothing).
if [ -f /var/lib/aromba-certs/expiry ]; then
  cat /var/lib/aromba-certs/expiry
else
  echo "Not read yet: the chore certs-expiry reads it daily at 06:15 once SITE is set (now: ${SITE:-not set})."
fi

#!/bin/sh
# aromba-chore: 1
# name: certs-expiry
# description: Read when the TLS certificate your site shows expires, and fail when that is in under 14 days
# color: green
# touches: /var/lib/aromba-certs
# network: yes
# schedule: daily 06:15
# end
set -eu
# Only what the site shows everyone: the certificate it sends in the TLS
# handshake, read through the Warden's proxy (the only way out, to SITE
# alone). No key is read, none could be: the cage shows none.
out=/var/lib/aromba-certs/expiry
if [ "${AROMBA_DRY_RUN:-}" = 1 ]; then
  echo "would read the certificate $SITE shows on port 443, through the Warden's proxy, and write when it expires to $out"
  exit 0
fi
proxy=${https_proxy:-}
if [ -z "$proxy" ]; then
  echo "this run has no way out to $SITE (the PIN was not typed for it): aromba skill set certs SITE $SITE"
  exit 1
fi
# 30 seconds at most: a site that answers slowly or never is a reading
# that failed, not a run held for its 15 minutes.
end=$(timeout 30 openssl s_client -proxy "${proxy#http://}" -servername "$SITE" -connect "$SITE:443" </dev/null 2>/dev/null |
  openssl x509 -noout -enddate 2>/dev/null) || true
end=${end#notAfter=}
if [ -z "$end" ]; then
  echo "$SITE did not show a certificate on port 443 (no TLS there, or it could not be reached)" | tee "$out"
  exit 1
fi
left=$(($(date -u -d "$end" +%s) - $(date -u +%s)))
days=$((left / 86400))
checked=$(date -u '+%F %H:%M UTC')
# Seconds first: a certificate that ended an hour ago is expired, not "0
# days" left (the division rounds toward zero).
if [ "$left" -le 0 ]; then
  line="$SITE's certificate expired on $end, $((-left / 86400)) days ago (read $checked)"
elif [ "$days" -lt 14 ]; then
  line="$SITE's certificate expires in $days days, on $end: renew it (the chore certs-renew, on a tap) (read $checked)"
else
  line="$SITE's certificate is good for $days more days, until $end (read $checked)"
fi
echo "$line" | tee "$out"
[ "$left" -gt 0 ] && [ "$days" -ge 14 ]

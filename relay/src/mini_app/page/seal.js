// Seals the PIN for the Warden that proposed the action: only that
// Warden's secret key opens it, so the relay, the Worker and the chat
// carry bytes they cannot read. The Warden's public key comes from the
// start_param, which Telegram signed into the launch (not from the relay).
// WebCrypto only: X25519, HKDF-SHA256, AES-256-GCM with the start_param as
// associated data (the Warden's `seal.rs` opens it).
(function (root) {
  "use strict";

  var INFO = "aromba pin seal v1";

  function hexBytes(hex) {
    var out = new Uint8Array(hex.length / 2);
    for (var i = 0; i < out.length; i++) {
      out[i] = parseInt(hex.substr(i * 2, 2), 16);
    }
    return out;
  }

  function concat(parts) {
    var n = parts.reduce(function (sum, p) {
      return sum + p.length;
    }, 0);
    var out = new Uint8Array(n);
    var at = 0;
    parts.forEach(function (p) {
      out.set(p, at);
      at += p.length;
    });
    return out;
  }

  function base64url(bytes) {
    var s = "";
    bytes.forEach(function (b) {
      s += String.fromCharCode(b);
    });
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  // The Warden's key a start_param names: its third part, 64 hex digits.
  function wardenKey(startParam) {
    var parts = startParam.split("_");
    if (parts.length === 3 && /^[0-9a-f]{64}$/.test(parts[2])) {
      return parts[2];
    }
    return null;
  }

  // Resolves to the sealed PIN (base64url); rejects when this browser
  // cannot do X25519 (the page then says how else to do it).
  function seal(pin, startParam) {
    var subtle = root.crypto && root.crypto.subtle;
    var key = wardenKey(startParam);
    if (!subtle || !key) {
      return Promise.reject(new Error("unsupported"));
    }
    var text = new TextEncoder();
    var wardenRaw = hexBytes(key);
    return Promise.all([
      subtle.generateKey({ name: "X25519" }, true, ["deriveBits"]),
      subtle.importKey("raw", wardenRaw, { name: "X25519" }, false, [])
    ]).then(function (keys) {
      var page = keys[0];
      return Promise.all([
        subtle.exportKey("raw", page.publicKey),
        subtle.deriveBits({ name: "X25519", public: keys[1] }, page.privateKey, 256)
      ]).then(function (r) {
        var pageRaw = new Uint8Array(r[0]);
        return subtle
          .importKey("raw", r[1], "HKDF", false, ["deriveKey"])
          .then(function (ikm) {
            return subtle.deriveKey(
              {
                name: "HKDF",
                hash: "SHA-256",
                salt: concat([pageRaw, wardenRaw]),
                info: text.encode(INFO)
              },
              ikm,
              { name: "AES-GCM", length: 256 },
              false,
              ["encrypt"]
            );
          })
          .then(function (aes) {
            var nonce = root.crypto.getRandomValues(new Uint8Array(12));
            return subtle
              .encrypt(
                { name: "AES-GCM", iv: nonce, additionalData: text.encode(startParam) },
                aes,
                text.encode(pin)
              )
              .then(function (sealed) {
                return base64url(concat([pageRaw, nonce, new Uint8Array(sealed)]));
              });
          });
      });
    });
  }

  root.ArombaSeal = { seal: seal, wardenKey: wardenKey };
})(typeof window !== "undefined" ? window : globalThis);

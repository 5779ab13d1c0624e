// Makes the known-answer vector of the PIN seal (`warden/src/seal.rs`, its doc example and tests)
// with the Mini App page's own seal.js under Node's WebCrypto, its random
// key and nonce fixed: the RFC 7748 keys (the page is Alice, the Warden
// Bob) and a nonce of 0x00..0x0b. Run: node scripts/seal-vector.js
"use strict";
const path = require("path");

const subtle = globalThis.crypto.subtle;
const pkcs8 = (hex) =>
  Buffer.concat([Buffer.from("302e020100300506032b656e04220420", "hex"), Buffer.from(hex, "hex")]);
const ALICE = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a";
const ALICE_PUBLIC = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
const BOB_PUBLIC = "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f";

// The page's one key pair and one nonce, fixed.
subtle.generateKey = async () => ({
  privateKey: await subtle.importKey("pkcs8", pkcs8(ALICE), { name: "X25519" }, false, ["deriveBits"]),
  publicKey: await subtle.importKey("raw", Buffer.from(ALICE_PUBLIC, "hex"), { name: "X25519" }, true, []),
});
globalThis.crypto.getRandomValues = (a) => {
  a.forEach((_, i) => (a[i] = i));
  return a;
};

require(path.join(__dirname, "../relay/src/mini_app/page/seal.js"));
const param = "00112233445566778899aabbccddeeff_" + "0".repeat(64) + "_" + BOB_PUBLIC;
globalThis.ArombaSeal.seal("428193", param).then((sealed) => {
  console.log(param);
  console.log(sealed);
});

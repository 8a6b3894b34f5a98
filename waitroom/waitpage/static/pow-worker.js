// Proof-of-work solver for the waiting room, run as a Web Worker.
//
// Message in:  {nonce: string, bits: number}
// Messages out: {type: "progress", nonce, tries}
//               {type: "solved", nonce, bits, solution, tries, ms}
//               {type: "error", message}
//
// The solution is the smallest decimal string, counting up from "0", such that
// SHA-256 of the UTF-8 bytes of nonce + ":" + solution has at least `bits`
// leading zero bits. SHA-256 is computed here in plain synchronous JavaScript
// (FIPS 180-4): crypto.subtle.digest is asynchronous and costs a promise per
// hash, which is far slower for a brute-force loop over tiny messages.
"use strict";

var K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
]);
var IV = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
]);
var W = new Int32Array(64);

// compress runs one 64-byte block of buf, starting at off, into the state h.
function compress(h, buf, off) {
  var i, j, x, y;
  for (i = 0; i < 16; i++) {
    j = off + (i << 2);
    W[i] = (buf[j] << 24) | (buf[j + 1] << 16) | (buf[j + 2] << 8) | buf[j + 3];
  }
  for (i = 16; i < 64; i++) {
    x = W[i - 15];
    y = W[i - 2];
    W[i] = (W[i - 16] + (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) +
      W[i - 7] + (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10))) | 0;
  }
  var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7], t1, t2;
  for (i = 0; i < 64; i++) {
    t1 = (k + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
      ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
      ((a & b) ^ (a & c) ^ (b & c))) | 0;
    k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
  h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + k) | 0;
}

// digestInto hashes the first len bytes of buf into h (8 words). buf must
// have room for the padding: at least len + 72 bytes. Bytes after len are
// overwritten.
function digestInto(buf, len, h) {
  var total = ((len + 9 + 63) >>> 6) << 6;
  var i;
  buf[len] = 0x80;
  for (i = len + 1; i < total - 4; i++) buf[i] = 0;
  var bits = len * 8; // messages here are far below 2^29 bytes
  buf[total - 4] = bits >>> 24;
  buf[total - 3] = (bits >>> 16) & 0xff;
  buf[total - 2] = (bits >>> 8) & 0xff;
  buf[total - 1] = bits & 0xff;
  h.set(IV);
  for (i = 0; i < total; i += 64) compress(h, buf, i);
}

function leadingZeroBits(h) {
  var n = 0, z;
  for (var i = 0; i < 8; i++) {
    z = Math.clz32(h[i]);
    n += z;
    if (z < 32) break;
  }
  return n;
}

function hex(h) {
  var s = "";
  for (var i = 0; i < 8; i++) s += ("00000000" + (h[i] >>> 0).toString(16)).slice(-8);
  return s;
}

function sha256Hex(str) {
  var bytes = new TextEncoder().encode(str);
  var buf = new Uint8Array(bytes.length + 72);
  buf.set(bytes);
  var h = new Int32Array(8);
  digestInto(buf, bytes.length, h);
  return hex(h);
}

// selfCheck compares the implementation with the FIPS 180-2 test vectors
// (one block, empty, two blocks) before it is trusted with a challenge.
function selfCheck() {
  var vectors = [
    ["abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"],
    ["", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
    ["abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"]
  ];
  for (var i = 0; i < vectors.length; i++) {
    var got = sha256Hex(vectors[i][0]);
    if (got !== vectors[i][1]) return "sha256(" + JSON.stringify(vectors[i][0]) + ") = " + got;
  }
  return "";
}

var selfCheckError = selfCheck();

function solve(nonce, bits) {
  var prefix = new TextEncoder().encode(nonce + ":");
  var buf = new Uint8Array(prefix.length + 32 + 72);
  buf.set(prefix);
  var h = new Int32Array(8);
  var start = Date.now();
  var digits, j, len;
  for (var n = 0; n <= Number.MAX_SAFE_INTEGER; n++) {
    digits = String(n);
    len = prefix.length;
    for (j = 0; j < digits.length; j++) buf[len++] = digits.charCodeAt(j);
    digestInto(buf, len, h);
    if (leadingZeroBits(h) >= bits) {
      return { type: "solved", nonce: nonce, bits: bits, solution: digits, tries: n + 1, ms: Date.now() - start };
    }
    if ((n & 0xffff) === 0xffff) postMessage({ type: "progress", nonce: nonce, tries: n + 1 });
  }
  return { type: "error", message: "no solution found" };
}

self.onmessage = function (ev) {
  var d = ev.data || {};
  if (selfCheckError) {
    postMessage({ type: "error", message: "SHA-256 self-check failed: " + selfCheckError });
    return;
  }
  if (typeof d.nonce !== "string" || typeof d.bits !== "number" || d.bits < 0 || d.bits > 256) {
    postMessage({ type: "error", message: "bad challenge" });
    return;
  }
  postMessage(solve(d.nonce, d.bits));
};

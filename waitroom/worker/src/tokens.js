// The waiting room's tokens, byte for byte as waitroom/roomtoken writes
// them: tickets and admission tokens (HS256 JWTs, header
// {"alg":"HS256","kid":KID,"typ":"JWT"}, claims in a fixed order), the
// admission id, the challenge, the draw, and the customer's token as the
// origin's fast path (auth's FastCustomer) decides it. Web-standard APIs
// only (WebCrypto, TextEncoder, BigInt).

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

export const TICKET_TTL_S = 24 * 3600;
export const ADMISSION_TTL_S = 120;
const MAX_ID_LEN = 128;
const MAX_TOKEN_LEN = 1280;
const CUSTOMER_LEEWAY_S = 5;

// base64url without padding, and standard base64 (Go's []byte in JSON).
export function b64url(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
export function fromB64url(s) {
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) throw new Error("malformed base64url");
  return fromB64(s.replace(/-/g, "+").replace(/_/g, "/"));
}
export function fromB64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
export const utf8 = (s) => enc.encode(s);

// jsonString writes s as Go's encoding/json does: html true as json.Marshal
// (HTML-safe), false as an Encoder with SetEscapeHTML(false) (the tokens'
// claims). JSON.stringify already escapes '"', '\\' and control characters
// as Go does (\b, \f, \n, \r, \t, else \u00xx); Go also escapes U+2028 and
// U+2029, and, HTML-safe, <, > and &.
export function jsonString(s, html = false) {
  let out = JSON.stringify(s).replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
  if (html) out = out.replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026");
  return out;
}

async function hmacKey(secret) {
  return crypto.subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}
export async function hmac(cryptoKey, data) {
  return new Uint8Array(await crypto.subtle.sign("HMAC", cryptoKey, typeof data === "string" ? utf8(data) : data));
}
export async function sha256(data) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", typeof data === "string" ? utf8(data) : data));
}

// equalBytes compares in time independent of where they differ.
export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

// A Keyring is FLASHLINE_WAITROOM_KEYS ("kid:secret[,kid:secret...]", the
// first signs), or, with none, the key derived from the JWT secret (kid
// "d1", HMAC-SHA256(secret, "flashline waitroom keys v1")), as the origins'.
export async function parseKeyring(spec, jwtSecret) {
  const entries = [];
  if (spec && spec.trim() !== "") {
    for (const raw of spec.split(",")) {
      const entry = raw.trim();
      const i = entry.indexOf(":");
      if (i < 0) throw new Error("waitroom keys: an entry is not kid:secret");
      const id = entry.slice(0, i);
      const secret = entry.slice(i + 1);
      if (!/^[A-Za-z0-9_-]{1,16}$/.test(id)) throw new Error("waitroom keys: bad key id");
      if (utf8(secret).length < 32) throw new Error(`waitroom keys: key ${id}: secret shorter than 32 bytes`);
      entries.push([id, utf8(secret)]);
    }
  } else if (jwtSecret) {
    const m = await hmac(await hmacKey(utf8(jwtSecret)), "flashline waitroom keys v1");
    entries.push(["d1", m]);
  } else {
    throw new Error("no waiting-room keys: set FLASHLINE_WAITROOM_KEYS or FLASHLINE_JWT_SECRET");
  }
  const keys = [];
  for (const [id, secret] of entries) {
    const mac = await hmacKey(secret);
    const seal = await crypto.subtle.importKey("raw", await hmac(mac, "flashline draw seed seal v1"), "AES-GCM", false, ["decrypt"]);
    const header = b64url(utf8(`{"alg":"HS256","kid":${jsonString(id)},"typ":"JWT"}`));
    keys.push({ id, mac, seal, header });
  }
  return { keys, signer: keys[0] };
}

// sign is header "." base64url(payload) "." base64url(HMAC), with key.
export async function sign(key, payload) {
  const signed = key.header + "." + b64url(utf8(payload));
  return signed + "." + b64url(await hmac(key.mac, signed));
}

// verify checks a JWS of the keyring (the exact header of one of its keys,
// its HMAC) and returns the payload's text and the key, or null.
export async function verify(keyring, token, maxLen) {
  if (typeof token !== "string" || token.length > maxLen) return null;
  const parts = token.split(".");
  if (parts.length !== 3 || parts[2].length !== 43) return null;
  const key = keyring.keys.find((k) => k.header === parts[0]);
  if (!key) return null;
  let sig, payload;
  try {
    sig = fromB64url(parts[2]);
    payload = dec.decode(fromB64url(parts[1]));
  } catch {
    return null;
  }
  if (!equalBytes(sig, await hmac(key.mac, parts[0] + "." + parts[1]))) return null;
  return { payload, key };
}

// checkID is roomtoken's: 1-128 bytes of UTF-8 without control characters.
export function validID(id) {
  return typeof id === "string" && id.length > 0 && utf8(id).length <= MAX_ID_LEN && !/[\u0000-\u001f\u007f-\u009f]/.test(id);
}

// ticketClaims is a ticket's claims as SignTicket writes them.
function ticketClaims(t) {
  return `{"aud":"flashline-ticket","sub":${jsonString(t.customerID)},"iat":${t.arrivedAt},"exp":${t.arrivedAt + TICKET_TTL_S},` +
    `"sale":${jsonString(t.saleID)},"pos":${t.position},"preopen":${t.preOpen},"draw":${t.draw.toString()}}`;
}

// A ticket: {saleID, customerID, arrivedAt (Unix s), position, preOpen,
// draw (BigInt)}.
export function signTicket(keyring, t) {
  return sign(keyring.signer, ticketClaims(t));
}

// parseTicket verifies a ticket as ParseTicket does and returns it, or null.
// nowS is the database's clock (Unix s) its expiry is judged by.
export async function parseTicket(keyring, token, nowS) {
  if (typeof token !== "string" || !/^[A-Za-z0-9_.-]*$/.test(token)) return null;
  const v = await verify(keyring, token, MAX_TOKEN_LEN);
  if (!v) return null;
  let c;
  try {
    c = JSON.parse(v.payload);
  } catch {
    return null;
  }
  const names = ["aud", "sub", "iat", "exp", "sale", "pos", "preopen", "draw"];
  if (c === null || typeof c !== "object" || Object.keys(c).length !== names.length || !names.every((n) => n in c)) return null;
  // The draw is a uint64: read from the text, not as a float.
  const m = /,"draw":(0|[1-9][0-9]{0,19})}$/.exec(v.payload);
  if (!m || c.aud !== "flashline-ticket" || !validID(c.sale) || !validID(c.sub)) return null;
  if (!Number.isSafeInteger(c.iat) || c.iat < 946684800 || c.iat > 7289567999 || c.exp !== c.iat + TICKET_TTL_S) return null;
  if (!Number.isSafeInteger(c.pos) || c.pos < 1 || typeof c.preopen !== "boolean" || nowS >= c.exp) return null;
  const draw = BigInt(m[1]);
  if (draw >= 1n << 64n) return null;
  return { saleID: c.sale, customerID: c.sub, arrivedAt: c.iat, position: c.pos, preOpen: c.preopen, draw };
}

// admissionID is roomtoken.AdmissionID: base64url of the first 16 bytes of
// SHA-256 over {"s":sale,"c":customer,"t":arrival,"p":position,"o":preopen,"d":draw}.
export async function admissionID(t) {
  const input = `{"s":${jsonString(t.saleID)},"c":${jsonString(t.customerID)},"t":${t.arrivedAt},"p":${t.position},` +
    `"o":${t.preOpen},"d":${t.draw.toString()}}`;
  return b64url((await sha256(input)).slice(0, 16));
}

// signAdmission is SignAdmission: {aud, sub, jti, exp, sale}.
export function signAdmission(keyring, a) {
  return sign(keyring.signer, `{"aud":"flashline-admission","sub":${jsonString(a.customerID)},"jti":${jsonString(a.id)},` +
    `"exp":${a.expiresAt},"sale":${jsonString(a.saleID)}}`);
}

// challengeNonce is ChallengeNonce with key (the signing key unless said):
// base64url of HMAC-SHA256(key, "pow\0" + admission id), 16 bytes.
export async function challengeNonce(key, t) {
  return b64url((await hmac(key.mac, "pow\u0000" + (await admissionID(t)))).slice(0, 16));
}

// verifyChallenge is VerifyChallenge: a decimal solution (1-20 digits, no
// leading zero) whose SHA-256(nonce ":" solution) has bits leading zero
// bits, the nonce of any key of the ring.
export async function verifyChallenge(keyring, t, solution, bits) {
  if (bits <= 0) return true;
  if (bits > 256 || !/^(0|[1-9][0-9]{0,19})$/.test(solution)) return false;
  for (const key of keyring.keys) {
    if (leadingZeroBits(await sha256((await challengeNonce(key, t)) + ":" + solution)) >= bits) return true;
  }
  return false;
}

function leadingZeroBits(sum) {
  let n = 0;
  for (const b of sum) {
    if (b !== 0) return n + Math.clz32(b) - 24;
    n += 8;
  }
  return n;
}

// draw is flashline.Draw: the first 8 bytes, big-endian, of
// SHA-256(seed ‖ sale id ‖ 0x00 ‖ customer id).
export async function draw(seed, saleID, customerID) {
  const s = utf8(saleID), c = utf8(customerID);
  const b = new Uint8Array(seed.length + s.length + 1 + c.length);
  b.set(seed, 0);
  b.set(s, seed.length);
  b.set(c, seed.length + s.length + 1);
  const sum = await sha256(b);
  let v = 0n;
  for (let i = 0; i < 8; i++) v = (v << 8n) | BigInt(sum[i]);
  return v;
}

// drawRank is flashline.DrawRank: 1 + floor(draw × n / 2^64), n ≥ 1.
export function drawRank(d, preopenCount) {
  const n = BigInt(Math.max(preopenCount, 1));
  return 1 + Number((d * n) >> 64n);
}

// crowdDraw is what flashline.CrowdRank ranks a holder of a committed
// pre-open crowd by: the first 8 bytes, big-endian, of SHA-256(the final
// seed as 32 bytes ‖ RegistrantOf(sale, customer)), where RegistrantOf is
// SHA-256("flashline/lottery/registrant/v1" 0 sale 0 customer). The rank is
// drawRank of it in the crowd as frozen.
const REGISTRANT_TAG = utf8("flashline/lottery/registrant/v1");
export async function crowdDraw(finalSeed, saleID, customerID) {
  const s = utf8(saleID), c = utf8(customerID);
  const b = new Uint8Array(REGISTRANT_TAG.length + 1 + s.length + 1 + c.length);
  b.set(REGISTRANT_TAG, 0);
  b.set(s, REGISTRANT_TAG.length + 1);
  b.set(c, REGISTRANT_TAG.length + 1 + s.length + 1);
  const k = new Uint8Array(64);
  k.set(finalSeed.subarray(0, 32), 0);
  k.set(await sha256(b), 32);
  const sum = await sha256(k);
  let v = 0n;
  for (let i = 0; i < 8; i++) v = (v << 8n) | BigInt(sum[i]);
  return v;
}

// customerOf is the customer an HS256 token signed with the JWT secret
// names, decided as the origin's fast path does (auth's FastCustomer): the
// header {"alg":"HS256","typ":"JWT"}, a good signature, sub a string of
// 1-128 characters of text, exp an integer not passed (5 s leeway), nbf and
// iat, if there, passed. Anything else is null: the Worker does not decide
// it and passes the request on to an origin, which does.
const HS256_HEADER = b64url(utf8('{"alg":"HS256","typ":"JWT"}'));
export async function customerOf(jwtKey, authorization, nowS) {
  if (!jwtKey || typeof authorization !== "string" || !authorization.startsWith("Bearer ")) return null;
  const token = authorization.slice(7);
  if (token.length > 1024) return null;
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== HS256_HEADER) return null;
  let c;
  try {
    if (!equalBytes(fromB64url(parts[2]), await hmac(jwtKey, parts[0] + "." + parts[1]))) return null;
    const text = dec.decode(fromB64url(parts[1]));
    if (text.includes("\\")) return null; // escapes: not the plainest JSON
    c = JSON.parse(text);
  } catch {
    return null;
  }
  if (c === null || typeof c !== "object" || Array.isArray(c) || "payment_instrument" in c) return null;
  const int = (v) => Number.isSafeInteger(v);
  if (typeof c.sub !== "string" || !int(c.exp) || nowS >= c.exp + CUSTOMER_LEEWAY_S) return null;
  for (const k of ["nbf", "iat"]) if (k in c && (!int(c[k]) || nowS + CUSTOMER_LEEWAY_S < c[k])) return null;
  const runes = [...c.sub].length;
  if (runes === 0 || runes > 128 || /[\u0000-\u001f\u007f-\u009f]/.test(c.sub)) return null;
  return c.sub;
}

export async function jwtKeyOf(secret) {
  return secret ? hmacKey(utf8(secret)) : null;
}

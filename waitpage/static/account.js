// The customer's access token: reading it (not verifying: the server does
// that; the page only needs the customer id to keep its storage apart),
// signing in by pasting one, and choosing between the stored token and
// another one a link (#token=…) carries.
//
// A link's token is stored only once the customer chose it (unless it is the
// very token kept already): the page asks (choose_account), showing the
// link's account beside the one kept, if any, so that a link someone else
// sent cannot silently make the customer queue and buy as them.

import { store } from "./storage.js";
import { sale, state, stopAll } from "./state.js";
import { $, setState } from "./ui.js";

// claims decodes the JWT payload, or null.
export function claims(token) {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    let b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) b64 += "=";
    const bin = window.atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    return null;
  }
}

export function hasSubject(c) { return !!c && typeof c.sub === "string" && c.sub !== ""; }
export function isExpired(c) { return typeof c.exp === "number" && c.exp * 1000 < Date.now(); }

// usable is whether token is one begin() would go on with.
export function usable(token) {
  const c = token ? claims(token) : null;
  return hasSubject(c) && !isExpired(c);
}

// ---- sign in ----

export function showSignin(reason) {
  stopAll();
  $("account-line").hidden = true;
  if (reason) $("signin-reason").textContent = reason;
  setState("signin", reason || "Sign in to join the line.");
}

// signIn stores the token pasted in the form; false when there is none.
export function signIn() {
  const v = $("jwt-input").value.trim().replace(/^Bearer\s+/i, "");
  if (!v) return false;
  $("jwt-input").value = "";
  store.set(sale.jwtKey, v);
  return true;
}

// rejectJWT forgets a token the server refused and asks for another.
export function rejectJWT() {
  store.del(sale.jwtKey);
  state.jwt = null;
  showSignin("The store did not accept your access token. Paste a new one.");
}

// ---- a link with another account's token ----

// tokenNote says what is wrong with a token, or (withExpiry: to tell two
// tokens of one account apart) until when it is valid.
function tokenNote(c, withExpiry) {
  if (!hasSubject(c)) return "This token cannot be read.";
  if (typeof c.exp !== "number") return "";
  if (isExpired(c)) return "This token has expired.";
  return withExpiry ? "Valid until " + new Date(c.exp * 1000).toLocaleString() + "." : "";
}

// askAccount shows the choice between the stored token (usable, or null
// when none is kept) and the link's (whatever it is); nothing is stored
// until the customer chooses.
export function askAccount(stored, offered) {
  stopAll();
  state.linkToken = offered;
  const cur = stored ? claims(stored) : null, off = claims(offered);
  const same = !!cur && hasSubject(off) && off.sub === cur.sub;
  $("account-current").textContent = cur ? cur.sub : "(no account on this device)";
  $("account-current-note").textContent = cur ? tokenNote(cur, same) : "";
  $("account-link").textContent = hasSubject(off) ? off.sub : "(unknown account)";
  $("account-link-note").textContent = tokenNote(off, same);
  $("account-keep").textContent = cur ? "Keep my current account" : "Sign in with my own account";
  $("account-switch").textContent = cur ? "Switch to the link's account" : "Continue with the link's account";
  if (!cur) {
    $("account-text").textContent = "The link you opened carries an access token: with it, you would wait in line and buy as its account. If someone else sent you this link, the account may be theirs.";
    setState("choose_account", "This link carries an access token. Choose whether to use its account.");
  } else {
    $("account-text").textContent = same
      ? "The link you opened carries another access token for the same account."
      : "The link you opened carries the access token of a different account. If someone sent you this link, the account may be theirs: with it, you would wait in line and buy as them.";
    setState("choose_account", "This link carries a different access token. Choose which account to use.");
  }
  $("account-title").focus();
}

// chooseAccount records the customer's choice: the link's token replaces
// the stored one only when useLink.
export function chooseAccount(useLink) {
  if (useLink && state.linkToken) store.set(sale.jwtKey, state.linkToken);
  state.linkToken = null;
}

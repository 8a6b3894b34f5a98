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
import { t, dateTime } from "./i18n.js";

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
  setState("signin", reason || t("signin.status"));
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
  showSignin(t("signin.rejected"));
}

// ---- a link with another account's token ----

// tokenNote says what is wrong with a token, or (withExpiry: to tell two
// tokens of one account apart) until when it is valid.
function tokenNote(c, withExpiry) {
  if (!hasSubject(c)) return t("account.unreadable");
  if (typeof c.exp !== "number") return "";
  if (isExpired(c)) return t("account.expired");
  return withExpiry ? t("account.validUntil", { time: dateTime(c.exp * 1000, { dateStyle: "medium", timeStyle: "medium" }) }) : "";
}

// askAccount shows the choice between the stored token (usable, or null
// when none is kept) and the link's (whatever it is); nothing is stored
// until the customer chooses.
export function askAccount(stored, offered) {
  stopAll();
  state.linkToken = offered;
  const cur = stored ? claims(stored) : null, off = claims(offered);
  const same = !!cur && hasSubject(off) && off.sub === cur.sub;
  $("account-current").textContent = cur ? cur.sub : t("account.none");
  $("account-current-note").textContent = cur ? tokenNote(cur, same) : "";
  $("account-link").textContent = hasSubject(off) ? off.sub : t("account.unknown");
  $("account-link-note").textContent = tokenNote(off, same);
  $("account-keep").textContent = t(cur ? "account.keep" : "account.keepNone");
  $("account-switch").textContent = t(cur ? "account.switch" : "account.switchNone");
  if (!cur) {
    $("account-text").textContent = t("account.textNone");
    setState("choose_account", t("account.statusNone"));
  } else {
    $("account-text").textContent = t(same ? "account.textSame" : "account.textOther");
    setState("choose_account", t("account.statusOther"));
  }
  $("account-title").focus();
}

// chooseAccount records the customer's choice: the link's token replaces
// the stored one only when useLink.
export function chooseAccount(useLink) {
  if (useLink && state.linkToken) store.set(sale.jwtKey, state.linkToken);
  state.linkToken = null;
}

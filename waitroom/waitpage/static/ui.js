// The page's states on screen. The root element #app carries the state in
// data-state: loading, signin, choose_account, lottery, waiting, paused,
// unreachable, admitted, choosing, reserving, reserved, awaiting_payment, paid,
// sold_out, sold_out_for_now, limit_reached, expired, cancelled, voided,
// error. Each has its <section id="state-…"> in wait.html (choosing and
// reserving show admitted's, awaiting_payment reserved's); only the current
// one is shown.

import { state, stopAll } from "./state.js";
import { host } from "./host.js";
import { t, fill, number, dateTime, inSeconds, duration } from "./i18n.js";
import { look } from "./look.js";

// The elements are the page's, or (embedded) in the shadow root the embed
// made in the shop's page: host.root either way.
export const app = host.root.getElementById("app");

export function $(id) { return host.root.getElementById(id); }

const sectionOf = { choosing: "admitted", reserving: "admitted", awaiting_payment: "reserved" };

// setState shows state name's section. announce is the status line's text.
export function setState(name, announce) {
  const section = "state-" + (sectionOf[name] || name);
  const panels = app.querySelectorAll("section[id^='state-']");
  for (let i = 0; i < panels.length; i++) panels[i].hidden = panels[i].id !== section;
  const changed = app.dataset.state !== name;
  app.dataset.state = name;
  // The status line is the aria-live region: it changes when the state
  // does (or when told), not on every poll, so a screen reader is not
  // flooded with position updates.
  if (announce && (changed || $("status-text").textContent !== announce)) $("status-text").textContent = announce;
  if (name !== "waiting" && name !== "paused" && name !== "loading") $("challenge").hidden = true;
  if (name !== "unreachable") {
    window.clearInterval(state.retryTimer);
    state.retryTimer = 0;
  }
}

// showError stops everything and shows message; "Try again" starts over.
export function showError(message) {
  stopAll();
  $("error-text").textContent = message || t("error.generic");
  setState("error", t("error.status", { message: message || t("error.generic") }));
}

// showWaiting shows the place in line from a ticket or status answer b.
export function showWaiting(b) {
  if (typeof b.position === "number") $("position").textContent = formatPosition(b.position);
  // A place by the draw is an estimate: its quartiles come with it.
  const r = b.positionRange;
  if (r && typeof r.p25 === "number" && typeof r.p75 === "number" && r.p25 !== r.p75) {
    $("position-p25").textContent = formatPosition(r.p25);
    $("position-p75").textContent = formatPosition(r.p75);
    $("position-range").hidden = false;
  } else if ("position" in b) {
    $("position-range").hidden = true;
  }
  if ("estimatedWaitSeconds" in b) $("eta").textContent = formatWait(b.estimatedWaitSeconds);
  setState("waiting", t("waiting.status"));
}

// showPaused shows that nobody is let in now: the sale is paused, or (held)
// the store holds the line.
export function showPaused(position, held) {
  if (typeof position === "number") {
    $("paused-position").textContent = formatPosition(position);
    $("paused-position-wrap").hidden = false;
  }
  $("paused-title").textContent = t(held ? "paused.held" : "paused.title");
  setState("paused", t(held ? "paused.heldStatus" : "paused.status"));
}

// showBroadcast shows the store's message to everyone waiting, if any.
export function showBroadcast(message) {
  const box = $("broadcast");
  if (typeof message === "string" && message !== "") {
    $("broadcast-text").textContent = message;
    box.hidden = false;
  } else {
    box.hidden = true;
  }
}

// showUnreachable says "come back shortly": the room cannot answer now
// (no answer, 5xx, 429, or an edge that lost its origin). The place in line
// is kept (the ticket is the customer's); the page asks again by itself in
// ms, and counts down to it.
export function showUnreachable(ms) {
  setState("unreachable", t("unreachable.status"));
  const until = Date.now() + ms;
  const tick = function () {
    const s = Math.max(0, Math.ceil((until - Date.now()) / 1000));
    $("retry-in").textContent = inSeconds(s);
  };
  tick();
  window.clearInterval(state.retryTimer);
  state.retryTimer = window.setInterval(tick, 1000);
}

// showSale shows what the policy p says of the sale: the product's title
// and picture (an https URL, as the API promises), and when it opens, in
// the shopper's time zone, with a countdown by the server's clock.
export function showSale(p) {
  if (!p) return;
  if (typeof p.title === "string" && p.title !== "") {
    $("product-title").textContent = p.title;
    if (!host.embedded) document.title = t("page.titleWithProduct", { title: p.title }); // the shop's title is the shop's
  }
  const img = $("product-image");
  if (typeof p.imageUrl === "string" && p.imageUrl.indexOf("https:") === 0 && img.getAttribute("src") !== p.imageUrl) {
    img.alt = typeof p.title === "string" ? p.title : "";
    img.onload = function () { img.hidden = false; };
    img.onerror = function () { img.hidden = true; };
    img.src = p.imageUrl;
  }
  const opens = typeof p.opensAt === "string" ? Date.parse(p.opensAt) : NaN;
  if (isNaN(opens)) return;
  const at = $("opens-at");
  at.dateTime = p.opensAt;
  at.textContent = formatOpening(opens);
  const zone = timeZone();
  $("opens-zone").textContent = zone ? t("header.zone", { zone: zone }) : "";
  $("opens").hidden = false;
  const tick = function () {
    const left = opens - (Date.now() + state.clockSkewMs);
    if (left <= 0) {
      fill($("opens"), "header.openedAt");
      $("opens-countdown").hidden = true;
      window.clearInterval(state.opensTimer);
      state.opensTimer = 0;
      return;
    }
    if ($("opens").dataset.i18n !== "header.opensAt") fill($("opens"), "header.opensAt");
    $("opens-left").textContent = formatLeft(left);
    $("opens-countdown").hidden = false;
  };
  tick();
  window.clearInterval(state.opensTimer);
  state.opensTimer = window.setInterval(tick, 1000);
}

// showPolicy shows how the line works, as the sale describes it.
export function showPolicy(text) {
  if (!text) return;
  $("policy-text").textContent = text;
  $("policy-box").hidden = false;
  state.policyShown = true;
}

// showLogo shows the store's logo (serve --page-look), if it has one: an
// https image, as the product's picture. Not on a shop's page, which is
// the shop's.
export function showLogo() {
  if (host.embedded || typeof look.logoUrl !== "string" || look.logoUrl.indexOf("https:") !== 0) return;
  const img = $("store-logo");
  img.alt = typeof look.logoAlt === "string" ? look.logoAlt : "";
  img.onload = function () { img.hidden = false; };
  img.onerror = function () { img.hidden = true; };
  img.src = look.logoUrl;
}

// ---- formatting ----

function formatWait(s) {
  if (typeof s !== "number" || s < 0) return "—";
  if (s < 60) return t("eta.under", { duration: duration(0, 1) });
  const m = Math.round(s / 60);
  if (m < 60) return t("eta.about", { duration: duration(0, m) });
  return t("eta.about", { duration: duration(Math.floor(m / 60), m % 60) });
}

// formatOpening is an opening time in the shopper's time zone and
// language, with the zone's name ("Tuesday, 1 December at 15:00 Central
// European Standard Time").
function formatOpening(ms) {
  return dateTime(ms, {
    weekday: "long", day: "numeric", month: "long", year: "numeric",
    hour: "numeric", minute: "2-digit", timeZoneName: "long"
  });
}

function timeZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (e) {
    return "";
  }
}

function formatPosition(p) {
  return typeof p === "number" ? number(p) : "—";
}

function two(n) { return (n < 10 ? "0" : "") + n; }

// formatLeft is a countdown: m:ss, or h:mm:ss.
export function formatLeft(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return (h ? h + ":" + two(m) : String(m)) + ":" + two(s % 60);
}

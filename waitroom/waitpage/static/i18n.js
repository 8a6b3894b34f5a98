// The shopper's language: which one the page speaks, its words, and
// numbers, dates and times written its way (the browser's Intl).
//
// The words are catalogues (waitpage/i18n/<tag>.json, and a store's own:
// serve --page-translations), served as modules: i18n-en.js, English, is
// always loaded (every other language falls back to it, key by key);
// i18n-list.js names the languages there are and the deployment's default;
// the chosen one is imported once, before the flow starts (load).
//
// The language is the first of these that the page speaks (a tag, or its
// language without the region: de-AT is de): ?lang= in the address, the
// embed's data-lang, the browser's languages (navigator.languages, which
// is what it sends as Accept-Language), the deployment's default
// (--page-language), English.
//
// Texts of the markup carry data-i18n, their message key (wait.html); an element inside
// one that the text places, data-slot="name", is {name} in the message, so
// a translation may move the countdown or the time wherever its sentence
// needs it. The scripts' texts are t("key", {values}). Every text is set as
// textContent: a message is never HTML.

import en from "./i18n-en.js";
import { languages, preferred } from "./i18n-list.js";
import { host } from "./host.js";

const current = {
  lang: "en",
  messages: en,
  plural: null,  // Intl.PluralRules
  number: null,  // Intl.NumberFormat
  relative: null // Intl.RelativeTimeFormat
};

// lang is the language the page speaks (a BCP 47 tag: the Intl locale).
export function lang() { return current.lang; }

// dir is its direction: "ltr", or "rtl" (Arabic).
export function dir() { return t("language.dir") === "rtl" ? "rtl" : "ltr"; }

// pick is the first of wanted (tags, in order of preference) that one of
// available matches: the tag itself, else its language alone; "" if none.
export function pick(wanted, available) {
  const lower = available.map(function (a) { return a.toLowerCase(); });
  for (let i = 0; i < wanted.length; i++) {
    if (typeof wanted[i] !== "string" || wanted[i] === "") continue;
    const w = wanted[i].trim().replace(/_/g, "-").toLowerCase();
    let at = lower.indexOf(w);
    if (at < 0) {
      const base = w.split("-")[0];
      at = lower.indexOf(base);
      if (at < 0) at = lower.findIndex(function (a) { return a.split("-")[0] === base; });
    }
    if (at >= 0) return available[at];
  }
  return "";
}

// wanted is every language asked for, in order.
function wanted() {
  const w = [];
  try { w.push(new URLSearchParams(window.location.search).get("lang")); } catch (e) { /* no query */ }
  w.push(host.lang);
  if (Array.isArray(navigator.languages)) w.push.apply(w, navigator.languages);
  w.push(navigator.language, preferred, "en");
  return w;
}

// load picks the language, loads its words and puts them on the page
// (its root element, and the document's when it is the page's own, not a
// shop's); English when anything fails. Call it once, before the flow.
export function load() {
  const tag = pick(wanted(), languages) || "en";
  const words = tag === "en" ? Promise.resolve(null) : import("./i18n-" + tag + ".js");
  return words.then(function (m) {
    if (m) {
      current.messages = m.default;
      current.lang = tag;
    }
  }, function (e) {
    if (window.console) window.console.warn("flashline: language " + tag + " could not be loaded: ", e);
  }).then(apply);
}

// apply makes the formatters of the language chosen and puts its words on
// the page.
function apply() {
  try {
    current.plural = new Intl.PluralRules(current.lang);
    current.number = new Intl.NumberFormat(current.lang);
    current.relative = new Intl.RelativeTimeFormat(current.lang, { numeric: "auto" });
  } catch (e) {
    current.plural = current.number = current.relative = null;
  }
  try {
    translate(host.root);
  } finally {
    // Whatever happened, the page is shown (wait.css hides it until then).
    const app = host.root.getElementById("app");
    if (app && !app.lang) app.lang = current.lang;
  }
}

// translate puts the words on every data-i18n element under root, and the
// language and direction on the flow's root element (the page's <main>, or
// the embed's in the shop's page) and, on the page, on <html> and <title>.
export function translate(root) {
  const els = root.querySelectorAll("[data-i18n]");
  for (let i = 0; i < els.length; i++) fill(els[i], els[i].dataset.i18n);
  const app = root.getElementById("app");
  if (app) {
    app.dir = dir();
    app.lang = current.lang; // last: the style sheet shows the page once it is set
  }
  if (!host.embedded) {
    document.documentElement.lang = current.lang;
    document.documentElement.dir = dir();
    document.title = t("page.title");
  }
}

// t is message key with values filled in ({name}: vars.name, a number
// written the language's way). A message with plural forms takes the one
// for vars.n. A key the language lacks is English's.
export function t(key, vars) {
  let v = Object.prototype.hasOwnProperty.call(current.messages, key) ? current.messages[key] : en[key];
  if (v === undefined) return key;
  if (v !== null && typeof v === "object") {
    const n = vars && typeof vars.n === "number" ? vars.n : 0;
    let form = "other";
    try { form = current.plural ? current.plural.select(n) : (n === 1 ? "one" : "other"); } catch (e) { form = "other"; }
    v = typeof v[form] === "string" ? v[form] : v.other;
  }
  if (typeof v !== "string") return key;
  return v.replace(/\{([A-Za-z0-9_]+)\}/g, function (m, name) {
    if (!vars || !Object.prototype.hasOwnProperty.call(vars, name)) return m;
    const x = vars[name];
    return typeof x === "number" ? number(x) : String(x);
  });
}

// fill sets element el's text to message key: its {name}s are its
// data-slot="name" elements (kept, with what the scripts put in them), or
// vars' values.
export function fill(el, key, vars) {
  el.dataset.i18n = key;
  const slots = {};
  const found = el.querySelectorAll("[data-slot]");
  for (let i = 0; i < found.length; i++) {
    if (found[i].parentElement.closest("[data-i18n]") === el) slots[found[i].dataset.slot] = found[i];
  }
  const parts = t(key, vars).split(/\{([A-Za-z0-9_]+)\}/);
  const doc = el.ownerDocument;
  const nodes = [];
  for (let i = 0; i < parts.length; i++) {
    if (i % 2 === 0) {
      if (parts[i] !== "") nodes.push(doc.createTextNode(parts[i]));
    } else if (slots[parts[i]]) {
      nodes.push(slots[parts[i]]);
      delete slots[parts[i]];
    } else {
      nodes.push(doc.createTextNode("{" + parts[i] + "}"));
    }
  }
  // A slot the message left out stays in the page (the scripts find their
  // elements by id), out of sight.
  for (const name in slots) {
    slots[name].hidden = true;
    nodes.push(slots[name]);
  }
  while (el.firstChild) el.removeChild(el.firstChild);
  for (let i = 0; i < nodes.length; i++) el.appendChild(nodes[i]);
}

// number is n written the language's way (1,234 · 1.234 · ١٬٢٣٤).
export function number(n) {
  try {
    return current.number ? current.number.format(n) : String(n);
  } catch (e) {
    return String(n);
  }
}

// dateTime is the time ms (epoch) in the language, with Intl options.
export function dateTime(ms, options) {
  const d = new Date(ms);
  try {
    return new Intl.DateTimeFormat(current.lang, options).format(d);
  } catch (e) {
    return d.toString();
  }
}

// inSeconds is "in 5 seconds", or "now", in the language.
export function inSeconds(s) {
  try {
    return current.relative ? current.relative.format(s, "second") : s + " s";
  } catch (e) {
    return s + " s";
  }
}

// duration is a duration of m minutes, or h hours and m minutes when h > 0,
// in the language's short words ("5 min", "1 Std., 5 Min.", "1 時間 5 分").
export function duration(h, m) {
  const unit = function (n, u) {
    try {
      return new Intl.NumberFormat(current.lang, { style: "unit", unit: u, unitDisplay: "short" }).format(n);
    } catch (e) {
      return n + " " + u;
    }
  };
  if (!h) return unit(m, "minute");
  if (!m) return unit(h, "hour");
  const parts = [unit(h, "hour"), unit(m, "minute")];
  try {
    return new Intl.ListFormat(current.lang, { style: "narrow", type: "unit" }).format(parts);
  } catch (e) {
    return parts.join(" ");
  }
}

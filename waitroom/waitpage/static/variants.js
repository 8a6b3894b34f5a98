// A sale with variants (sizes, tiers, editions): one line and one admission
// for the whole sale, and the admitted shopper chooses what to reserve. The
// choice is the status answer's list, each variant with its availability
// (available, few_left, sold_out: never a count); a sold-out one is shown
// greyed and cannot be chosen. The list is kept with the admission
// (purchase.js), so that a reload shows the same choice, and the variant
// chosen is kept too until the reservation's answer: a reload resends the
// same request.
//
// The choice is a form of radio buttons in a fieldset: the keyboard moves
// between them with the arrow keys (skipping the disabled ones), and the
// titles keep their own direction (dir="auto") in a right-to-left page.

import { $ } from "./ui.js";
import { t } from "./i18n.js";

// variantsOf is the list a status answer b carries, cleaned: [] for a sale
// without variants.
export function variantsOf(b) {
  if (!b || !Array.isArray(b.variants)) return [];
  const out = [];
  for (let i = 0; i < b.variants.length; i++) {
    const v = b.variants[i];
    if (!v || typeof v.sku !== "string" || v.sku === "") continue;
    out.push({
      sku: v.sku,
      title: typeof v.title === "string" && v.title !== "" ? v.title : v.sku,
      availability: v.availability === "few_left" || v.availability === "sold_out" ? v.availability : "available"
    });
  }
  return out;
}

// titleOf is the title of variant sku in list, else the SKU itself.
export function titleOf(list, sku) {
  if (Array.isArray(list)) {
    for (let i = 0; i < list.length; i++) if (list[i].sku === sku) return list[i].title;
  }
  return sku;
}

// markSoldOut marks variant sku sold out in list (a reservation was
// refused with variant_sold_out). False: nothing is left to choose.
export function markSoldOut(list, sku) {
  let left = false;
  for (let i = 0; i < list.length; i++) {
    if (list[i].sku === sku) list[i].availability = "sold_out";
    if (list[i].availability !== "sold_out") left = true;
  }
  return left;
}

let chosen = null;

// showChoice puts the list on the admitted panel and calls onChoose(sku)
// when the shopper reserves one; note ("" none) says why they choose again.
export function showChoice(list, note, onChoose) {
  chosen = onChoose;
  const box = $("variant-list");
  const before = selected();
  while (box.firstChild) box.removeChild(box.firstChild);
  const doc = box.ownerDocument;
  let focus = null;
  for (let i = 0; i < list.length; i++) {
    const v = list[i];
    const gone = v.availability === "sold_out";
    const label = doc.createElement("label");
    label.className = "variant" + (gone ? " sold-out" : "");
    const input = doc.createElement("input");
    input.type = "radio";
    input.name = "variant";
    input.value = v.sku;
    input.disabled = gone;
    input.checked = !gone && v.sku === before;
    if (!focus && !gone) focus = input;
    const title = doc.createElement("span");
    title.className = "variant-title";
    title.dir = "auto";
    title.textContent = v.title;
    label.appendChild(input);
    label.appendChild(title);
    if (v.availability !== "available") {
      const avail = doc.createElement("span");
      avail.className = "variant-availability small";
      avail.textContent = t(gone ? "variants.soldOut" : "variants.fewLeft");
      label.appendChild(avail);
    }
    box.appendChild(label);
  }
  const msg = $("variant-note");
  msg.textContent = note || "";
  msg.hidden = !note;
  $("admitted-text").hidden = true;
  $("variant-form").hidden = false;
  const reserveBtn = $("variant-reserve");
  reserveBtn.disabled = false;
  reserveBtn.removeAttribute("aria-busy");
  // The first one that can be chosen takes the focus when the choice is
  // new, or when the one chosen was refused: the keyboard starts there.
  if (focus && (note || !before)) focus.focus({ preventScroll: true });
}

// hideChoice takes the choice off the panel (reserving, or another state).
export function hideChoice() {
  chosen = null;
  $("variant-form").hidden = true;
  $("admitted-text").hidden = false;
}

// selected is the SKU whose radio button is checked, "" if none.
function selected() {
  const checked = $("variant-list").querySelector("input[name='variant']:checked");
  return checked && !checked.disabled ? checked.value : "";
}

$("variant-form").addEventListener("submit", function (ev) {
  ev.preventDefault();
  const sku = selected();
  if (!sku) {
    $("variant-note").textContent = t("variants.none");
    $("variant-note").hidden = false;
    return;
  }
  if (typeof chosen === "function") chosen(sku);
});

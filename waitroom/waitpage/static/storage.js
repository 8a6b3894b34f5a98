// What the page keeps across a reload, in localStorage (in memory when
// localStorage is blocked: the page still works, but a reload starts over).
//
//   flashline.jwt.{sale}                  the customer's access token
//   flashline.{sale}.{customer}.ticket    the waiting-room ticket: a reload keeps its place
//   ….pow                                 the proof-of-work answer {nonce, solution}
//   ….idempotencyKey                      the reservation's Idempotency-Key: a retried or
//                                         reloaded reservation is the same one
//   ….admission                           {token, expiresAt, variants, variant} while a
//                                         reservation is being made (variants: the sale's,
//                                         to choose from; variant: the one chosen)
//   ….reservation                         the reservation
//   ….order                               the order
//
// Everything but the token is per customer (the JWT's sub), so that two
// accounts used in one browser keep their places and purchases apart.

const memory = {};

export const store = {
  get: function (k) {
    try { return window.localStorage.getItem(k); } catch (e) { return Object.prototype.hasOwnProperty.call(memory, k) ? memory[k] : null; }
  },
  set: function (k, v) {
    try { window.localStorage.setItem(k, v); } catch (e) { memory[k] = v; }
  },
  del: function (k) {
    try { window.localStorage.removeItem(k); } catch (e) { delete memory[k]; }
  },
  getJSON: function (k) {
    const v = store.get(k);
    if (!v) return null;
    try { return JSON.parse(v); } catch (e) { return null; }
  },
  setJSON: function (k, v) { store.set(k, JSON.stringify(v)); }
};

// jwtKey is where the customer's token for a sale is kept.
export function jwtKey(saleId) {
  return "flashline.jwt." + saleId;
}

// keysFor names what is kept for one sale and customer (sub).
export function keysFor(saleId, sub) {
  const p = "flashline." + saleId + "." + sub + ".";
  return {
    ticket: p + "ticket",
    pow: p + "pow",
    idem: p + "idempotencyKey",
    admission: p + "admission",
    reservation: p + "reservation",
    order: p + "order"
  };
}

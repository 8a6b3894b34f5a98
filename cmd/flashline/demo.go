package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
)

// demoSteps is what `serve --demo` prints after the browser's link: the
// demo's steps as shell lines (sh, bash, zsh; curl and sed) that run as
// pasted, in order, each printed indented by two spaces. {{name}} is
// replaced by printDemo (quoted for the shell where it is a value).
// TestDemoStepsRunAsPasted runs them against a `serve --demo` process.
const demoSteps = `# The demo's values (every step below uses them):
BASE={{url}}
SALE={{sale}}
TOKEN={{token}}
ADMIN_TOKEN={{admin}}
FLASHLINE={{exe}}
# field NAME: the field NAME of the JSON answer on stdin.
field() { sed -n "s/.*\"$1\":\"*\([^\",}]*\).*/\1/p"; }
# need NAME: field NAME, or (the answer has none: the API's error) the answer
# on stderr and nothing; a later step that uses it then stops there.
need() { A=$(cat); V=$(printf '%s\n' "$A" | field "$1"); [ -n "$V" ] || { echo "no $1 in the answer: $A" >&2; return 1; }; printf '%s\n' "$V"; }
# admit CUSTOMER_TOKEN: take a place in line, then ask where it stands at the
# pace each answer says (pollAfterMs) until "admitted", solving the challenge
# when asked (flashline solve); sets ADMISSION_TOKEN.
admit() {
  ADMISSION_TOKEN=
  TICKET=$(curl -s "$BASE/sales/$SALE/ticket" -H "Authorization: Bearer $1" | need token) || return 1
  SOLUTION=
  while :; do
    STATUS=$(curl -s "$BASE/sales/$SALE/status?token=$TICKET$SOLUTION" -H "Authorization: Bearer $1")
    echo "$STATUS"
    case $STATUS in
    *'"state":"admitted"'*) break ;;
    *'"state":"challenge_required"'*)
      SOLUTION="&solution=$("$FLASHLINE" solve --nonce "$(echo "$STATUS" | field nonce)" --bits "$(echo "$STATUS" | field bits)")" ;;
    *'"state":"waiting"'*) sleep $(( $(echo "$STATUS" | field pollAfterMs) / 1000 + 1 )) ;;
    *) echo "not admitted: $STATUS" >&2; return 1 ;;
    esac
  done
  ADMISSION_TOKEN=$(echo "$STATUS" | field admissionToken)
}

# 1. Join the line: "waiting" until the sale opens (at {{opens}}), then the
#    challenge, then "admitted" with an admission token.
admit "$TOKEN"

# 2. Reserve with it, then send the same request again: the same answer,
#    with Idempotent-Replayed: true (one key per checkout, reused on retries;
#    a key belongs to the customer across sales, so this one names the sale).
RESERVATION=$(curl -s -X POST "$BASE/sales/$SALE/reservations" -H "Authorization: Bearer $TOKEN" \
  -H "X-Admission-Token: ${ADMISSION_TOKEN:?not admitted: see the answers above}" -H "Idempotency-Key: demo-$SALE-1" \
  -H 'Content-Type: application/json' -d '{"quantity": 1}' | need reservationId)
echo "reservation: ${RESERVATION:?no reservation: see the answer above}"
curl -si -X POST "$BASE/sales/$SALE/reservations" -H "Authorization: Bearer $TOKEN" \
  -H "X-Admission-Token: $ADMISSION_TOKEN" -H "Idempotency-Key: demo-$SALE-1" \
  -H 'Content-Type: application/json' -d '{"quantity": 1}'; echo

# 3. Pay for the hold as the payment provider would: a signed
#    payment.succeeded event (--type payment.failed cancels the hold instead,
#    --type refund.succeeded voids the order afterwards). The reservation is
#    then confirmed, and the customer's confirm answers its order (before the
#    payment: 409 payment_required).
{{payenv}} "$FLASHLINE" pay --url "$BASE" --reservation "${RESERVATION:?no reservation: see step 2}"
curl -s "$BASE/reservations/$RESERVATION" -H "Authorization: Bearer $TOKEN"; echo
curl -s -X POST "$BASE/reservations/$RESERVATION/confirm" -H "Authorization: Bearer $TOKEN"; echo

# 4. Another customer joins, holds a unit and cancels the hold: the unit is
#    back on sale.
BOB=$("$FLASHLINE" token --customer bob --jwt-secret {{jwt}})
admit "$BOB"
HOLD=$(curl -s -X POST "$BASE/sales/$SALE/reservations" -H "Authorization: Bearer $BOB" \
  -H "X-Admission-Token: ${ADMISSION_TOKEN:?bob was not admitted: see the answers above}" -H "Idempotency-Key: demo-$SALE-bob-1" \
  -H 'Content-Type: application/json' -d '{}' | need reservationId)
curl -s -X POST "$BASE/reservations/${HOLD:?bob holds nothing: see the answer above}/cancel" -H "Authorization: Bearer $BOB"; echo

# 5. The sale as the admin sees it (one confirmed, one cancelled), its
#    fairness policy as customers read it, and extending every pending hold
#    when payment is slow.
curl -s "$BASE/admin/sales/$SALE" -H "Authorization: Bearer $ADMIN_TOKEN"; echo
curl -s "$BASE/sales/$SALE/policy"; echo
curl -s -X POST "$BASE/admin/sales/$SALE/extend" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -H 'Content-Type: application/json' -d '{"seconds": 300}'; echo
`

// printDemo creates the demo sale (a waiting-room sale confirmed by payment
// that opens 20 s from now, late enough to see the waiting state) and prints
// how to buy from it: the waiting-room page for a browser, and demoSteps.
func printDemo(ctx context.Context, store flashline.Store, cfg serveConfig, paymentSecret, url string, stdout io.Writer) error {
	const opensIn = 20 * time.Second
	opensAt := time.Now().Add(opensIn).UTC().Truncate(time.Second)
	sale, err := store.CreateSale(ctx, flashline.NewSale{
		SKU: "demo-sneaker", Title: "Demo sneaker — limited run", InitialStock: 200, PerCustomerLimit: 1, ReservationTTLSeconds: 600,
		OpensAt: &opensAt, Admission: flashline.AdmissionWaitingRoom,
		Fairness: flashline.FairnessRandomizedAtOpen, ChallengeBits: 12,
		Confirmation: flashline.ConfirmByPayment,
	})
	if err != nil {
		return err
	}
	// The page's customer and the shell's are two, so that trying both
	// (the README offers both) is two purchases, not a limit reached.
	token, err := auth.Mint(cfg.jwtSecret, "demo-customer", 24*time.Hour, time.Time{})
	if err != nil {
		return err
	}
	shellToken, err := auth.Mint(cfg.jwtSecret, "demo-shell", 24*time.Hour, time.Time{})
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "flashline"
	}
	steps := strings.NewReplacer(
		"{{url}}", shellQuote(url), "{{sale}}", shellQuote(sale.ID), "{{token}}", shellQuote(shellToken),
		"{{admin}}", shellQuote(cfg.adminToken), "{{exe}}", shellQuote(exe), "{{jwt}}", shellQuote(cfg.jwtSecret),
		"{{opens}}", opensAt.Format(time.RFC3339), "{{payenv}}", payEnv(cfg, paymentSecret),
	).Replace(demoSteps)
	fmt.Fprintf(stdout, `
Flashline is up at %[1]s with a demo sale of 200 units: %[2]s
It admits through its waiting room and opens in %[6]d s (at %[3]s; randomized
at open, a 12-bit challenge). Join before it opens, in a browser:

  %[1]s/sales/%[2]s/wait#token=%[4]s

Or by hand: paste these lines into a shell (sh, bash or zsh; they need curl),
in order. The API is described at %[1]s/openapi.json.

%[5]s
The tokens and secrets above are the demo's; 'flashline token --customer NAME'
mints more customers.
`, url, sale.ID, opensAt.Format(time.RFC3339), token, indent(steps), int(opensIn.Seconds()))
	return nil
}

// indent indents every line that is not empty by two spaces.
func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// payEnv is how the demo tells `flashline pay` the payment secret: the
// development secret itself, or (a real one configured) the variable.
func payEnv(cfg serveConfig, paymentSecret string) string {
	if cfg.paymentSecret != "" {
		return `FLASHLINE_PAYMENT_WEBHOOK_SECRET="$FLASHLINE_PAYMENT_WEBHOOK_SECRET"`
	}
	return "FLASHLINE_PAYMENT_WEBHOOK_SECRET=" + shellQuote(paymentSecret)
}

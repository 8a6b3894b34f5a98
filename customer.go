package flashline

import "time"

// Actor is who is acting on a reservation: a customer, or the admin.
type Actor struct {
	CustomerID string
	Admin      bool
	// AccountCreated is when the customer's account was made, from the
	// token's acct_created claim; zero when the token did not say.
	AccountCreated time.Time
	// PaymentInstrument is the customer's payment instrument, from the
	// token's payment_instrument claim (normalised); "" when the token did
	// not say. A trusted party's word, never the shopper's.
	PaymentInstrument string
}

// CanAct reports whether the actor may act on a reservation owned by customerID.
func (a Actor) CanAct(customerID string) bool { return a.Admin || a.CustomerID == customerID }

// AccountOldEnough reports whether an account created at created is at least
// minSeconds old at now. With a rule in force, an account whose creation time
// is unknown (zero: the token did not say) is refused: the rule fails closed.
func AccountOldEnough(created time.Time, minSeconds int, now time.Time) bool {
	if minSeconds <= 0 {
		return true
	}
	return !created.IsZero() && !now.Before(created.Add(time.Duration(minSeconds)*time.Second))
}

package api

import "github.com/flashline/flashline"

// The contract's JSON shapes. Field order is the order clients see.

// Sale is the sale object of the HTTP contract.
type Sale struct {
	SaleID                string    `json:"saleId"`
	SKU                   string    `json:"sku"`
	Title                 string    `json:"title"`
	ImageURL              *string   `json:"imageUrl"` // null: none
	State                 string    `json:"state"`
	InitialStock          int       `json:"initialStock"`
	Available             int       `json:"available"`
	Pending               int       `json:"pending"`
	Confirmed             int       `json:"confirmed"`
	Expired               int       `json:"expired"`
	Cancelled             int       `json:"cancelled"`
	Voided                int       `json:"voided"`
	PerCustomerLimit      int       `json:"perCustomerLimit"`
	ReservationTTLSeconds int       `json:"reservationTtlSeconds"`
	Admission             string    `json:"admission"`
	Buckets               int       `json:"buckets"`
	Fairness              string    `json:"fairness"`
	ChallengeBits         int       `json:"challengeBits"`
	PerInstrumentLimit    *int      `json:"perInstrumentLimit"` // null: no limit
	MinAccountAgeSeconds  int       `json:"minAccountAgeSeconds"`
	Confirmation          string    `json:"confirmation"`
	OpensAt               *string   `json:"opensAt"`
	PauseReason           string    `json:"pauseReason,omitempty"`
	Invariant             Invariant `json:"invariant"`
	Gate                  Gate      `json:"gate"`
	Lottery               *Lottery  `json:"lottery,omitempty"`
	Price                 *Price    `json:"price"` // null: the sale states none
	Variants              []Variant `json:"variants,omitempty"`
}

// Price is a unit's price: amount in the currency's minor units, currency
// ISO 4217 (upper case). A payment that confirms a hold must pay quantity x
// amount in it.
type Price struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Invariant is the sale's invariant verdict.
type Invariant struct {
	OK        bool    `json:"ok"`
	CheckedAt *string `json:"checkedAt"`
	Detail    string  `json:"detail,omitempty"`
}

// Reservation is the reservation object of the HTTP contract: the
// reservation's receipt (the 201 answer to a reservation, stored and
// replayed byte for byte: flashline.Receipt) and, once confirmed, its order.
type Reservation struct {
	flashline.Receipt
	OrderID string `json:"orderId,omitempty"`
}

// Order is the answer to a confirm: with its variant's SKU in a sale with
// variants.
type Order struct {
	OrderID       string `json:"orderId"`
	ReservationID string `json:"reservationId"`
	Variant       string `json:"variant,omitempty"`
}

// Challenge is the waiting room's proof of work: find a decimal solution
// such that SHA-256(nonce + ":" + solution) has bits leading zero bits.
type Challenge struct {
	Nonce string `json:"nonce"`
	Bits  int    `json:"bits"`
}

// PositionRange is the 25th and 75th percentiles of a place placed by a
// random draw: position is then an estimate, and the page shows the range.
type PositionRange struct {
	P25 int64 `json:"p25"`
	P75 int64 `json:"p75"`
}

// Ticket is the answer to GET /sales/{saleId}/ticket. challenge is null
// when the sale asks none; positionRange is there only when the place is an
// estimate (placed by the draw). The edge's front door writes it by hand
// (ticket.go's AppendJSON): a field added here is added there too, which
// TestTicketJSONAsReflection checks.
type Ticket struct {
	Token                string         `json:"token"`
	Position             int64          `json:"position"`
	PositionRange        *PositionRange `json:"positionRange,omitempty"`
	EstimatedWaitSeconds int64          `json:"estimatedWaitSeconds"`
	PollAfterMs          int64          `json:"pollAfterMs"`
	Policy               string         `json:"policy"`
	Challenge            *Challenge     `json:"challenge"`
}

// Status is the answer to GET /sales/{saleId}/status: exactly the fields
// of its state. The front door writes it by hand (status.go's AppendJSON):
// a field added here is added there too, which TestStatusJSONHasEveryField
// checks.
type Status struct {
	State                string         `json:"state"`
	Position             *int64         `json:"position,omitempty"`
	PositionRange        *PositionRange `json:"positionRange,omitempty"`
	EstimatedWaitSeconds *int64         `json:"estimatedWaitSeconds,omitempty"`
	PollAfterMs          *int64         `json:"pollAfterMs,omitempty"`
	Paused               bool           `json:"paused,omitempty"`
	Held                 bool           `json:"held,omitempty"`
	Stale                bool           `json:"stale,omitempty"`
	Message              string         `json:"message,omitempty"`
	Challenge            *Challenge     `json:"challenge,omitempty"`
	AdmissionToken       string         `json:"admissionToken,omitempty"`
	ExpiresIn            *int64         `json:"expiresIn,omitempty"`
	QueueIsFull          *bool          `json:"queueIsFull,omitempty"`
	// Variants: a sale with variants, each with its availability (never a
	// count).
	Variants []VariantAvailability `json:"variants,omitempty"`
}

// VariantAvailability is one variant of a sale as shoppers see it:
// availability is "available", "few_left" or "sold_out".
type VariantAvailability struct {
	SKU          string `json:"sku"`
	Title        string `json:"title"`
	Availability string `json:"availability"`
}

// Variant is one variant of a sale as the admin API shows it, with its
// counts in units.
type Variant struct {
	SKU          string `json:"sku"`
	Title        string `json:"title"`
	InitialStock int    `json:"initialStock"`
	Available    int    `json:"available"`
	Pending      int    `json:"pending"`
	Confirmed    int    `json:"confirmed"`
}

// Policy is a sale's published fairness policy.
type Policy struct {
	Policy      string `json:"policy"`
	Description string `json:"description"`
	// DrawCommitment is the hex SHA-256 of the sale's draw seed, published
	// before the open; DrawSeed is the seed in hex, from the open on (absent
	// before). See flashline.DiscloseDraw (draw.go).
	DrawCommitment string `json:"drawCommitment"`
	DrawSeed       string `json:"drawSeed,omitempty"`
	// Title, ImageURL and OpensAt are what the waiting-room page shows of
	// the sale: its product, and when it opens (null: when the store opens
	// it).
	Title    string  `json:"title"`
	ImageURL *string `json:"imageUrl"`
	OpensAt  *string `json:"opensAt"`
}

// PaymentResult is the answer to a payment event.
type PaymentResult struct {
	EventID       string `json:"eventId"`
	Type          string `json:"type"`
	Outcome       string `json:"outcome"`
	ReservationID string `json:"reservationId"`
	State         string `json:"state,omitempty"`
	OrderID       string `json:"orderId,omitempty"`
	Replayed      bool   `json:"replayed"`
}

// LatePayment is a payment to refund.
type LatePayment struct {
	EventID          string  `json:"eventId"`
	ReservationID    string  `json:"reservationId"`
	SaleID           string  `json:"saleId"`
	PaymentReference string  `json:"paymentReference"`
	Amount           *int64  `json:"amount"`
	Currency         string  `json:"currency,omitempty"`
	Reason           string  `json:"reason"`
	ReceivedAt       string  `json:"receivedAt"`
	RefundedAt       *string `json:"refundedAt"`
	RefundEventID    string  `json:"refundEventId,omitempty"`
}

// SaleList is GET /admin/sales: a page of sales, newest first. Next, when
// the page is full, is the last sale's id: the after of the next page (which
// may be empty).
type SaleList struct {
	Sales []Sale `json:"sales"`
	Next  string `json:"next,omitempty"`
}

// LatePayments is GET /admin/payments/late.
type LatePayments struct {
	LatePayments []LatePayment `json:"latePayments"`
}

// Extended is what extending a sale's holds did.
type Extended struct {
	SaleID   string `json:"saleId"`
	Seconds  int    `json:"seconds"`
	Extended int    `json:"extended"`
	AtCap    int    `json:"atCap"`
}

// VoidResult is one reservation's line of a bulk void: its state now,
// or the error that kept it from being voided.
type VoidResult struct {
	ReservationID string       `json:"reservationId"`
	State         string       `json:"state,omitempty"`
	OrderID       string       `json:"orderId,omitempty"`
	Error         *ErrorDetail `json:"error,omitempty"`
}

// BulkVoided is the answer to a bulk void.
type BulkVoided struct {
	Voided  int          `json:"voided"`
	Results []VoidResult `json:"results"`
}

// IgnoredEvent is a payment provider's webhook answer for an event
// Flashline does not act on (another type, a partial refund, no
// reservation id): 200, so that the provider does not send it again.
type IgnoredEvent struct {
	EventID string `json:"eventId"`
	Type    string `json:"type"`
	Ignored string `json:"ignored"` // why, for people
}

// Queue is the answer to the queue controls.
type Queue struct {
	SaleID  string  `json:"saleId"`
	Held    *bool   `json:"held,omitempty"`
	Message *string `json:"message,omitempty"`
}

// Watermarks is the answer to GET /edge/watermarks and POST /edge/sync.
type Watermarks struct {
	Document string `json:"document"`
	// HoldersWritten (POST /edge/sync only) says that the pre-open holders
	// the report carried are written to their rooms, or will never be (the
	// room's crowd is committed): the edge forgets them.
	HoldersWritten bool `json:"holdersWritten,omitempty"`
}

// ErrorBody is every error answer: {"error": {"code", "message"}}, the
// code one of the contract's (handlers/errors.go holds the table).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// LimitReached is 409 limit_reached to a reservation: the error, and the
// customer's own reservation (a hold, or an order) in the sale that holds
// the limit, so a client that lost the answer to its first reservation (a
// closed tab, a crashed app) can show it and pay it.
type LimitReached struct {
	Error       ErrorDetail  `json:"error"`
	Reservation *Reservation `json:"reservation,omitempty"`
}

// ErrorDetail is an error answer's code and message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Live is GET /admin/sales/{saleId}/live: the console's snapshot of a sale,
// read at most once a second per sale per instance.
type Live struct {
	Sale Sale `json:"sale"`
	// At is when the snapshot was read, by the database's clock.
	At   string `json:"at"`
	Room *Crowd `json:"room,omitempty"`
	// Rates are the fleet's reservation answers per second: this
	// instance's since the previous snapshot (its own metrics) with every
	// other instance's last second, as it reported it.
	Rates LiveRates `json:"rates"`
	// Instances are the same, instance by instance.
	Instances []InstanceRates `json:"instances"`
	Incidents []Incident      `json:"incidents"`
	Actions   []Action        `json:"actions"`
	// History is the counts at each snapshot this instance read of the sale
	// while it was watched, oldest first, at most ten minutes of them.
	History []LivePoint `json:"history"`
	// Queue is the waiting room's line, every instance's counts added;
	// absent for a sale without a waiting room.
	Queue *QueueStats `json:"queue,omitempty"`
}

// Crowd is a waiting room's crowd.
type Crowd struct {
	// Positions is how many places in line were handed out.
	Positions int64 `json:"positions"`
	// Preopen is the crowd that arrived before the open (frozen at the
	// open; until then, the tickets counted so far).
	Preopen int64 `json:"preopen"`
	// PreopenFrozen says whether Preopen is final.
	PreopenFrozen   bool    `json:"preopenFrozen"`
	Waiting         int64   `json:"waiting"`
	AdmittedThrough int64   `json:"admittedThrough"`
	AdmittedPerSec  float64 `json:"admittedPerSecond"`
	Held            bool    `json:"held"`
	Message         string  `json:"message"`
}

// LiveRates are reservation answers per second, the purchase path's mean
// batch (reservations a transaction) and the reservation route's p99 (ms, the upper
// bound of its histogram bucket; null without answers).
type LiveRates struct {
	Reserved  float64            `json:"reserved"`
	Refused   map[string]float64 `json:"refused"`
	BatchSize float64            `json:"batchSize"`
	P99Ms     *float64           `json:"reserveP99Ms"`
}

// InstanceRates is one instance's share of the live rates.
type InstanceRates struct {
	Instance  string             `json:"instance"`
	This      bool               `json:"this"` // the instance that served the page
	Reserved  float64            `json:"reserved"`
	Refused   map[string]float64 `json:"refused"`
	BatchSize float64            `json:"batchSize"`
	P99Ms     *float64           `json:"reserveP99Ms"`
}

// LivePoint is one snapshot's counts, for the chart.
type LivePoint struct {
	At        int64   `json:"at"` // unix milliseconds
	Available int     `json:"available"`
	Pending   int     `json:"pending"`
	Confirmed int     `json:"confirmed"`
	Expired   int     `json:"expired"`
	Cancelled int     `json:"cancelled"`
	Voided    int     `json:"voided"`
	Reserved  float64 `json:"reserved"`
	Refused   float64 `json:"refused"`
}

// Incident is one incident the invariant job recorded (`flashline incident
// show ID` explains it).
type Incident struct {
	IncidentID int64  `json:"incidentId"`
	Kind       string `json:"kind"`
	Detail     string `json:"detail"`
	At         string `json:"at"`
}

// Action is one operator's action, as audited.
type Action struct {
	Action        string `json:"action"`
	Operator      string `json:"operator"`
	Detail        string `json:"detail"`
	ReservationID string `json:"reservationId,omitempty"`
	Affected      int    `json:"affected"`
	At            string `json:"at"`
}

// Report is GET /admin/sales/{saleId}/report: the sale after the fact.
type Report struct {
	Sale Sale   `json:"sale"`
	At   string `json:"at"`
	Room *Crowd `json:"room,omitempty"`
	// OpenedAt is when the sale opened (its opening time, once passed).
	OpenedAt *string `json:"openedAt"`
	// SoldOutAt is the first moment its units ran out after a reservation;
	// SecondsToSellOut is from OpenedAt to it.
	SoldOutAt        *string    `json:"soldOutAt"`
	SecondsToSellOut *float64   `json:"secondsToSellOut"`
	SoldOutTimes     int        `json:"soldOutTimes"`
	Reservations     int64      `json:"reservations"`
	Customers        int64      `json:"customers"`
	FirstReservation *string    `json:"firstReservationAt"`
	LastReservation  *string    `json:"lastReservationAt"`
	VoidedOrders     int64      `json:"voidedOrders"`
	LatePayments     int64      `json:"latePayments"`
	LateRefunded     int64      `json:"latePaymentsRefunded"`
	Timeline         []Moment   `json:"timeline"`
	Incidents        []Incident `json:"incidents"`
	Actions          []Action   `json:"actions"`
	// Queue is the waiting room's line, as on the live page; absent for a
	// sale without a waiting room.
	Queue *QueueStats `json:"queue,omitempty"`
}

// Moment is one line of a report's timeline.
type Moment struct {
	At    string `json:"at"`
	Event string `json:"event"` // created, opened, sold_out, incident, or an operator's action
	By    string `json:"by,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Repair is POST /admin/sales/{saleId}/repair: what each source says each
// bucket of a paused sale holds, the correction, and whether it was written.
type Repair struct {
	SaleID   string         `json:"saleId"`
	State    string         `json:"state"`
	Needed   bool           `json:"needed"`
	Applied  bool           `json:"applied"`
	Operator string         `json:"operator,omitempty"`
	Buckets  []RepairBucket `json:"buckets"`
	Total    RepairBucket   `json:"total"`
	// Variants: each variant's total, in a sale with variants.
	Variants []RepairBucket `json:"variants,omitempty"`
}

// RepairBucket is one bucket's line of a repair (bucket -1: a total);
// Variant names its variant in a sale with variants.
type RepairBucket struct {
	Bucket     int    `json:"bucket"`
	Variant    string `json:"variant,omitempty"`
	Stock      int    `json:"stock"`
	Implied    int    `json:"implied"`
	Ledger     int    `json:"ledger"`
	Unrecorded int    `json:"unrecorded"`
	Correction int    `json:"correction"`
}

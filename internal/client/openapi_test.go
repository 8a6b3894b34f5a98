package client_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/contract"
)

// jsonNames are the JSON names of t's fields, those of an embedded struct
// without a name of its own included (encoding/json's promotion).
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			names = append(names, jsonNames(f.Type)...)
		case name != "" && name != "-":
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func propertyNames(s *openapi3.Schema) []string {
	var names []string
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestTypesMatchTheDocument: each of the client's types has exactly the
// fields of the document's schema it decodes or sends.
func TestTypesMatchTheDocument(t *testing.T) {
	doc, err := contract.Document()
	require.NoError(t, err)
	schema := func(name string, path ...string) *openapi3.Schema {
		s := doc.Components.Schemas[name].Value
		for _, p := range path {
			if p == "[]" {
				s = s.Items.Value
			} else {
				s = s.Properties[p].Value
			}
		}
		return s
	}
	errorSchema := doc.Components.Responses["NotFound"].Value.Content.Get("application/json").Schema.Value.Properties["error"].Value
	readyz := doc.Paths.Value("/readyz").Get.Responses.Status(503).Value.Content.Get("application/json").Schema.Value
	for _, tt := range []struct {
		name   string
		schema *openapi3.Schema
		value  any
	}{
		{"Sale", schema("Sale"), client.Sale{}},
		{"SaleList", schema("SaleList"), client.SaleList{}},
		{"Sale.gate", schema("Sale", "gate"), client.Gate{}},
		{"Sale.invariant", schema("Sale", "invariant"), client.Invariant{}},
		{"NewSale", schema("NewSale"), client.NewSale{}},
		{"Reservation", schema("Reservation"), client.Reservation{}},
		{"Order", schema("Order"), client.Order{}},
		{"Challenge", schema("Challenge"), client.Challenge{}},
		{"Ticket", schema("Ticket"), client.Ticket{}},
		{"Status", schema("Status"), client.Status{}},
		{"Policy", schema("Policy"), client.Policy{}},
		{"PositionRange", schema("PositionRange"), client.PositionRange{}},
		{"Sale.lottery", schema("Sale", "lottery"), client.Lottery{}},
		{"LotteryCounts", schema("LotteryCounts"), client.LotteryCounts{}},
		{"Registration", schema("Registration"), client.Registration{}},
		{"DrawTranscript", schema("DrawTranscript"), client.DrawTranscript{}},
		{"TranscriptBeacon", schema("TranscriptBeacon"), client.TranscriptBeacon{}},
		{"Queue", schema("Queue"), client.Queue{}},
		{"PaymentEvent", schema("PaymentEvent"), client.PaymentEvent{}},
		{"PaymentEvent.data", schema("PaymentEvent", "data"), client.PaymentData{}},
		{"PaymentResult", schema("PaymentResult"), client.PaymentResult{}},
		{"LatePayments", schema("LatePayments"), client.LatePaymentList{}},
		{"LatePayments.latePayments[]", schema("LatePayments", "latePayments", "[]"), client.LatePayment{}},
		{"Extended", schema("Extended"), client.Extended{}},
		{"BulkVoided", schema("BulkVoided"), client.BulkVoided{}},
		{"BulkVoided.results[]", schema("BulkVoided", "results", "[]"), client.VoidResult{}},
		{"error", errorSchema, client.ErrorBody{}},
		{"readyz", readyz, client.Health{}},
		{"rebuildGate", doc.Paths.Value("/admin/sales/{saleId}/gate/rebuild").Post.Responses.Status(200).Value.Content.Get("application/json").Schema.Value, client.GateCounter{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, propertyNames(tt.schema), jsonNames(reflect.TypeOf(tt.value)),
				"the document's properties (first) and the client's fields (second)")
		})
	}
}

// calls maps each operation of the document to the client's call for it.
var calls = map[string]string{
	"healthz": "Healthz", "readyz": "Readyz", "metrics": "Metrics", "openapi": "OpenAPI",
	"createSale": "CreateSale", "getSale": "Sale", "listSales": "Sales", "openSale": "OpenSale", "pauseSale": "PauseSale",
	"resumeSale": "ResumeSale", "closeSale": "CloseSale", "rebuildGate": "RebuildGate",
	"extendSale": "ExtendSale", "extendReservation": "ExtendReservation",
	"voidReservation": "Void", "voidReservations": "VoidMany", "latePayments": "LatePayments",
	"paymentEvent": "SendPaymentEvent",
	"reserve":      "Reserve", "getReservation": "Reservation", "getOwnReservation": "OwnReservation", "confirm": "Confirm", "cancel": "Cancel",
	"ticket": "Ticket", "status": "Status", "policy": "Policy",
	"register": "Register", "registration": "Registration", "drawTranscript": "DrawTranscript",
	"holdQueue": "HoldQueue", "releaseQueue": "ReleaseQueue", "queueMessage": "QueueMessage",
	"saleLive": "Live", "saleReport": "Report", "repairSale": "Repair",
}

// browser are the operations of a browser, not of an API client: pages,
// their assets, the job UI and its sign-in, the preflights of cross-origin
// requests (CORS).
var browser = []string{"waitPage", "waitPageHead", "waitPageAsset", "waitPageAssetHead",
	"docs", "docsAsset", "loginPage", "login", "logout", "riverUI", "riverUIChange", "favicon", "console", "consoleRedirect", "consoleAsset",
	"reservePreflight", "getReservationPreflight", "getOwnReservationPreflight", "confirmPreflight", "cancelPreflight",
	"ticketPreflight", "statusPreflight", "statusStream", "statusStreamPreflight", "policyPreflight", "registerPreflight", "registrationPreflight", "drawTranscriptPreflight",
	// and an edge's own requests to its origins (edge.Client makes them),
	// the shop's buy button, and the payment providers' own webhooks (their
	// senders are Stripe and Adyen).
	"edgeWatermarks", "edgeSync", "edgeLease", "embedScript", "embedScriptHead", "stripeWebhook", "adyenWebhook"}

// TestEveryOperationHasACall: the client calls every operation of the
// document an API client uses.
func TestEveryOperationHasACall(t *testing.T) {
	doc, err := contract.Document()
	require.NoError(t, err)
	ct := reflect.TypeFor[*client.Client]()
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if slices.Contains(browser, op.OperationID) {
				continue
			}
			call, ok := calls[op.OperationID]
			require.True(t, ok, "%s %s (%s): no client call", method, path, op.OperationID)
			_, ok = ct.MethodByName(call)
			require.True(t, ok, "%s %s (%s): client.%s does not exist", method, path, op.OperationID, call)
		}
	}
}

package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline/waitroom/waitpage"
)

// shopRoutes lists the shoppers' routes: the routes the waiting-room page
// and a shop's app call, also from a page served by another host (CORS,
// cors.go; never on the admin's routes), and the waiting-room page itself.
// customer takes a customer's token, ownerOrAdmin also the admin's;
// oneCustomer caps one customer's requests in flight; pollSlot is the
// limiter's slot at poll priority.
func shopRoutes(r *gin.Engine, d Deps, customer, ownerOrAdmin, oneCustomer, pollSlot gin.HandlerFunc) {
	public := newCrossOrigin(r)
	// A reservation takes a slot of the admission limiter only
	// once its caller is known and its body has arrived and is valid
	// (handleReserve): a client that sends headers and never the body holds
	// nothing another buyer needs. Confirm and cancel finish sales and
	// return stock: they are never shed, and a burst of them queues for the
	// pool they use.
	public.handle(http.MethodPost, "/sales/:saleId/reservations", shedBusySale(d.Refusals), customer, oneCustomer, refuseFromMemory(d.Refusals, d.Logger), handleReserve(d.Store, d.Keyring, d.Limiter, d.now(), d.reservedWith(), d.Logger))
	// A customer's own hold or order in a sale, for one who lost its id.
	public.handle(http.MethodGet, "/sales/:saleId/reservation", customer, oneCustomer, handleCustomerReservation(d.Store, d.Logger))
	public.handle(http.MethodGet, "/reservations/:reservationId", ownerOrAdmin, oneCustomer, handleGetReservation(d.Store, d.Logger))
	public.handle(http.MethodPost, "/reservations/:reservationId/confirm", ownerOrAdmin, oneCustomer, handleConfirm(d.Store, d.Logger))
	public.handle(http.MethodPost, "/reservations/:reservationId/cancel", ownerOrAdmin, oneCustomer, handleCancel(d.Store, d.Logger))
	// The waiting room (waitroom/): a place in line, where it stands, and
	// the sale's published fairness policy (public, but behind the limiter
	// too: a sale it has not seen costs a database read).
	if d.Room != nil {
		public.handle(http.MethodGet, "/sales/:saleId/ticket", customer, oneCustomer, pollSlot, handleTicket(d.Room, d.Logger))
		public.handle(http.MethodGet, "/sales/:saleId/status", customer, oneCustomer, pollSlot, handleStatus(d.Room, d.Logger))
		public.handle(http.MethodGet, "/sales/:saleId/status/stream", customer, oneCustomer, handleStatusStream(d.Room, newStreams(orDefault(d.MaxStreams), d.Registry, d.Draining), d.Logger))
		public.handle(http.MethodGet, "/sales/:saleId/policy", pollSlot, handleSalePolicy(d.Room, d.Store, d.Logger))
	}
	// The lottery's: registering, a registration, the draw's transcript
	// (lottery.go).
	if d.Store != nil {
		registerLotteryRoutes(r, public, d, customer, oneCustomer)
	}
	// Browsers ask before a cross-origin request with these headers
	// (cors.go): one preflight route per customer path.
	public.preflights()
	// The waiting-room page and its assets (no auth: the page calls the API
	// with the customer's token).
	waitpage.Register(r)
}

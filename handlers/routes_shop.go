package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitroom/waitpage"
)

// shopRoutes lists the shoppers' routes: the routes the waiting-room page
// and a shop's app call, also from a page served by another host (CORS,
// cors.go; never on the admin's routes), and the waiting-room page itself.
// customer takes a customer's token, ownerOrAdmin also the admin's;
// customers caps one customer's requests in flight; pollSlot is the
// limiter's slot at poll priority.
func shopRoutes(r *gin.Engine, d Deps, customer, ownerOrAdmin gin.HandlerFunc, customers *customerCap, pollSlot gin.HandlerFunc) {
	public := newCrossOrigin(r)
	oneCustomer := customers.each()
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
		public.handle(http.MethodGet, "/sales/:saleId/status/stream", customer, customers.untilStreaming(), handleStatusStream(d.Room, newStreams(orDefault(d.MaxStreams), d.Registry, d.Draining), d.Logger))
		public.handle(http.MethodGet, "/sales/:saleId/policy", pollSlot, handleSalePolicy(d.Room, d.Store, d.Logger))
	}
	// The lottery's: registering, a registration, the draw's transcript
	// (lottery.go). Registering writes a row and asking reads one, on the
	// waiting room's pool: both take a slot of the limiter at poll
	// priority, so a crowd registering never crowds out buyers.
	if d.Store != nil {
		onShed := func(c *gin.Context) { writeError(c, d.Logger, flashline.ErrOverloaded) }
		slot := loadshed.Gin(d.Limiter, loadshed.PriorityPoll, onShed)
		public.handle(http.MethodPost, "/sales/:saleId/registrations", customer, oneCustomer, slot, handleRegister(d.Store, d.Keyring, d.now(), d.Logger))
		public.handle(http.MethodGet, "/sales/:saleId/registration", customer, oneCustomer, slot, handleRegistration(d.Store, d.Keyring, d.now(), d.Logger))
		public.handle(http.MethodGet, "/sales/:saleId/draw", slot, handleDrawTranscript(d.Store, d.Logger))
		if d.Room == nil {
			public.handle(http.MethodGet, "/sales/:saleId/policy", slot, handleSalePolicy(nil, d.Store, d.Logger))
		}
	}
	// Browsers ask before a cross-origin request with these headers
	// (cors.go): one preflight route per customer path.
	public.preflights()
	// The waiting-room page and its assets (no auth: the page calls the API
	// with the customer's token).
	waitpageRoutes(r)
}

// waitpageRoutes lists the waiting-room page's routes (waitroom/waitpage),
// which an origin and an edge both serve: the page, its assets, the shop's
// script and the icon browsers ask for.
func waitpageRoutes(r gin.IRoutes) {
	r.GET("/sales/:saleId/wait", waitpage.HandlePage)
	r.HEAD("/sales/:saleId/wait", waitpage.HandlePage)
	r.GET(waitpage.AssetPrefix+":version/:file", waitpage.HandleAsset)
	r.HEAD(waitpage.AssetPrefix+":version/:file", waitpage.HandleAsset)
	r.GET(waitpage.EmbedPath, waitpage.HandleEmbed)
	r.HEAD(waitpage.EmbedPath, waitpage.HandleEmbed)
	r.GET("/favicon.ico", waitpage.HandleFavicon)
}

package postgres

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashline/flashline"
)

// constraintErrors maps named constraints to the domain error a violation of
// each means. The names are part of the schema's contract (migrations/).
var constraintErrors = map[string]error{
	"reservations_one_active_per_customer": flashline.ErrLimitReached,
	"reservations_admission_token_unique":  flashline.ErrAdmissionInvalid,
	"stock_quantity_nonneg":                flashline.ErrSoldOut,
	"sales_pkey":                           flashline.Invalid("sale already exists"),
	"orders_payment_reference_unique":      flashline.ErrPaymentReferenceUsed,
	"payment_events_reservation_fkey":      flashline.ErrUnknownReservation,
}

// translate turns a database error into the domain error it means, and leaves
// anything else wrapped as it is. It is the only place that looks inside
// driver errors.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return flashline.ErrNotFound
	}
	if errors.Is(err, context.Canceled) {
		// The caller's context was cancelled (its client went away, or the
		// instance is stopping): nothing is wrong with the database, and a
		// dial or a statement cut short by it is neither an outage
		// (unreachable: a ConnectError wrapping the cancellation) nor
		// overload (pgconn's "context already done" is a Timeout). The
		// caller knows whose context it was (flashline.ClientGone).
		return err
	}
	if serverFull(err) {
		// The server answers but has no session slot left (53300): a busy
		// server, to be retried, not an outage. Roles that may wait have
		// waited already (db.Acquire).
		return errors.Join(flashline.ErrOverloaded, err)
	}
	if unreachable(err) {
		return errors.Join(flashline.ErrUnavailable, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		// The database answers but not in time (a queue for a connection
		// or for the hot row): overload, to be retried, not an outage.
		return errors.Join(flashline.ErrOverloaded, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) &&
		(pgErr.Code == pgerrcode.UniqueViolation || pgErr.Code == pgerrcode.CheckViolation ||
			pgErr.Code == pgerrcode.ForeignKeyViolation) {
		if mapped, ok := constraintErrors[pgErr.ConstraintName]; ok {
			return mapped
		}
	}
	if errors.As(err, &pgErr) && pgerrcode.IsDataException(pgErr.Code) {
		// Class 22: a value the database refuses (a NUL byte in text is
		// 22021, a number out of range 22003). The handlers check what
		// clients send before any statement, so this is the backstop: the
		// request is refused, it is not an internal error.
		return errors.Join(flashline.Invalid("a value in the request cannot be stored"), err)
	}
	return err
}

// notFound reports whether err is a statement that found no row, as
// translate reads it (flashline.ErrNotFound): the thing a read names is not
// there, or a conditional statement's condition did not hold. Each caller
// says which it means.
func notFound(err error) bool { return errors.Is(translate(err), flashline.ErrNotFound) }

// reservationConflict reports whether err is an INSERT into reservations
// meeting a reservation committed since the caller's read, on one of its
// unique indexes (the customer's active hold, the key, the admission token,
// the gate unit): for a batch, a reason to run again (a fresh read answers
// the request concerned), not the request's error, which translate would
// make of some of them.
func reservationConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.TableName == "reservations"
}

// unreachable reports whether err means the database could not be reached or
// is going away: no connection (including a connect that timed out), a broken
// one, or a server shutting down or refusing sessions. On the purchase path
// such an error pauses the sale for that request (fail closed) rather than
// guessing.
func unreachable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !errors.As(err, &connectErr) {
		// The server answered, but is going away or refusing sessions:
		// connection exceptions, shutdown, starting up or in recovery. (A
		// full server, 53300, is overload: serverFull.)
		return pgerrcode.IsConnectionException(pgErr.Code) ||
			pgErr.Code == pgerrcode.AdminShutdown ||
			pgErr.Code == pgerrcode.CrashShutdown ||
			pgErr.Code == pgerrcode.CannotConnectNow
	}
	// A connection the server's side closed in the middle of an answer
	// (a crash, an immediate shutdown, a proxy going away) ends in a bare
	// io.ErrUnexpectedEOF from pgx's row reading, or io.EOF.
	// A statement that was never sent is safe to retry, but it says the
	// server is unreachable only when no deadline ran out first: pgconn
	// refuses a context already done with an error that is both a timeout
	// and safe to retry, and that is a request which waited too long
	// (overload), not an outage.
	return errors.As(err, &connectErr) ||
		(errors.As(err, &netErr) && !netErr.Timeout()) ||
		(pgconn.SafeToRetry(err) && !pgconn.Timeout(err)) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

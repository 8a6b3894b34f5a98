// Package loadshed holds the admission limiter.
//
// It is Flashline's in-process admission limiter: it decides,
// in well under a microsecond, without allocating and without touching the
// database, whether a request may enter the purchase path, may wait a little
// for a slot, or must be turned away with "overloaded". It depends on the standard library only (gin.go is a thin Gin
// adapter).
//
// A Limiter combines a concurrency limit (credits) driven by the wait of the
// scarce resource behind it, a short bounded wait queue with a deadline that
// sheds new arrivals when it stops draining (CoDel), and priorities: new
// reservations before ticket and status polls.
//
// # Admission and priorities
//
// Each priority has a capacity: PriorityReserve may fill the limit,
// PriorityPoll only Options.PollShare of it. A request is admitted at once
// while the requests in flight are below its capacity. Otherwise it may wait
// in a queue of at most Options.QueueSize requests (Poll may hold only
// PollShare of the queue too) for at most Options.MaxWait, never past its
// context. A full queue makes room for a Reserve arrival by shedding its
// newest Poll waiter.
//
// A freed slot goes to the most important waiter, first come first served
// within a priority. Facebook's adaptive LIFO serves the newest first under
// overload, because by then the oldest waiters' clients have often given up;
// here no waiter is ever older than MaxWait (50 ms by default, far below any
// client's timeout), so FIFO costs nothing in staleness and keeps waits
// predictable and fair, and the CoDel rule keeps the queue from standing.
//
// A shrinking limit revokes nothing: requests already in flight finish, and
// InFlight may exceed the new limit until they do.
//
// Work that must not be shed (Flashline's confirm and cancel, which finish
// sales and return stock) does not go through a Limiter at all: it waits for
// its own connection pool, which is the queue it needs.
//
// # CoDel: a queue that absorbs bursts but does not stand
//
// A queue is good when it absorbs a burst and empties again, and bad when it
// stands, adding delay to every request without adding throughput. As in
// CoDel, the limiter tracks the shortest time a request spent queued (its
// sojourn; a request admitted while the queue is empty counts as zero) over
// each Options.Interval. When even that minimum exceeds Options.Target, the
// queue has not been empty for a whole interval: arrivals that find no free
// slot are then shed at once instead of queued, until the queue has drained,
// that is until a request gets through it within Target or is admitted while
// it is empty, the condition on which CoDel leaves its dropping state.
//
// # The limit: credits driven by what saturates
//
// The limit says how many requests may be inside the service at once. It
// starts at Options.InitialLimit, by default MaxLimit: a flash sale is a cold
// start into a spike, and a limit that climbs from a low start (the usual
// slow start of adaptive limiters) spends the spike turning away buyers the
// service could have served.
//
// It is not driven by the requests' latency. Latency-gradient limits
// (Netflix's Gradient2 and Vegas, Envoy's adaptive concurrency) take latency
// above a no-load baseline for congestion. Behind a coalescer that is wrong:
// Flashline's purchase path gathers concurrent reservations of a sale into
// one transaction, so latency grows with the batch size by design, and bigger
// batches sell faster; a gradient limit shrinks exactly when the path is at
// its most efficient, and the two fight. Instead, as in Breakwater (Cho et
// al., OSDI 2020), the limit follows the queueing delay at the resource that
// is actually scarce, which the component behind the limiter reports with
// ObserveWait (the purchase path: how long each batch waited for a database
// connection). Every Options.Interval:
//
//	standing = some waits were reported and the shortest exceeded WaitTarget
//	if standing:                  limit × max(0.5, 1 − 0.1 × (minWait − WaitTarget) / WaitTarget)
//	else if busy and no Timeout:  limit + Step
//	clamped to [MinLimit, MaxLimit]
//
// The minimum over the interval, as in CoDel, tells a standing queue from a
// passing burst. Busy means that at some point in the interval the requests
// in flight reached half the limit: an app-limited interval says nothing
// about whether more would be served, so the limit does not grow on it.
//
// Release(Timeout) (a deadline passed, or the service answered 503/504) is a
// congestion signal as a loss is for TCP: the limit is cut by 10% at once, at
// most once per Interval, and the interval does not grow the limit.
//
// What the limit does not do is the coalescer's own job: how many of one
// sale's reservations may wait for its next batch is bounded there, per sale
// (postgres/batch.go), because one sale's hot row saturates long before the
// pool does, and only the coalescer knows how full its batches are.
//
// Latency (admission to release of Success outcomes, answers under 100µs left
// out as they reached nothing slow) is still measured and published, for
// those who pace by it (the waiting room's pacer), but does not move the
// limit.
//
// # References
//
//   - I. Cho, A. Saeed, J. Fried, S. J. Park, M. Alizadeh, A. Belay,
//     "Overload Control for µs-scale RPCs with Breakwater", OSDI 2020.
//   - Netflix concurrency-limits, Gradient2Limit and VegasLimit (what the
//     limit is not, and why): https://github.com/Netflix/concurrency-limits
//   - Envoy adaptive concurrency filter:
//     https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/adaptive_concurrency_filter
//   - K. Nichols, V. Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012
//     (CoDel).
//   - B. Maurer, "Fail at Scale", ACM Queue 13(8), 2015 (CoDel and adaptive
//     LIFO for request queues).
package loadshed

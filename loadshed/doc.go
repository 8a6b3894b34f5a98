// Package loadshed is Flashline's in-process admission limiter: it decides, in
// microseconds and without touching the database, whether a request may enter
// the purchase path, may wait a little for a slot, or must be turned away with
// "overloaded". It depends on the standard library only (gin.go is a thin Gin
// adapter).
//
// A Limiter combines an adaptive concurrency limit driven by measured latency,
// a short bounded wait queue with a deadline that sheds new arrivals when it
// stops draining (CoDel), and priorities: confirm and cancel before new
// reservations, before ticket and status polls.
//
// # Admission and priorities
//
// Each priority has a capacity: PriorityReserve may fill the limit,
// PriorityPoll only Options.PollShare of it, and PriorityCritical the limit
// plus Options.CriticalHeadroom, so that a flood of reservations, which keeps
// the limit full, cannot starve confirms and cancels. A request is admitted at
// once while the requests in flight are below its capacity. Otherwise it may
// wait in a queue of at most Options.QueueSize requests (Poll may hold only
// PollShare of the queue too) for at most Options.MaxWait, never past its
// context. A full queue makes room for a more important arrival by shedding
// its newest, least important waiter.
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
// # CoDel: a queue that absorbs bursts but does not stand
//
// A queue is good when it absorbs a burst and empties again, and bad when it
// stands, adding delay to every request without adding throughput. As in
// CoDel, the limiter tracks the shortest time a request spent queued (its
// sojourn; a request admitted while the queue is empty counts as zero) over
// each Options.Interval. When even that minimum exceeds Options.Target, the
// queue has not been empty for a whole interval: Reserve and Poll arrivals
// that find no free slot are then shed at once instead of queued (Critical
// ones still queue), until the queue has drained, that is until a request
// gets through it within Target or is admitted while it is empty, the
// condition on which CoDel leaves its dropping state.
//
// # Adaptive limit
//
// Release(Success) adds the request's latency, from admission to release
// (time spent queued is not service time), to a sample window. Samples under
// 100µs are ignored, as in Netflix's WindowedLimit: they are answers that did
// not reach the database (sold out, not open) and would drag the baseline
// down. A window closes once it spans Options.Interval and holds 10 samples;
// then, with s the window's mean latency (the short-term RTT) and baseline a
// slow estimate of the latency without queueing (the long-term RTT):
//
//	gradient = clamp(Tolerance × baseline / s, 0.5, 1)
//	if gradient < 1:             limit = limit × (1 − 0.2 × (1 − gradient))
//	if gradient = 1 and busy:    limit = limit + 0.2 × √limit
//	clamped to [MinLimit, MaxLimit]
//
// This is Gradient2's update, newLimit = limit × gradient + √limit smoothed by
// 0.2, with the two halves separated: a congested window only shrinks the
// limit (by 10% at most), and only an uncongested one grows it by the queue
// allowance √limit. Gradient2 adds the allowance while shrinking as well,
// which gives the decrease a fixed point of (1/(1−gradient))² (16 at a
// gradient of 0.75): a limiter whose latency stays 2.7 times its baseline
// would stop backing off at 16. Here sustained congestion reaches MinLimit.
//
// Release(Timeout) is a congestion signal, as a loss is for TCP or Vegas:
// the limit is cut by 10% at once, at most once per Interval, and the window
// counts as congested. Neither Timeout nor Dropped adds a latency sample.
//
// # Guards against known failure modes
//
// The limit creeping up under steady overload: in Gradient2 the long-term RTT
// is an average of all samples, so under steady overload it rises toward the
// inflated latency until the gradient is 1 again, and the limit then grows by
// √limit every window while the latency never improved. Here:
//
//   - The limit grows only in a window that was busy (at some point in flight
//     reached half the limit: an app-limited window says nothing about
//     whether more concurrency would be served) and not congested (gradient
//     1, no Timeout).
//   - The baseline falls freely (an exponential average with weight 0.05,
//     and, as in Gradient2, × 0.9 more while it exceeds twice s), but rises
//     only from an uncongested window whose s is within 10% of it, by at
//     most 0.5% per window. Inflated latency never pulls it up; it tracks the
//     latency without queueing, as Vegas's rtt_noload and Envoy's minRTT do.
//   - Re-baselining, like Envoy's minRTT recalculation at minimum
//     concurrency: if the service became slower for reasons of its own, the
//     latency stays high even at MinLimit. After 20 consecutive windows at
//     MinLimit whose latency is beyond Tolerance (and that saw no Timeout:
//     timeouts are no latency to learn from), that latency becomes the
//     baseline. To keep the
//     re-baseline from turning a steady overload into creep, the limit may
//     then grow back only up to the limit it had when congestion began, until
//     the latency returns within Tolerance of the old baseline.
//
// Constant latencies from timeouts: requests that time out, are cancelled
// or fail finish at a latency set by a deadline or a failure, not by
// queueing. Fed in as samples, constant timeouts look like a stable
// latency and let the limit grow while everything fails. Release(Dropped)
// and Release(Timeout) add no sample, and Timeout shrinks the limit.
//
// Mixed costs: a latency limit assumes the requests behind it cost roughly
// the same. Answers that skip the database should be given before the
// limiter, or released as Dropped.
//
// # References
//
//   - Netflix concurrency-limits, Gradient2Limit, VegasLimit and WindowedLimit:
//     https://github.com/Netflix/concurrency-limits
//   - Envoy adaptive concurrency filter:
//     https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/adaptive_concurrency_filter
//   - K. Nichols, V. Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012
//     (CoDel).
//   - B. Maurer, "Fail at Scale", ACM Queue 13(8), 2015 (CoDel and adaptive
//     LIFO for request queues).
package loadshed

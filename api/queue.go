package api

// QueueStats is a waiting room's line as the instances counted it
// (flashline.QueueCounts, added together): its times are quantiles of
// fixed buckets (flashline.QueueBuckets), interpolated within the bucket,
// in seconds; nil without any.
type QueueStats struct {
	// Instances is how many instances' counts were added.
	Instances int `json:"instances"`
	// Arrivals is the places in line handed out; ArrivalsLastMinute those
	// of the last whole minute (by the database's clock), and
	// PeakArrivalsPerMinute the most in one minute.
	Arrivals              int64 `json:"arrivals"`
	ArrivalsLastMinute    int64 `json:"arrivalsLastMinute"`
	PeakArrivalsPerMinute int64 `json:"peakArrivalsPerMinute"`
	// Admitted is the tickets admitted; Reserved the reservations made with
	// an admission token; AdmittedNotReserved the difference (those
	// admitted lately may still reserve).
	Admitted            int64 `json:"admitted"`
	Reserved            int64 `json:"reservedAfterAdmission"`
	AdmittedNotReserved int64 `json:"admittedNotReserved"`
	// Left is the waiters who stopped asking (a minute without a poll or a
	// stream's answer) before they were admitted or told the sale sold out
	// for good, once each however many instances they talked to (the
	// instances' counts less their returns: flashline.QueueCounts.LeftLine).
	Left int64 `json:"left"`
	// Queued is the ranks handed out past the watermark; Active the waiters
	// still asking (answered "waiting" in the last minute).
	Queued int64 `json:"queued"`
	Active int64 `json:"active"`
	// From ticket to admission.
	WaitP50 *float64 `json:"waitP50Seconds"`
	WaitP90 *float64 `json:"waitP90Seconds"`
	WaitP99 *float64 `json:"waitP99Seconds"`
	// From admission to reservation.
	ToReserveP50 *float64 `json:"toReserveP50Seconds"`
	ToReserveP90 *float64 `json:"toReserveP90Seconds"`
	ToReserveP99 *float64 `json:"toReserveP99Seconds"`
	// ArrivalsByMinute is the arrivals of each minute, oldest first, the
	// latest two hours of each instance's.
	ArrivalsByMinute []MinuteCount `json:"arrivalsByMinute"`
}

// MinuteCount is one minute's count.
type MinuteCount struct {
	Minute string `json:"minute"` // RFC 3339, the minute's start
	Count  int64  `json:"count"`
}

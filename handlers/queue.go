package handlers

import (
	"log/slog"
	"slices"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
)

// newQueueView adds every instance's counts of a sale's line together
// (flashline.MergeQueue) for the live page and the report; nil for a sale
// without a waiting room. A row that cannot be read is left out, and said
// so in the log.
func newQueueView(room *flashline.RoomCrowd, reports []flashline.QueueReport, at time.Time, logger *slog.Logger) *api.QueueStats {
	if room == nil {
		return nil
	}
	c, instances, bad := flashline.MergeQueue(reports)
	for _, err := range bad {
		if logger != nil {
			logger.Warn("console: an instance's line counts unreadable", "err", err)
		}
	}
	v := &api.QueueStats{
		Instances: instances, Arrivals: c.Arrivals, Admitted: c.Admitted(), Reserved: c.Reserved(),
		Left: c.LeftLine(), Queued: room.Waiting(), Active: c.Active,
		WaitP50: flashline.QueueQuantile(c.Wait, 0.5), WaitP90: flashline.QueueQuantile(c.Wait, 0.9),
		WaitP99:      flashline.QueueQuantile(c.Wait, 0.99),
		ToReserveP50: flashline.QueueQuantile(c.ToReserve, 0.5), ToReserveP90: flashline.QueueQuantile(c.ToReserve, 0.9),
		ToReserveP99:     flashline.QueueQuantile(c.ToReserve, 0.99),
		ArrivalsByMinute: []api.MinuteCount{},
	}
	v.AdmittedNotReserved = max(0, v.Admitted-v.Reserved)
	v.ArrivalsLastMinute = c.Minutes[at.Unix()/60-1]
	minutes := make([]int64, 0, len(c.Minutes))
	for m := range c.Minutes {
		minutes = append(minutes, m)
	}
	slices.Sort(minutes)
	for _, m := range minutes {
		v.PeakArrivalsPerMinute = max(v.PeakArrivalsPerMinute, c.Minutes[m])
		v.ArrivalsByMinute = append(v.ArrivalsByMinute, api.MinuteCount{Minute: stamp(time.Unix(m*60, 0)), Count: c.Minutes[m]})
	}
	return v
}

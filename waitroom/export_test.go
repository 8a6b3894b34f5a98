package waitroom

import "time"

// SignEdgeReport signs rep as an edge does (Edge.Sync), at now.
func SignEdgeReport(k *Keyring, rep EdgeReport, now time.Time) string {
	return k.signDoc(reportAudience, now, requestTTL, rep)
}

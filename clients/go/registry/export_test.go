package registry

// PeakInFlight returns the most requests the client ever had written and unanswered at once.
func PeakInFlight(c *Client) int {
	return int(c.peak.Load())
}

package registry

// PeakInFlight returns the most requests the client ever had written and unanswered at once.
func PeakInFlight(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

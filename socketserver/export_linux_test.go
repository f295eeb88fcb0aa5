package socketserver

// CountRawCalls counts every connection's raw reads of bytes and raw
// writes (Linux) until restore is called (once no server runs): reads and
// writes return the counts so far.
func CountRawCalls() (reads, writes func() int64, restore func()) {
	c := &rawCallCounts{}
	rawCalls.Store(c)
	return c.reads.Load, c.writes.Load, func() { rawCalls.Store(nil) }
}

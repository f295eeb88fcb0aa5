package clientmatrix

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Job is one subtest of a matrix.
type Job struct {
	Name string
	Run  func(t *testing.T)
}

// RunParallel runs jobs as subtests of t, at most limit at once, and
// returns when all have ended. Most of a cell's time is spent waiting
// (process start-up, client back-offs, group joins), so a matrix runs more
// cells than the machine has cores; t.Run may be called from several
// goroutines at once, and a semaphore bounds them rather than t.Parallel,
// whose bound (-parallel, GOMAXPROCS by default) suits CPU-bound tests.
func RunParallel(t *testing.T, limit int, jobs []Job) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.Run(j.Name, j.Run)
		})
	}
	wg.Wait()
}

// Results collects the outcomes of a matrix's cells, keyed by client and
// column, from the subtests that run them.
type Results struct {
	mu    sync.Mutex
	cells map[string]string
}

// Set records the outcome of a cell.
func (r *Results) Set(client, column, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cells == nil {
		r.cells = map[string]string{}
	}
	r.cells[client+"\x00"+column] = outcome
}

// Get returns the outcome of a cell, "skipped" when none was recorded.
func (r *Results) Get(client, column string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.cells[client+"\x00"+column]; ok {
		return o
	}
	return "skipped"
}

// Table renders the results of clients as a markdown table with a version
// column and then columns, each headed by its heading.
func (r *Results) Table(versions map[string]string, columns []string, headings map[string]string) string {
	var b strings.Builder
	b.WriteString("| client | version |")
	for _, c := range columns {
		h := headings[c]
		if h == "" {
			h = c
		}
		fmt.Fprintf(&b, " %s |", h)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(columns)) + "\n")
	for _, client := range Clients {
		fmt.Fprintf(&b, "| %s | %s |", client.Name, versions[client.Name])
		for _, c := range columns {
			fmt.Fprintf(&b, " %s |", r.Get(client.Name, c))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TopicName makes a topic name of its parts: lower case, with every
// character Kafka does not allow in a name replaced by '-'.
func TopicName(parts ...string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, strings.Join(parts, "-"))
}

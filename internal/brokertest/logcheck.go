package brokertest

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// CheckNoDeadLetterCycle fails tb, when it ends, if the node logged a
// message dropped as a dead-letter cycle while tb ran, in a vhost of tb's
// or of its subtests (NewVhost names them after the test). RabbitMQ names
// the vhost in a quorum queue's line; a classic queue's line names none,
// so it counts only on a node this test binary started: on a node other
// test binaries share (RMQTOPO_TEST_NODE_STATE) it may be one of theirs,
// and some make cycles on purpose. Another external broker's log cannot
// be read, and nothing is checked (a test's message counts still catch a
// dropped message).
func (b *Broker) CheckNoDeadLetterCycle(tb testing.TB) {
	if b.Node == nil {
		return
	}
	log := b.Node.LogFile()
	var from int64
	if fi, err := os.Stat(log); err == nil {
		from = fi.Size()
	}
	own := "t-" + sanitize(tb.Name())
	tb.Cleanup(func() {
		data, err := os.ReadFile(log)
		if err != nil {
			tb.Errorf("reading the node's log: %v", err)
			return
		}
		if from > int64(len(data)) {
			from = 0 // the log was rotated
		}
		for _, line := range strings.Split(string(data[from:]), "\n") {
			if b.cycleOf(line, own) {
				tb.Errorf("the broker dropped a message as a dead-letter cycle: %s", line)
			}
		}
	})
}

var logVhost = regexp.MustCompile(`in vhost '([^']*)'`)

// cycleOf reports whether line is a dead-letter cycle that may be in a
// vhost named own-… or own_… (a subtest's).
func (b *Broker) cycleOf(line, own string) bool {
	if !strings.Contains(strings.ToLower(line), "cycle detected") {
		return false
	}
	m := logVhost.FindStringSubmatch(line)
	if m == nil {
		return !b.nodeShared
	}
	v, ok := strings.CutPrefix(m[1], own)
	return ok && (len(own) >= 62 || strings.HasPrefix(v, "-") || strings.HasPrefix(v, "_"))
}

package brokertest

import "testing"

// cycleOf attributes a dead-letter cycle's log line to the test whose
// vhost it names; a line naming none, to the test only on a node of its
// own binary.
func TestCycleOf(t *testing.T) {
	quorum := func(vhost string) string {
		return "2026-11-27 02:34:14.266459+00:00 [warning] <0.31012.0> Dead-letter queues cycle detected for source quorum queue 'rmqtopo.wait.1s' in vhost '" +
			vhost + "' with dead-letter exchange exchange '' in vhost '" + vhost + "' and routing keys [<<\"rmqtopo.wait.1s\">>]"
	}
	classic := `2026-11-27 02:34:14.266459+00:00 [warning] <0.310.0> Message dropped. Dead-letter queues cycle detected: [<<"a">>,<<"b">>]`
	long := "t-" + sanitize("TestAVeryLongNameIndeedThatGoesOnAndOnUntilSanitizeCutsItShort/sub")
	cases := []struct {
		line, own string
		shared    bool
		want      bool
	}{
		{quorum("t-TestDelayBurst-1a2b3c4d"), "t-TestDelayBurst", true, true},
		{quorum("t-TestDelayBurst_sub-1a2b3c4d"), "t-TestDelayBurst", true, true},
		{quorum("t-TestScriptsOnline-aecffed4"), "t-TestDelayBurst", true, false},
		{quorum("t-TestDelayBurstMore-1a2b3c4d"), "t-TestDelayBurst", false, false},
		{quorum(long + "-1a2b3c4d"), long, true, true},
		{classic, "t-TestDelayBurst", false, true},
		{classic, "t-TestDelayBurst", true, false},
		{"2026-11-27 [info] queue 'x' in vhost 't-TestDelayBurst-1' declared", "t-TestDelayBurst", false, false},
	}
	for i, c := range cases {
		b := &Broker{nodeShared: c.shared}
		if got := b.cycleOf(c.line, c.own); got != c.want {
			t.Errorf("case %d: cycleOf(%q, %q) with shared %v = %v, want %v", i, c.line, c.own, c.shared, got, c.want)
		}
	}
}

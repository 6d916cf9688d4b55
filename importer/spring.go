package importer

import (
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

// springLayout is what the broker holds of the Spring design behind one
// return exchange: the wait exchange and wait-queue prefix its wait
// queues use, and their delays.
type springLayout struct {
	wait, prefix string
	delays       []time.Duration
}

// spring recognises the spring preset by the binding of a headers
// exchange (the return exchange) to Q on return-to: Q alone. The names
// the service chose (preset_options) are read from the broker: the return
// exchange from that binding, the wait exchange and prefix from the wait
// queues that dead-letter into it, the DL_EXCHANGE from Q's own argument.
// The wait queues are shared by every spring queue of the vhost, so the
// broker cannot tell which delays are Q's: each spring queue gets them all.
func spring(l *live, q topology.Queue) *candidate {
	ret := ""
	for _, b := range l.byDest[q.Name] {
		if len(b.Arguments) == 1 && b.Arguments[spec.SpringReturnHeader] == q.Name && l.exchanges[b.Source].Type == "headers" {
			ret = b.Source
			break
		}
	}
	dlx, ok := q.Arguments["x-dead-letter-exchange"].(string)
	if ret == "" || !ok {
		return nil
	}
	sl := l.springLayout(ret)
	sq := l.base(q)
	sq.Preset = spec.PresetSpring
	sq.Retry = policyFor(sl.delays)
	o := &sq.PresetOptions
	o.WaitExchange = unlessDefault(sl.wait, spec.DefaultSpringWaitExchange)
	o.ReturnExchange = unlessDefault(ret, spec.DefaultSpringReturnExchange)
	o.WaitQueuePrefix = unlessDefault(sl.prefix, contract.SpringWaitQueuePrefix)
	o.DeadLetterExchange = unlessDefault(dlx, contract.DeadLetterExchange(q.Name))
	return &candidate{q: sq, what: "spring preset",
		note: "its wait queues are shared by the vhost's spring queues and the broker\ndoes not say which delays are this queue's, so it gets them all"}
}

func unlessDefault(name, def string) string {
	if name == def {
		return ""
	}
	return name
}

// springLayout finds the wait queues that dead-letter into the return
// exchange ret: a queue {prefix}{ms} with a TTL of ms, bound from a
// headers exchange on wait-for: "{ms}". The first one, in name order,
// sets the wait exchange and prefix; the others must agree. Without wait
// queues the names are the defaults, which the trial expansion checks.
func (l *live) springLayout(ret string) springLayout {
	if sl, ok := l.springs[ret]; ok {
		return sl
	}
	sl := springLayout{wait: spec.DefaultSpringWaitExchange, prefix: contract.SpringWaitQueuePrefix}
	found := false
	for _, wq := range l.t.Queues {
		d, ok := l.ttl(wq.Name)
		if !ok || wq.Arguments["x-dead-letter-exchange"] != ret {
			continue
		}
		prefix, ok := strings.CutSuffix(wq.Name, contract.SpringWaitFor(d))
		if !ok {
			continue
		}
		wait := ""
		for _, b := range l.byDest[wq.Name] {
			if len(b.Arguments) == 1 && b.Arguments[spec.SpringWaitHeader] == contract.SpringWaitFor(d) && l.exchanges[b.Source].Type == "headers" {
				wait = b.Source
			}
		}
		if wait == "" || found && (wait != sl.wait || prefix != sl.prefix) {
			continue
		}
		found, sl.wait, sl.prefix = true, wait, prefix
		sl.delays = append(sl.delays, d)
	}
	sortDurations(sl.delays)
	l.springs[ret] = sl
	return sl
}

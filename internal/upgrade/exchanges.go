package upgrade

import (
	"fmt"
	"slices"
	"strings"
)

// exchanges: exchanges of a type the target lacks, the bindings and the
// alternate or dead-letter exchanges that lead to them, and the types the
// source has enabled that no exchange of the vhost shows.
func (j *judge) exchanges() {
	gone := map[string]bool{} // exchanges of a type no package of the target ships
	for _, x := range j.s.Exchanges {
		if x.Name == "" || slices.Contains(skippedTypes, x.Type) {
			continue
		}
		switch l, t := j.lacks(x.Type); l {
		case missing:
			gone[x.Name] = true
			j.add(CodeExchangeTypeMissing, "exchange", x.Name, "type", x.Type,
				fmt.Sprintf("RabbitMQ %s refuses to declare an exchange of type %s: %s", j.target, x.Type, missingWhy(t, x)),
				j.missingAdvice(t), t.Cite)
		case toEnable:
			j.add(CodeExchangeTypePlugin, "exchange", x.Name, "type", x.Type,
				fmt.Sprintf("the type %s comes from the plugin %s, which RabbitMQ %s ships %s; until it is enabled the target refuses the exchange, its bindings, and messages for it", x.Type, t.Plugin, j.target, j.notEnabled()),
				"on every node of the target, before its definitions are imported or the spec applied: rabbitmq-plugins enable "+t.Plugin, t.Cite)
		}
	}
	j.bindingsOf(gone)
	j.pointers(gone)
	j.sourceTypes()
}

// notEnabled says how the preview knows the plugin is off.
func (j *judge) notEnabled() string {
	if j.green.ExchangeTypes != nil {
		return "and the target broker read has not enabled"
	}
	return "disabled (a fresh install enables none)"
}

func missingWhy(t ExchangeType, x Exchange) string {
	why := "no RabbitMQ package ships a plugin with this type"
	if t.Plugin != "" {
		why = "its plugin " + t.Plugin + " is not in RabbitMQ's packages"
	}
	if dt, ok := x.Arguments["x-delayed-type"]; ok {
		why += fmt.Sprintf(" (the exchange routes as %v, x-delayed-type, after its delay)", dt)
	}
	return why
}

func (j *judge) missingAdvice(t ExchangeType) string {
	if t.Alternative != "" {
		advice := "replace it before the move with " + t.Alternative + "; messages it holds delayed on the source are not in any queue, so drain it (stop publishing to it, wait out its longest delay) before blue goes"
		if t.ApartUntil.Known() && j.target.Less(t.ApartUntil) {
			advice += fmt.Sprintf("; meanwhile the plugin's own build for RabbitMQ %s, installed on every node apart from RabbitMQ's packages, keeps it working (none exists from %s on)", series(j.target), series(t.ApartUntil))
		}
		return advice
	}
	return "install a build of the plugin for the target release on every node, or replace the exchange with a type the target has"
}

// bindingsOf: a binding from an exchange that cannot exist on the target,
// or to one (exchange-to-exchange), cannot be made there.
func (j *judge) bindingsOf(gone map[string]bool) {
	for _, b := range j.s.Bindings {
		to := b.DestinationType == "exchange" && gone[b.Destination]
		if !gone[b.Source] && !to {
			continue
		}
		end := b.Source
		if to {
			end = b.Destination
		}
		j.add(CodeExchangeBindingGone, "binding", fmt.Sprintf("%s -> %s %s", b.Source, b.DestinationType, b.Destination), "routing_key", b.RoutingKey,
			fmt.Sprintf("RabbitMQ %s cannot make this binding: the exchange %s is of a type it refuses (%s): a definitions import fails on it, and what it routed on the source reaches nothing", j.target, end, typeOf(j.s.Exchanges, end)),
			"replace the exchange first (see its verdict), then bind its replacement", lookupType(typeOf(j.s.Exchanges, end), j.target).Cite)
	}
}

// pointerKeys name another exchange by argument (queue or exchange) or
// policy key: where the broker sends what it cannot route, or dead
// letters.
var pointerKeys = map[string]string{"alternate-exchange": "alternate-exchange", "x-dead-letter-exchange": "dead-letter-exchange"}

// pointers: an alternate or dead-letter exchange that cannot exist on the
// target. The target accepts the name and drops what it would send
// there: nothing refuses, a message is lost.
func (j *judge) pointers(gone map[string]bool) {
	if len(gone) == 0 {
		return
	}
	for _, q := range j.s.Queues {
		j.pointer("queue", q.Name, q.Arguments, gone, false)
	}
	for _, x := range j.s.Exchanges {
		j.pointer("exchange", x.Name, x.Arguments, gone, false)
	}
	for _, p := range j.s.Policies {
		kind := "policy"
		if p.Operator {
			kind = "operator-policy"
		}
		j.pointer(kind, p.Name, p.Definition, gone, true)
	}
}

func (j *judge) pointer(kind, name string, m map[string]any, gone map[string]bool, policy bool) {
	for arg, key := range pointerKeys {
		if policy {
			arg = key
		}
		target, _ := m[arg].(string)
		if !gone[target] {
			continue
		}
		what := "unroutable messages"
		if key == "dead-letter-exchange" {
			what = "dead letters"
		}
		j.add(CodeExchangePointerGone, kind, name, arg, target,
			fmt.Sprintf("on RabbitMQ %s as its packages install it the exchange %s cannot exist (type %s): the target accepts %s=%s and drops the %s it would send there, without an error", j.target, target, typeOf(j.s.Exchanges, target), arg, target, what),
			"point it at an exchange the target has, after replacing "+target, lookupType(typeOf(j.s.Exchanges, target), j.target).Cite)
	}
}

// sourceTypes: what the preview cannot see in the vhost. The source has
// a plugin's exchange type enabled that no exchange here shows: other
// vhosts, or applications that declare their exchanges when they start,
// may use it, and the target lacks it.
func (j *judge) sourceTypes() {
	for _, typ := range j.s.ExchangeTypes {
		if slices.Contains(skippedTypes, typ) || slices.ContainsFunc(j.s.Exchanges, func(x Exchange) bool { return x.Type == typ }) {
			continue
		}
		l, t := j.lacks(typ)
		if l == has {
			continue
		}
		advice := "find what declares it (other vhosts, applications at start-up); if anything does, enable it on the target: rabbitmq-plugins enable " + t.Plugin
		if l == missing {
			advice = "find what declares it (other vhosts, applications at start-up) and " + j.missingAdvice(t)
		}
		j.add(CodeExchangeTypeUnseen, "exchange-type", typ, "", nil,
			fmt.Sprintf("RabbitMQ %s has the exchange type %s enabled (the whole node), which no exchange of vhost %s uses now; RabbitMQ %s %s", j.s.Version, typ, j.s.Vhost, j.target, lackWord(l, t)),
			advice, t.Cite)
	}
}

func lackWord(l lack, t ExchangeType) string {
	if l == toEnable {
		return "ships its plugin " + t.Plugin + " disabled"
	}
	return "refuses it (no package ships it)"
}

func typeOf(xs []Exchange, name string) string {
	i := slices.IndexFunc(xs, func(x Exchange) bool { return x.Name == name })
	if i < 0 {
		return "unknown"
	}
	return strings.TrimSpace(xs[i].Type)
}

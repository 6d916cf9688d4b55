package plan

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/topology"
)

// CodeAccess is the code of a change the user may not make.
const CodeAccess = "RT012"

// checkAccess finds the changes of p that the user of a may not make, so
// that apply refuses them before its first write instead of the broker
// refusing one half-way: creating a vhost needs the administrator tag,
// writing a policy the policymaker (or administrator) tag, and in each
// vhost the configure permission must match every exchange and queue the
// plan declares or deletes (its ownership record and lock included), the
// write permission every binding's destination and the read permission
// its source. Permissions rmqtopo cannot read (a.Permissions nil) are
// left to the broker.
func checkAccess(p Plan, specs map[string]string, a topology.Access) []Diagnostic {
	var ds []Diagnostic
	deny := func(addr topology.Address, format string, args ...any) {
		ds = append(ds, Diagnostic{Code: CodeAccess, Severity: SeverityError, Address: addr,
			Message: fmt.Sprintf("user %q may not %s", a.User, fmt.Sprintf(format, args...))})
	}
	created := map[string]bool{}
	checked := map[string]bool{}
	for _, c := range p.Changes {
		if c.Action == NoOp {
			continue
		}
		addr := c.Address
		switch addr.Kind {
		case topology.KindVhost:
			created[addr.Name] = true
			if !hasTag(a, "administrator") {
				deny(addr, "create vhost %s: that needs the administrator tag (tags: %s)", quote(addr.Name), tags(a))
			}
			continue
		case topology.KindPolicy:
			if !hasTag(a, "administrator") && !hasTag(a, "policymaker") {
				deny(addr, "%s %s: that needs the policymaker or administrator tag (tags: %s)", c.Action, addr, tags(a))
			}
			continue
		}
		if a.Permissions == nil || created[addr.Vhost] {
			continue
		}
		perm, ok := a.Permissions[addr.Vhost]
		if !ok {
			if !checked[addr.Vhost] {
				checked[addr.Vhost] = true
				deny(topology.Address{Kind: topology.KindVhost, Name: addr.Vhost}, "change vhost %s: it has no permissions there", quote(addr.Vhost))
			}
			continue
		}
		if !checked[addr.Vhost] {
			checked[addr.Vhost] = true
			record := topology.Record{Spec: specs[addr.Vhost], Generation: 1}.ExchangeName()
			for _, name := range []string{record, contract.LockQueue} {
				if !permits(perm.Configure, name) {
					deny(topology.Address{Kind: topology.KindVhost, Name: addr.Vhost},
						"declare %s in vhost %s, which apply needs: configure permission %s does not match it", quote(name), quote(addr.Vhost), quote(perm.Configure))
				}
			}
		}
		checkObjectAccess(c, perm, deny)
	}
	return ds
}

func checkObjectAccess(c Change, perm topology.Permission, deny func(topology.Address, string, ...any)) {
	addr := c.Address
	switch addr.Kind {
	case topology.KindExchange, topology.KindQueue:
		if !permits(perm.Configure, addr.Name) {
			deny(addr, "%s %s: configure permission %s does not match it", c.Action, addr, quote(perm.Configure))
		}
	case topology.KindBinding:
		b := c.After
		if b == nil {
			b = c.Before
		}
		if b == nil || b.Binding == nil {
			return
		}
		if !permits(perm.Write, b.Binding.Destination) {
			deny(addr, "%s %s: write permission %s does not match its destination", c.Action, addr, quote(perm.Write))
		}
		if !permits(perm.Read, b.Binding.Source) {
			deny(addr, "%s %s: read permission %s does not match its source", c.Action, addr, quote(perm.Read))
		}
	}
}

// permits reports whether a RabbitMQ permission regex matches name. The
// broker matches with Erlang's re, unanchored; a pattern Go cannot
// compile is left to the broker.
func permits(pattern, name string) bool {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return true
	}
	return re.MatchString(name)
}

func hasTag(a topology.Access, tag string) bool {
	for _, t := range a.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

func tags(a topology.Access) string {
	if len(a.Tags) == 0 {
		return "none"
	}
	return strings.Join(a.Tags, ", ")
}

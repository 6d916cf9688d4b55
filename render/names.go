package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Kubernetes object names and Terraform resource labels allow fewer
// characters than RabbitMQ names, and carry no vhost. Both renderers derive
// them from the object's identity alone, never from its neighbours: adding
// a queue to a spec must not rename another one, because a renamed
// Terraform resource or Kubernetes object is a delete and a create.
//
// A name that is already valid (in vhost "/") is used as it is. Any other is
// mangled into a valid one and given a short hash of its full identity, so
// that two objects that mangle alike still get different names.

// identityHash is 8 hex digits of SHA-256 over parts, NUL-separated so that
// ("a.b", "c") and ("a", "b.c") differ.
func identityHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:4])
}

// bindingIdentity is what names a binding, which has no name of its own:
// every field of its address.
func bindingIdentity(b topology.Binding) []string {
	a := b.Addr()
	return []string{a.Vhost, a.Name, a.Key}
}

// nameSet hands out names for one kind and refuses a second object under a
// name already given: the only way that happens is a hash collision or a
// valid name that looks exactly like a mangled one, and silently merging two
// objects would be far worse than an error.
type nameSet struct {
	format string // "k8s" or "terraform", for the error
	kind   string
	owners map[string]string
}

func newNameSet(format, kind string) *nameSet {
	return &nameSet{format: format, kind: kind, owners: map[string]string{}}
}

func (s *nameSet) claim(name, owner string) error {
	if prev, ok := s.owners[name]; ok && prev != owner {
		return fmt.Errorf("render %s: %s %s and %s both get the name %q; rename one of them",
			s.format, s.kind, prev, owner, name)
	}
	s.owners[name] = owner
	return nil
}

// describe names an object for errors: `"orders" in vhost "/"`.
func describe(vhost, name string) string {
	return fmt.Sprintf("%q in vhost %q", name, vhost)
}

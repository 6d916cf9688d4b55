package spec

import (
	"path/filepath"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

// maxSpecName bounds a spec's name, so that the name of its ownership
// record exchange stays far below RabbitMQ's 255 bytes.
const maxSpecName = 100

func validSpecName(s string) bool {
	if s == "" || len(s) > maxSpecName {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// DefaultName is the identity of a spec file without a top-level name: its
// base name without extension ("shop" for deploy/shop.yaml), with every
// character a name may not hold replaced by '-'. It is stable wherever the
// file is checked out, but changes when the file is renamed; set "name" to
// keep a spec's ownership across a rename.
func DefaultName(path string) string {
	base := filepath.Base(path)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	var b strings.Builder
	for i, r := range base {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '.' || r == '_' || r == '-'))
		if !ok {
			r = '-'
			if i == 0 {
				r = 'x'
			}
		}
		b.WriteRune(r)
	}
	s := b.String()
	if s == "" || s == "-" {
		s = "spec"
	}
	if len(s) > maxSpecName {
		s = s[:maxSpecName]
	}
	return s
}

// Quote quotes s for an error message, at most about 100 bytes of it, cut
// on a UTF-8 boundary (see topology.Quote).
func Quote(s string) string { return topology.Quote(s) }

// Names maps each vhost of files to the name of the spec that describes it.
func Names(files []*File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		out[f.Spec.Vhost] = f.Spec.Name
	}
	return out
}

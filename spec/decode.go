package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

type decoder struct {
	*problems
	// queues, when set, stands for the queue list cut out of the
	// document (chunks.go).
	queues *queueChunks
}

func at(n *yaml.Node, path string) pos { return pos{line: n.Line, col: n.Column, path: path} }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// fieldsOf walks a mapping strictly: every key must be known and
// unique. f decodes a key's value and reports whether it knows the key;
// expected lists the known keys, sorted, for the message about an unknown
// one. (A map of closures for each of 100,000s of queues was once most
// of the decoding's time; object.decode dispatches through one index.)
func (d *decoder) fieldsOf(n *yaml.Node, path string, expected func() []string, f func(key string, v *yaml.Node, path string) bool) bool {
	if n.Kind != yaml.MappingNode {
		d.add(at(n, path), "expected a mapping, got %s", describe(n))
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if v.Tag == "!!null" && v.Value == "" && k.LineComment != "" && v.Line == k.Line {
			// "key: #..." is a key without a value: YAML read the # as a
			// comment. Kept on the value for describe to say so.
			v.LineComment = k.LineComment
		}
		if duplicateKey(n.Content[:i], key) {
			d.add(at(k, join(path, key)), "duplicate key %q", key)
			continue
		}
		if !f(key, v, join(path, key)) {
			d.add(at(k, join(path, key)), "unknown key %q (expected one of: %s)", key, strings.Join(expected(), ", "))
		}
	}
	return true
}

// duplicateKey reports whether key is among the keys of the key/value
// list kv: mappings are short, and a set for each would cost more.
func duplicateKey(kv []*yaml.Node, key string) bool {
	for j := 0; j+1 < len(kv); j += 2 {
		if kv[j].Value == key {
			return true
		}
	}
	return false
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			if n.Value == "" && n.LineComment != "" {
				return "nothing: an unquoted # starts a YAML comment; quote the value (\"#\")"
			}
			return "null"
		case "!!int", "!!float":
			return "number " + n.Value
		case "!!bool":
			return "boolean " + n.Value
		}
		return fmt.Sprintf("string %q", n.Value)
	}
	return "nothing"
}

func (d *decoder) str(n *yaml.Node, path string, dst *string) {
	// A plain 2024-01-01 resolves to !!timestamp; as a name it is text.
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!timestamp") {
		d.add(at(n, path), "expected a string, got %s", describe(n))
		return
	}
	*dst = n.Value
}

// name reads an object name; an explicit "" is as wrong as a missing one,
// and would otherwise generate objects such as ".retry".
func (d *decoder) name(n *yaml.Node, path string, dst *string) {
	before := len(d.errs)
	d.str(n, path, dst)
	if len(d.errs) == before && *dst == "" {
		d.add(at(n, path), "name must not be empty")
	}
}

func (d *decoder) boolean(n *yaml.Node, path string, dst *bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		d.add(at(n, path), "expected true or false, got %s", describe(n))
		return
	}
	*dst = n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
}

func (d *decoder) integer(n *yaml.Node, path string, min, max int64, dst *int64) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		d.add(at(n, path), "expected a whole number, got %s", describe(n))
		return
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil || v < min || v > max {
		d.add(at(n, path), "must be a whole number from %d to %d, got %s", min, max, n.Value)
		return
	}
	*dst = v
}

func (d *decoder) intField(n *yaml.Node, path string, min, max int64, dst *int) {
	var v int64
	before := len(d.errs)
	d.integer(n, path, min, max, &v)
	if len(d.errs) == before {
		*dst = int(v)
	}
}

func (d *decoder) number(n *yaml.Node, path string, dst *float64) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		d.add(at(n, path), "expected a number, got %s", describe(n))
		return
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.add(at(n, path), "expected a finite number, got %s", n.Value)
		return
	}
	*dst = v
}

// duration reads a Go-style duration with millisecond resolution, positive
// and within RabbitMQ's TTL cap.
func (d *decoder) duration(n *yaml.Node, path string, dst *time.Duration) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Tag == "!!bool" {
		d.add(at(n, path), "expected a duration such as \"1500ms\", \"2s\" or \"5m\", got %s", describe(n))
		return
	}
	if n.Tag == "!!int" || n.Tag == "!!float" {
		d.add(at(n, path), "duration %s needs a unit, e.g. \"%ss\" or \"%sms\"", n.Value, n.Value, n.Value)
		return
	}
	v, err := time.ParseDuration(n.Value)
	switch {
	case err != nil:
		d.add(at(n, path), "invalid duration %q: use Go syntax such as \"1500ms\", \"2s\" or \"5m\"", n.Value)
	case v <= 0:
		d.add(at(n, path), "duration %q must be positive", n.Value)
	case v%time.Millisecond != 0:
		d.add(at(n, path), "duration %q is finer than a millisecond, RabbitMQ's TTL resolution", n.Value)
	case v > MaxTTL:
		d.add(at(n, path), "duration %q exceeds RabbitMQ's maximum TTL of 10 years (315360000000ms)", n.Value)
	default:
		*dst = v
	}
}

// args decodes a free-form argument table into plain Go values.
func (d *decoder) args(n *yaml.Node, path string, dst *map[string]any) {
	if n.Kind != yaml.MappingNode {
		d.add(at(n, path), "expected a mapping of arguments, got %s", describe(n))
		return
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		d.add(at(n, path), "invalid arguments: %v", err)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if v := n.Content[i+1]; v.Tag == "!!null" {
			d.add(at(v, join(path, n.Content[i].Value)), "argument %q has no value", n.Content[i].Value)
		}
	}
	before := len(d.errs)
	d.stringKeys(n, path, map[*yaml.Node]bool{})
	if len(d.errs) == before {
		*dst = m
	}
}

// stringKeys reports tables nested in arguments whose keys are not strings:
// AMQP tables and JSON objects only have string keys, and yaml.v3 decodes
// such a table as map[interface{}]interface{}, which neither can carry.
// It runs after a successful Decode, which already refused alias cycles and
// alias bombs; seen makes it visit each aliased node once.
func (d *decoder) stringKeys(n *yaml.Node, path string, seen map[*yaml.Node]bool) {
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias != nil && !seen[n.Alias] {
			seen[n.Alias] = true
			d.stringKeys(n.Alias, path, seen)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			d.stringKeys(e, index(path, i), seen)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!merge") {
				d.add(at(k, path), "argument keys must be strings, got %s (quote it)", describe(k))
				continue
			}
			d.stringKeys(v, join(path, k.Value), seen)
		}
	}
}

func (d *decoder) list(n *yaml.Node, path string, each func(int, *yaml.Node, string)) {
	if n.Kind != yaml.SequenceNode {
		d.add(at(n, path), "expected a list, got %s", describe(n))
		return
	}
	for i, e := range n.Content {
		each(i, e, index(path, i))
	}
}

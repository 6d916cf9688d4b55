package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// DefaultMaxFileSize bounds a spec file unless told otherwise: a spec of
// thousands of queues is a few hundred kilobytes.
const DefaultMaxFileSize = 4 << 20

// SizeError is a file over the size limit; it stops loading at once, as
// one line, because such a file is not a spec (or is /dev/zero).
type SizeError struct {
	Path  string
	Limit int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%s: larger than the spec size limit of %s; raise the limit if the file is really a spec",
		e.Path, FormatSize(e.Limit))
}

// FormatSize shows a byte count the way --max-spec-size takes it.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return english.Count(n, "byte", "bytes")
}

// LoadFiles loads and validates every file, each at most
// DefaultMaxFileSize bytes (see LoadFilesLimit).
func LoadFiles(paths ...string) ([]*File, error) { return LoadFilesLimit(DefaultMaxFileSize, paths...) }

// LoadFilesLimit loads and validates every file. It returns all problems
// in all files at once as Errors, sorted by file and position; a file of
// more than limit bytes is a *SizeError, at once, read no further.
func LoadFilesLimit(limit int64, paths ...string) ([]*File, error) {
	files, _, err := loadFiles(limit, paths)
	return files, err
}

// LoadExpanded is LoadFilesLimit and Expand in one: it returns the files
// and their expansion, which validation computed already, so that a large
// spec is expanded once, not twice. Nothing can change the files between
// the two, which is what makes sharing safe.
func LoadExpanded(limit int64, paths ...string) ([]*File, topology.Topology, error) {
	files, builders, err := loadFiles(limit, paths)
	if err != nil {
		return nil, topology.Topology{}, err
	}
	var t topology.Topology
	for _, b := range builders {
		b.into(&t)
	}
	t.Sort()
	return files, t, nil
}

func loadFiles(limit int64, paths []string) ([]*File, []*builder, error) {
	var files []*File
	var builders []*builder
	var all Errors
	for _, p := range paths {
		data, err := readLimited(p, limit)
		var se *SizeError
		if errors.As(err, &se) {
			return nil, nil, se
		}
		if err != nil {
			all = append(all, Error{File: p, Line: 1, Column: 1, Message: readError(err)})
			continue
		}
		f, b, err := parse(p, data)
		var es Errors
		if errors.As(err, &es) {
			all = append(all, es...)
		} else if err != nil {
			return nil, nil, err
		}
		if f != nil {
			files = append(files, f)
			builders = append(builders, b)
		}
	}
	all = append(all, checkAcrossFiles(files)...)
	if len(all) > 0 {
		return nil, nil, all.sorted()
	}
	return files, builders, nil
}

// readLimited reads at most limit bytes of path; more is a *SizeError.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &SizeError{Path: path, Limit: limit}
	}
	return data, nil
}

func readError(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "no such file"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	}
	return err.Error()
}

func checkAcrossFiles(files []*File) Errors {
	var es Errors
	seen := map[string]*File{}
	for _, f := range files {
		if prev, ok := seen[f.Spec.Vhost]; ok {
			p := &problems{file: f.Path}
			p.add(f.Spec.at, "vhost %q is already described by %s; give each vhost one file", f.Spec.Vhost, prev.Path)
			es = append(es, p.errs...)
			continue
		}
		seen[f.Spec.Vhost] = f
	}
	return es
}

// Parse decodes and validates one file's content. On any problem it returns
// a nil File and Errors listing every problem found.
func Parse(path string, data []byte) (*File, error) {
	f, _, err := parse(path, data)
	return f, err
}

// parse is Parse, also returning the builder validation expanded the spec
// with.
func parse(path string, data []byte) (*File, *builder, error) {
	return parseWith(path, data, defaultChunking)
}

// parseWith is parse, chunking the queues as c says.
func parseWith(path string, data []byte, c chunking) (*File, *builder, error) {
	if head, queues := splitQueues(data, c); queues != nil {
		f, b, err := parseChunked(path, head, len(data), queues)
		if err == nil && !queues.failed {
			return f, b, nil
		}
		// Problems are reported from the whole document, as they would be
		// without chunks (see chunks.go).
	}
	return parseChunked(path, data, len(data), nil)
}

// parseChunked is parse of data, or of a head and its queues (chunks.go);
// size is the whole document's.
func parseChunked(path string, data []byte, size int, queues *queueChunks) (*File, *builder, error) {
	p := &problems{file: path}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(pos{path: ""}, "the file is empty; a spec starts with \"version: 1\"")
			return nil, nil, p.errs
		}
		line, msg := yamlErrorLine(err)
		col := 1
		// A position at or after the one yaml.v3 gives is the same problem,
		// placed exactly; one before it would be a disagreement.
		if l, c, ok := syntaxPosition(data); ok && l >= line {
			line, col = l, c
		}
		p.errs = append(p.errs, Error{File: path, Line: line, Column: col, Message: msg})
		return nil, nil, p.errs
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.add(pos{line: extra.Line, col: extra.Column}, "a spec file holds one YAML document; found a second")
	}
	d := &decoder{problems: p}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	// A plain document has fewer nodes than bytes; only aliases make
	// more, so a large spec (bounded by the size limit) is never refused.
	budget := max(maxExpandedNodes, size)
	if err := resolveAliases(doc, &budget); err != nil {
		p.add(at(doc, ""), "%v", err)
		return nil, nil, p.errs
	}
	if queues != nil {
		if !queues.attach(doc) {
			queues.failed = true
			return nil, nil, nil
		}
		d.queues = queues
	}
	s := d.spec(doc)
	if queues != nil && queues.failed {
		return nil, nil, nil
	}
	// Validation runs even after decoding problems so that one run lists
	// everything; values that failed to decode are zero and skipped.
	b := validate(s, p)
	if len(p.errs) > 0 {
		return nil, nil, p.errs.sorted()
	}
	if s.Name == "" {
		s.Name = DefaultName(path)
	}
	return &File{Path: path, Spec: *s}, b, nil
}

// yamlErrorLine pulls the line number out of a yaml.v3 syntax error, whose
// text is "yaml: line N: message".
func yamlErrorLine(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				return n, "invalid YAML: " + strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return 1, "invalid YAML: " + msg
}

// maxExpandedNodes bounds the nodes a document may expand to through
// aliases, so a "billion laughs" document fails fast instead of hanging.
// A spec of 1,000 queues is about 20,000 nodes.
const maxExpandedNodes = 1_000_000

// resolveAliases replaces every alias by the node it names and applies
// merge keys ("<<: *base", explicit keys win), so the strict walk below sees
// plain mappings, lists and scalars. Positions stay those of the anchored
// text, which is where a problem in it must be fixed.
func resolveAliases(n *yaml.Node, budget *int) error {
	*budget--
	if *budget < 0 {
		return errors.New("the document expands to too many nodes through aliases (more than its size allows, and at least 1000000)")
	}
	for i, c := range n.Content {
		for c.Kind == yaml.AliasNode && c.Alias != nil {
			c = c.Alias
		}
		n.Content[i] = c
		if err := resolveAliases(c, budget); err != nil {
			return err
		}
	}
	if n.Kind == yaml.MappingNode {
		n.Content = applyMerges(n.Content)
	}
	return nil
}

// applyMerges expands "<<" entries of a mapping's key/value list.
func applyMerges(kv []*yaml.Node) []*yaml.Node {
	hasMerge := false
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i].Tag == "!!merge" || (kv[i].Value == "<<" && kv[i].Style == 0) {
			hasMerge = true
		}
	}
	if !hasMerge {
		return kv
	}
	var own, merged []*yaml.Node
	explicit := map[string]bool{}
	var sources []*yaml.Node
	for i := 0; i+1 < len(kv); i += 2 {
		k, v := kv[i], kv[i+1]
		if k.Tag == "!!merge" || (k.Value == "<<" && k.Style == 0) {
			if v.Kind == yaml.SequenceNode {
				sources = append(sources, v.Content...)
			} else {
				sources = append(sources, v)
			}
			continue
		}
		explicit[k.Value] = true
		own = append(own, k, v)
	}
	for _, src := range sources {
		if src.Kind != yaml.MappingNode {
			// Left for the strict walk to report as a wrong type.
			own = append(own, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "<<", Line: src.Line, Column: src.Column}, src)
			continue
		}
		for i := 0; i+1 < len(src.Content); i += 2 {
			if !explicit[src.Content[i].Value] {
				explicit[src.Content[i].Value] = true
				merged = append(merged, src.Content[i], src.Content[i+1])
			}
		}
	}
	return append(own, merged...)
}

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

// fields walks a mapping strictly: every key must be known and unique.
func (d *decoder) fields(n *yaml.Node, path string, known map[string]func(*yaml.Node, string)) bool {
	return d.fieldsOf(n, path, func() []string { return slices.Sorted(maps.Keys(known)) }, func(key string, v *yaml.Node, p string) bool {
		f, ok := known[key]
		if ok {
			f(v, p)
		}
		return ok
	})
}

// fieldsOf is fields with the keys dispatched by one function, which
// reports whether it knows the key; expected lists the known keys, sorted,
// for the message about an unknown one. A spec's queues are decoded this
// way: a map of closures for each of 100,000s of queues was most of the
// decoding's time.
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

func (d *decoder) spec(n *yaml.Node) *Spec {
	s := &Spec{Vhost: "/", at: at(n, "")}
	hasVersion := false
	ok := d.fields(n, "", map[string]func(*yaml.Node, string){
		"version": func(v *yaml.Node, p string) {
			hasVersion = true
			d.specVersion(s, v, p)
		},
		"name":   func(v *yaml.Node, p string) { d.specName(s, v, p) },
		"vhost":  func(v *yaml.Node, p string) { d.specVhost(s, v, p) },
		"layout": func(v *yaml.Node, p string) { s.Layout = d.layout(v, p) },
		"levels": func(v *yaml.Node, p string) { s.Levels = d.levels(v, p) },
		"wait_queue_type": func(v *yaml.Node, p string) {
			s.WaitQueueType = d.queueType(v, p)
		},
		"quorum_initial_group_size": func(v *yaml.Node, p string) {
			d.intField(v, p, 1, MaxQuorumGroupSize, &s.QuorumInitialGroupSize)
		},
		"retry_policies": func(v *yaml.Node, p string) { d.retryPolicies(s, v, p) },
		"exchanges": func(v *yaml.Node, p string) {
			d.list(v, p, func(_ int, e *yaml.Node, ep string) { s.Exchanges = append(s.Exchanges, d.exchange(e, ep)) })
		},
		"queues": func(v *yaml.Node, p string) { d.specQueues(s, v, p) },
		"policies": func(v *yaml.Node, p string) {
			d.list(v, p, func(_ int, e *yaml.Node, ep string) { s.Policies = append(s.Policies, d.policy(e, ep)) })
		},
	})
	if ok && !hasVersion {
		d.add(at(n, ""), "missing \"version: %d\"", Version)
	}
	d.resolveRetryRefs(s)
	return s
}

// specVersion reads s's format version, an error unless it is Version.
func (d *decoder) specVersion(s *Spec, v *yaml.Node, p string) {
	var ver int64
	before := len(d.errs)
	d.integer(v, p, math.MinInt32, math.MaxInt32, &ver)
	if len(d.errs) == before && ver != Version {
		d.add(at(v, p), "unsupported version %d: this rmqtopo reads version %d", ver, Version)
	}
	s.Version = int(ver)
}

// specName reads s's name, an error unless it can name an ownership record.
func (d *decoder) specName(s *Spec, v *yaml.Node, p string) {
	d.str(v, p, &s.Name)
	if !validSpecName(s.Name) {
		d.add(at(v, p), "name %s: want 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit (it names the spec's ownership record)",
			Quote(s.Name), maxSpecName)
	}
}

// specVhost reads s's vhost, an error when empty or longer than RabbitMQ
// allows.
func (d *decoder) specVhost(s *Spec, v *yaml.Node, p string) {
	d.str(v, p, &s.Vhost)
	if s.Vhost == "" {
		d.add(at(v, p), "vhost must not be empty")
	}
	if len(s.Vhost) > topology.MaxNameBytes {
		d.add(at(v, p), "vhost name %q is %d bytes; RabbitMQ allows %d", s.Vhost, len(s.Vhost), topology.MaxNameBytes)
	}
}

// retryPolicies reads s's named retry policies in order, an error for
// each name given twice.
func (d *decoder) retryPolicies(s *Spec, v *yaml.Node, p string) {
	if v.Kind != yaml.MappingNode {
		d.add(at(v, p), "expected a mapping of policy names to retry policies, got %s", describe(v))
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		name, body := v.Content[i].Value, v.Content[i+1]
		pp := join(p, name)
		for _, prev := range s.RetryPolicies {
			if prev.Name == name {
				d.add(at(v.Content[i], pp), "duplicate retry policy %q", name)
			}
		}
		s.RetryPolicies = append(s.RetryPolicies, NamedRetryPolicy{Name: name, Policy: d.retryPolicy(body, pp)})
	}
}

// specQueues reads s's queues, from the pre-split list when v is the one
// d split ahead, with room for them all made once.
func (d *decoder) specQueues(s *Spec, v *yaml.Node, p string) {
	if d.queues != nil && v == d.queues.value {
		s.Queues = slices.Grow(s.Queues, len(d.queues.items))
		d.queues.each(func(i int, e *yaml.Node) { s.Queues = append(s.Queues, d.queue(e, index(p, i), s)) })
		return
	}
	if v.Kind == yaml.SequenceNode { // sized once: a Queue is large and specs can hold 100,000s
		s.Queues = slices.Grow(s.Queues, len(v.Content))
	}
	d.list(v, p, func(_ int, e *yaml.Node, ep string) { s.Queues = append(s.Queues, d.queue(e, ep, s)) })
}

func (d *decoder) layout(n *yaml.Node, path string) Layout {
	var v string
	d.str(n, path, &v)
	switch Layout(v) {
	case LayoutShared, LayoutPerAttempt, LayoutLevels, LayoutNative, LayoutAuto:
		return Layout(v)
	}
	if n.Kind == yaml.ScalarNode {
		d.add(at(n, path), "unknown layout %q (expected auto, native, shared, per-attempt or levels)", v)
	}
	return ""
}

func (d *decoder) queueType(n *yaml.Node, path string) string {
	var v string
	d.str(n, path, &v)
	switch v {
	case TypeClassic, TypeQuorum:
		return v
	}
	if n.Kind == yaml.ScalarNode {
		d.add(at(n, path), "unknown queue type %q (expected classic or quorum)", v)
	}
	return ""
}

func (d *decoder) exchange(n *yaml.Node, path string) Exchange {
	e := Exchange{Durable: true, at: at(n, path), nameAt: at(n, path)}
	hasName, hasType := false, false
	ok := d.fields(n, path, map[string]func(*yaml.Node, string){
		"name": func(v *yaml.Node, p string) { hasName = true; e.nameAt = at(v, p); d.name(v, p, &e.Name) },
		"type": func(v *yaml.Node, p string) {
			hasType = true
			d.str(v, p, &e.Type)
			switch e.Type {
			case "direct", "fanout", "topic", "headers":
			default:
				if !strings.HasPrefix(e.Type, "x-") && v.Kind == yaml.ScalarNode {
					d.add(at(v, p), "unknown exchange type %q (expected direct, fanout, topic, headers or a plugin's x- type)", e.Type)
				}
			}
		},
		"durable":     func(v *yaml.Node, p string) { d.boolean(v, p, &e.Durable) },
		"auto_delete": func(v *yaml.Node, p string) { d.boolean(v, p, &e.AutoDelete) },
		"internal":    func(v *yaml.Node, p string) { d.boolean(v, p, &e.Internal) },
		"arguments":   func(v *yaml.Node, p string) { d.args(v, p, &e.Arguments) },
		"bindings": func(v *yaml.Node, p string) {
			d.list(v, p, func(_ int, b *yaml.Node, bp string) { e.Bindings = append(e.Bindings, d.binding(b, bp)) })
		},
	})
	if ok && !hasName {
		d.add(e.at, "exchange needs a name")
	}
	if ok && !hasType {
		d.add(e.at, "exchange needs a type (direct, fanout, topic or headers)")
	}
	return e
}

var bindingKeys = []string{"arguments", "exchange", "routing_key"}

func (d *decoder) binding(n *yaml.Node, path string) Binding {
	b := Binding{at: at(n, path)}
	has := false
	ok := d.fieldsOf(n, path, func() []string { return bindingKeys }, func(k string, v *yaml.Node, p string) bool {
		switch k {
		case "exchange":
			has = true
			d.str(v, p, &b.Exchange)
		case "routing_key":
			d.str(v, p, &b.RoutingKey)
		case "arguments":
			d.args(v, p, &b.Arguments)
		default:
			return false
		}
		return true
	})
	if ok && !has {
		d.add(b.at, "binding needs an exchange")
	}
	return b
}

// queueKeys are the keys of a queue, sorted.
var queueKeys = []string{"arguments", "auto_delete", "bindings", "delivery_limit", "dlq", "dlq_name", "durable",
	"immediate_retries", "layout", "max_length", "message_ttl", "migrate", "name", "parking_lot",
	"preset", "preset_options", "raw", "retire", "retry", "return_queue", "type"}

func (d *decoder) queue(n *yaml.Node, path string, s *Spec) Queue {
	q := Queue{Type: TypeClassic, DLQ: true, Durable: true, at: at(n, path), nameAt: at(n, path)}
	hasName := false
	var optsNode *yaml.Node
	var optsPath string
	ok := d.fieldsOf(n, path, func() []string { return queueKeys }, func(k string, v *yaml.Node, p string) bool {
		if !d.queueField(&q, k, v, p) {
			return false
		}
		q.set = append(q.set, keyAt{k, at(v, p)})
		switch k {
		case "name":
			hasName = true
		case "preset_options":
			// Decoded once the preset is known: its keys depend on it.
			optsNode, optsPath = v, p
		}
		return true
	})
	if ok && !hasName {
		d.add(q.at, "queue needs a name")
	}
	if q.Raw {
		// A raw queue has no DLQ; everything that reads DLQ sees that.
		q.DLQ = false
	}
	if optsNode != nil {
		q.PresetOptions = d.presetOptions(optsNode, optsPath, q.Preset)
	}
	return q
}

// queueField decodes the value v of a queue's key k into q, and reports
// whether k is a key of a queue.
func (d *decoder) queueField(q *Queue, k string, v *yaml.Node, p string) bool {
	switch k {
	case "name":
		q.nameAt = at(v, p)
		d.name(v, p, &q.Name)
	case "type":
		if v.Kind == yaml.ScalarNode && v.Value == TypeStream {
			q.Type = TypeStream
			break
		}
		q.Type = d.queueType(v, p)
	case "raw":
		d.boolean(v, p, &q.Raw)
	case "durable":
		d.boolean(v, p, &q.Durable)
	case "auto_delete":
		d.boolean(v, p, &q.AutoDelete)
	case "arguments":
		q.argumentsAt = at(v, p)
		d.args(v, p, &q.Arguments)
		q.argAt = keyPositions(v, p)
	case "bindings":
		d.list(v, p, func(_ int, b *yaml.Node, bp string) { q.Bindings = append(q.Bindings, d.binding(b, bp)) })
	default:
		return d.queueRetryField(q, k, v, p) || d.queueLimitField(q, k, v, p)
	}
	return true
}

// queueRetryField decodes the value v of a queue's retry key k (the
// retry policy, its layout and the queues around it) into q, and
// reports whether k is one.
func (d *decoder) queueRetryField(q *Queue, k string, v *yaml.Node, p string) bool {
	switch k {
	case "retry":
		q.retryAt = at(v, p)
		if v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
			q.RetryRef = v.Value
			break
		}
		q.Retry = d.retryPolicy(v, p)
	case "immediate_retries":
		d.intField(v, p, 0, MaxRetries, &q.ImmediateRetries)
	case "layout":
		q.layoutAt = at(v, p)
		q.Layout = d.layout(v, p)
	case "dlq":
		d.boolean(v, p, &q.DLQ)
	case "dlq_name":
		q.dlqNameAt = at(v, p)
		d.name(v, p, &q.DLQName)
	case "migrate":
		d.boolean(v, p, &q.Migrate)
	case "retire":
		d.list(v, p, func(_ int, n *yaml.Node, np string) {
			var name string
			d.name(n, np, &name)
			q.Retire, q.retireAt = append(q.Retire, name), append(q.retireAt, at(n, np))
		})
	case "parking_lot":
		d.boolean(v, p, &q.ParkingLot)
	case "return_queue":
		d.boolean(v, p, &q.ReturnQueue)
	default:
		return false
	}
	return true
}

// queueLimitField decodes the value v of a queue's key k for its limits
// or its preset into q, and reports whether k is one.
func (d *decoder) queueLimitField(q *Queue, k string, v *yaml.Node, p string) bool {
	switch k {
	case "message_ttl":
		d.duration(v, p, &q.MessageTTL)
	case "max_length":
		d.integer(v, p, 1, math.MaxInt64, &q.MaxLength)
	case "delivery_limit":
		q.deliveryLimitAt = at(v, p)
		d.intField(v, p, 1, math.MaxInt32, &q.DeliveryLimit)
	case "preset_options":
		q.presetOptionsAt = at(v, p)
	case "preset":
		var name string
		d.str(v, p, &name)
		switch Preset(name) {
		case PresetGoQueue, PresetOutbox, PresetSpring:
			q.Preset = Preset(name)
		default:
			if v.Kind == yaml.ScalarNode {
				d.add(at(v, p), "unknown preset %q (expected goqueue, outbox or spring)", name)
			}
		}
	default:
		return false
	}
	return true
}

// presetOptions decodes a queue's preset_options, whose keys are those of
// its preset: spring's names, goqueue's queue arguments.
func (d *decoder) presetOptions(n *yaml.Node, path string, preset Preset) PresetOptions {
	var o PresetOptions
	known := map[string]func(*yaml.Node, string){}
	switch preset {
	case PresetSpring:
		known["wait_exchange"] = func(v *yaml.Node, p string) { d.name(v, p, &o.WaitExchange) }
		known["return_exchange"] = func(v *yaml.Node, p string) { d.name(v, p, &o.ReturnExchange) }
		known["wait_queue_prefix"] = func(v *yaml.Node, p string) { d.name(v, p, &o.WaitQueuePrefix) }
		known["dead_letter_exchange"] = func(v *yaml.Node, p string) { d.name(v, p, &o.DeadLetterExchange) }
	case PresetGoQueue:
		known["queue_arguments"] = func(v *yaml.Node, p string) {
			o.queueArgumentsAt = at(v, p)
			d.args(v, p, &o.QueueArguments)
		}
	default:
		if n.Kind == yaml.MappingNode && len(n.Content) == 0 {
			return o
		}
		d.add(at(n, path), "preset_options needs preset goqueue or spring: the %s has no options", presetName(preset))
		return o
	}
	d.fields(n, path, known)
	return o
}

func presetName(p Preset) string {
	if p == PresetNone {
		return "queue without a preset"
	}
	return string(p) + " preset"
}

// retryKinds are the keys of a retry policy, sorted.
var retryKinds = []string{"delays", "exponential", "fixed", "linear"}

// retryPolicy decodes an inline policy: exactly one of delays, fixed,
// linear or exponential.
func (d *decoder) retryPolicy(n *yaml.Node, path string) RetryPolicy {
	var r RetryPolicy
	var kinds []string
	attempts := func(v *yaml.Node, p string) { d.intField(v, p, 0, MaxRetries, &r.Attempts) }
	jitter := func(v *yaml.Node, p string) { r.Jitter = d.jitter(v, p) }
	// Dispatched by a switch rather than a map: every queue has a retry
	// policy, and a spec may have 100,000s of queues.
	ok := d.fieldsOf(n, path, func() []string { return retryKinds }, func(k string, v *yaml.Node, p string) bool {
		switch k {
		case "delays":
			kinds = append(kinds, "delays")
			r.Kind = "delays"
			r.Explicit = d.delayList(v, p)
		case "fixed":
			kinds = append(kinds, "fixed")
			r.Kind = "fixed"
			d.required(v, p, []string{"delay", "attempts"}, map[string]func(*yaml.Node, string){
				"delay":    func(v *yaml.Node, p string) { d.duration(v, p, &r.Delay) },
				"attempts": attempts,
				"jitter":   jitter,
			})
		case "linear":
			kinds = append(kinds, "linear")
			r.Kind = "linear"
			d.required(v, p, []string{"step", "attempts"}, map[string]func(*yaml.Node, string){
				"step":     func(v *yaml.Node, p string) { d.duration(v, p, &r.Step) },
				"attempts": attempts,
				"jitter":   jitter,
			})
			if r.Step > 0 && r.Attempts > 0 && r.Step*time.Duration(r.Attempts) > MaxTTL {
				d.add(at(v, p), "the last delay (%d × %s) exceeds RabbitMQ's maximum TTL of 10 years", r.Attempts, r.Step)
			}
		case "exponential":
			kinds = append(kinds, "exponential")
			r.Kind = "exponential"
			d.exponential(v, p, &r, attempts, jitter)
		default:
			return false
		}
		return true
	})
	if ok && len(kinds) == 0 {
		d.add(at(n, path), "a retry policy needs one of: delays, fixed, linear, exponential (use \"delays: []\" for no retries)")
	}
	if len(kinds) > 1 {
		d.add(at(n, path), "a retry policy takes one of delays, fixed, linear or exponential, not %s", strings.Join(kinds, " and "))
	}
	return r
}

// delayList decodes an explicit list of delays, at most MaxRetries.
func (d *decoder) delayList(v *yaml.Node, p string) []time.Duration {
	delays := []time.Duration{}
	d.list(v, p, func(_ int, e *yaml.Node, ep string) {
		var dur time.Duration
		d.duration(e, ep, &dur)
		delays = append(delays, dur)
	})
	if len(delays) > MaxRetries {
		d.add(at(v, p), "at most %d delays", MaxRetries)
	}
	return delays
}

// exponential decodes an exponential policy's fields into r and checks
// that its factor and cap make delays that grow.
func (d *decoder) exponential(v *yaml.Node, p string, r *RetryPolicy, attempts, jitter func(*yaml.Node, string)) {
	var factorAt pos
	hasMax := false
	d.required(v, p, []string{"initial", "factor", "attempts"}, map[string]func(*yaml.Node, string){
		"initial": func(v *yaml.Node, p string) { d.duration(v, p, &r.Initial) },
		"factor": func(v *yaml.Node, p string) {
			// Only a factor that decoded is checked further: a
			// non-number is one problem, not also "factor 0".
			before := len(d.errs)
			d.number(v, p, &r.Factor)
			if len(d.errs) == before {
				factorAt = at(v, p)
			}
		},
		"max":      func(v *yaml.Node, p string) { hasMax = true; d.duration(v, p, &r.Max) },
		"attempts": attempts,
		"jitter":   jitter,
	})
	switch {
	case factorAt.line == 0:
	case r.Factor <= 1 && hasMax:
		d.add(factorAt, "factor %g must be greater than 1 when a max caps the delays", r.Factor)
	case r.Factor < 1:
		d.add(factorAt, "factor %g must be at least 1: delays may not shrink", r.Factor)
	}
	if hasMax && r.Max > 0 && r.Initial > r.Max {
		d.add(at(v, p), "initial delay %s is larger than max %s", r.Initial, r.Max)
	}
}

// required is fields plus a check that the named keys are present.
func (d *decoder) required(n *yaml.Node, path string, keys []string, known map[string]func(*yaml.Node, string)) {
	seen := map[string]bool{}
	wrapped := map[string]func(*yaml.Node, string){}
	for k, f := range known {
		wrapped[k] = func(v *yaml.Node, p string) { seen[k] = true; f(v, p) }
	}
	if !d.fields(n, path, wrapped) {
		return
	}
	for _, k := range keys {
		if !seen[k] {
			d.add(at(n, path), "missing %q", k)
		}
	}
}

func (d *decoder) policy(n *yaml.Node, path string) Policy {
	pol := Policy{ApplyTo: "queues", at: at(n, path)}
	ok := d.fields(n, path, map[string]func(*yaml.Node, string){
		"name":    func(v *yaml.Node, p string) { d.str(v, p, &pol.Name) },
		"pattern": func(v *yaml.Node, p string) { pol.patternAt = at(v, p); d.str(v, p, &pol.Pattern) },
		"apply_to": func(v *yaml.Node, p string) {
			d.str(v, p, &pol.ApplyTo)
			switch pol.ApplyTo {
			case "queues", "exchanges", "all", "classic_queues", "quorum_queues", "streams":
			default:
				d.add(at(v, p), "unknown apply_to %q (expected queues, exchanges or all)", pol.ApplyTo)
			}
		},
		"priority":   func(v *yaml.Node, p string) { d.integer(v, p, math.MinInt32, math.MaxInt32, &pol.Priority) },
		"definition": func(v *yaml.Node, p string) { d.args(v, p, &pol.Definition) },
	})
	if ok && (pol.Name == "" || pol.Pattern == "" || len(pol.Definition) == 0) {
		d.add(pol.at, "a policy needs a name, a pattern and a non-empty definition")
	}
	return pol
}

func (d *decoder) resolveRetryRefs(s *Spec) {
	for i := range s.Queues {
		q := &s.Queues[i]
		if q.RetryRef == "" {
			continue
		}
		found := false
		for _, np := range s.RetryPolicies {
			if np.Name == q.RetryRef {
				q.Retry, found = np.Policy, true
			}
		}
		if !found {
			names := make([]string, len(s.RetryPolicies))
			for j, np := range s.RetryPolicies {
				names[j] = np.Name
			}
			hint := "retry_policies is empty"
			if len(names) > 0 {
				hint = "known: " + strings.Join(names, ", ")
			}
			d.add(q.retryAt, "unknown retry policy %q (%s)", q.RetryRef, hint)
		}
	}
}

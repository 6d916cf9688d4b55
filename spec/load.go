package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

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

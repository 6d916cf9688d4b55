package spec

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// A large spec's queue list is parsed a slice of queues at a time: yaml.v3
// builds a node of about 160 bytes for every scalar, key and collection of
// a document, which for 150,000 queues is 2.4 million nodes and 384 MiB
// held at once, several times the spec it decodes to. parse cuts the items
// of the top-level block sequence "queues:" out of the document (the head
// keeps its lines, blank, so every other position stays), decodes the head
// as usual, and decodes the queues from chunks of items, each its own
// small document whose positions are moved back to the file's.
//
// Only a plain layout is cut: "queues:" alone at the start of a line, then
// items starting "- " at one indentation. A chunk that does not parse as a
// sequence of exactly its items, or has anchors or aliases (which may
// reach across chunks), gives up; parse then decodes the whole document as
// before, as it does for any spec with problems, so that messages never
// depend on the chunking.

// chunking says when and how finely a spec's queues are chunked.
type chunking struct {
	minSize int // from this size of spec on
	items   int // queues per chunk
}

// defaultChunking chunks specs of a mebibyte or more: a chunk of 1,024
// queues is about 16,000 nodes.
var defaultChunking = chunking{minSize: 1 << 20, items: 1024}

// queueChunks is the queue list cut out of a document.
type queueChunks struct {
	per     int // items per chunk
	data    []byte
	keyLine int // the line of "queues:"
	indent  int // the column of the items' "-", from 0
	items   []chunkItem
	end     int // the offset just past the list
	// value is the head's (null) value of "queues:", which stands for the
	// list.
	value *yaml.Node
	// failed is set when a chunk could not stand for its part of the
	// document.
	failed bool
}

type chunkItem struct {
	off, line int
}

// splitQueues returns data's head, the document without the items of its
// top-level "queues:" list, and the list; or data and nil when the spec is
// small or not laid out plainly.
func splitQueues(data []byte, c chunking) ([]byte, *queueChunks) {
	if len(data) < c.minSize || c.items < 1 {
		return data, nil
	}
	q := &queueChunks{per: c.items, data: data, indent: -1}
	start := q.findKey()
	if start < 0 || !q.findItems(start) {
		return data, nil
	}
	lines := bytes.Count(data[start:q.end], []byte{'\n'})
	head := make([]byte, 0, start+lines+len(data)-q.end)
	head = append(head, data[:start]...)
	head = append(head, bytes.Repeat([]byte{'\n'}, lines)...)
	return append(head, data[q.end:]...), q
}

// findKey finds the line "queues:" (spaces or a comment may follow) at the
// start of a line, and returns the offset of the next line, or -1.
func (q *queueChunks) findKey() int {
	off, line := 0, 1
	for off < len(q.data) {
		text, next := lineAt(q.data, off)
		if rest, ok := bytes.CutPrefix(text, []byte("queues:")); ok && blankOrComment(rest) {
			q.keyLine = line
			return next
		}
		off, line = next, line+1
	}
	return -1
}

// findItems records the items of the list that starts at offset off, and
// where it ends: at the first line indented less than its items, or as
// much but not an item. It reports whether the list is plain.
func (q *queueChunks) findItems(off int) bool {
	line := q.keyLine + 1
	for off < len(q.data) {
		text, next := lineAt(q.data, off)
		rest := bytes.TrimLeft(text, " ")
		indent := len(text) - len(rest)
		switch {
		case len(rest) == 0 || rest[0] == '#':
			// Blank or a comment: nothing to the parser.
		case rest[0] == '\t':
			return false
		case q.indent < 0:
			if !isItem(rest) {
				return false
			}
			q.indent = indent
			q.items = append(q.items, chunkItem{off, line})
		case indent == q.indent && isItem(rest):
			q.items = append(q.items, chunkItem{off, line})
		case indent <= q.indent:
			q.end = off
			return true
		}
		off, line = next, line+1
	}
	q.end = off
	return q.indent >= 0
}

// lineAt returns the line at offset off without its line break, and the
// offset of the next line.
func lineAt(data []byte, off int) ([]byte, int) {
	i := bytes.IndexByte(data[off:], '\n')
	if i < 0 {
		return bytes.TrimSuffix(data[off:], []byte("\r")), len(data)
	}
	return bytes.TrimSuffix(data[off:off+i], []byte("\r")), off + i + 1
}

func blankOrComment(rest []byte) bool {
	rest = bytes.TrimLeft(rest, " ")
	return len(rest) == 0 || rest[0] == '#'
}

func isItem(rest []byte) bool {
	return rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ')
}

// attach finds the head's "queues:" key in doc, the head's root, and
// reports whether it is where the list was cut from: a key of the root
// block mapping, with no value of its own.
func (q *queueChunks) attach(doc *yaml.Node) bool {
	if doc.Kind != yaml.MappingNode || doc.Style&yaml.FlowStyle != 0 {
		return false
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if k.Value == "queues" && k.Line == q.keyLine && k.Column == 1 {
			if v.Kind != yaml.ScalarNode || v.Tag != "!!null" || v.Value != "" {
				return false
			}
			q.value = v
			return true
		}
	}
	return false
}

// each calls f with every item of the list and its index, a chunk at a
// time, until a chunk fails.
func (q *queueChunks) each(f func(int, *yaml.Node)) {
	for first := 0; first < len(q.items); first += q.per {
		last := min(first+q.per, len(q.items))
		seq, err := q.chunk(first, last)
		if err != nil {
			q.failed = true
			return
		}
		for k, n := range seq.Content {
			f(first+k, n)
		}
	}
}

var errChunk = errors.New("chunk does not stand for its items")

// chunk parses the items first to last (excluded).
func (q *queueChunks) chunk(first, last int) (*yaml.Node, error) {
	to := q.end
	if last < len(q.items) {
		to = q.items[last].off
	}
	dec := yaml.NewDecoder(bytes.NewReader(q.data[q.items[first].off:to]))
	var root, extra yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errChunk
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, errChunk
	}
	seq := root.Content[0]
	if seq.Kind != yaml.SequenceNode || seq.Style&yaml.FlowStyle != 0 || seq.Line != 1 || seq.Column != q.indent+1 ||
		len(seq.Content) != last-first {
		return nil, errChunk
	}
	if !relocate(seq, q.items[first].line-1) {
		return nil, errChunk
	}
	// No aliases are left to resolve; merge keys written inline are.
	budget := maxExpandedNodes
	if err := resolveAliases(seq, &budget); err != nil {
		return nil, err
	}
	return seq, nil
}

// relocate moves n's positions down by lines, and reports whether n is
// free of anchors and aliases.
func relocate(n *yaml.Node, lines int) bool {
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return false
	}
	n.Line += lines
	for _, c := range n.Content {
		if !relocate(c, lines) {
			return false
		}
	}
	return true
}

package planjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Write writes doc as versioned JSON for tools, indented: documentJSON,
// which docs/plan-json.md describes. The document is written a field at
// a time, as documentJSON declares its fields, and its changes one at a
// time, byte for byte as encoding/json writes the whole documentJSON:
// whole, a 150,000-queue plan was 620 MB of JSON held in memory before
// the first byte went out.
func Write(w io.Writer, doc Document) (err error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	defer func() {
		if ferr := bw.Flush(); ferr != nil && err == nil {
			err = ferr
		}
	}()
	// Every field but the changes, which are written one at a time.
	top := newIndenter("  ")
	v := reflect.ValueOf(head(doc))
	bw.WriteString("{")
	written := 0
	for i, f := range reflect.VisibleFields(v.Type()) {
		name, omitEmpty := fieldName(f)
		field := v.Field(i)
		if omitEmpty && field.IsZero() {
			continue
		}
		if written > 0 {
			bw.WriteString(",")
		}
		written++
		bw.WriteString("\n  " + strconv.Quote(name) + ": ")
		if f.Name == "Changes" {
			err = writeChanges(bw, doc)
		} else {
			err = top.write(bw, field.Interface())
		}
		if err != nil {
			return err
		}
	}
	_, err = bw.WriteString("\n}\n")
	return err
}

// fieldName is the name encoding/json gives field f, and whether its tag
// says omitempty.
func fieldName(f reflect.StructField) (string, bool) {
	name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		name = f.Name
	}
	return name, slices.Contains(strings.Split(opts, ","), "omitempty")
}

// writeChanges writes doc's changes as the indented array encoding/json
// writes at the document's first depth, a change at a time through one
// Change, so that no change is boxed on its own.
func writeChanges(bw *bufio.Writer, doc Document) error {
	if len(doc.Changes) == 0 {
		bw.WriteString("[]")
		return nil
	}
	change := newIndenter("    ")
	bw.WriteString("[")
	var j Change
	for i := range doc.Changes {
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n    ")
		j = ChangeOf(doc.Changes[i])
		if err := change.write(bw, &j); err != nil {
			return err
		}
	}
	bw.WriteString("\n  ]")
	return nil
}

// indenter writes values as encoding/json indents them at one depth,
// through one buffer for all of them.
type indenter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newIndenter(prefix string) *indenter {
	j := &indenter{}
	j.enc = json.NewEncoder(&j.buf)
	j.enc.SetIndent(prefix, "  ")
	// Names and reasons are shown verbatim: "->" and "→" stay readable.
	j.enc.SetEscapeHTML(false)
	return j
}

// write writes v without the newline the Encoder ends it with.
func (j *indenter) write(w *bufio.Writer, v any) error {
	j.buf.Reset()
	if err := j.enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(bytes.TrimSuffix(j.buf.Bytes(), []byte("\n")))
	return err
}

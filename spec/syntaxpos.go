package spec

import (
	"errors"

	goyaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// syntaxPosition returns where goccy/go-yaml finds the syntax error in
// data, a document yaml.v3 refused. yaml.v3 reports the line where the
// enclosing block or flow began, column unknown (a missing "}" on line 5
// is reported at the list item on line 4); goccy/go-yaml names the token
// at fault. rmqtopo still parses with yaml.v3 and keeps its message; this
// second parse runs only on documents that failed, and a panic in it only
// loses the better position.
func syntaxPosition(data []byte) (line, col int, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := parser.ParseBytes(data, 0)
	var se *goyaml.SyntaxError
	if !errors.As(err, &se) || se.Token == nil || se.Token.Position == nil {
		return 0, 0, false
	}
	return se.Token.Position.Line, se.Token.Position.Column, true
}

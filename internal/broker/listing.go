package broker

import (
	"bytes"
	"encoding/json"
)

// listing is a management-API list of objects asked for with `columns`.
// An object deleted while the broker builds the list comes back with none
// of the columns, which the broker encodes as an empty JSON array: such an
// entry is skipped, as if the object had gone a moment earlier.
type listing[T any] []T

// UnmarshalJSON decodes the objects of the list and skips the empty ones.
func (l *listing[T]) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	out := make([]T, 0, len(raw))
	for _, r := range raw {
		if bytes.HasPrefix(bytes.TrimSpace(r), []byte("[")) {
			continue
		}
		var v T
		if err := json.Unmarshal(r, &v); err != nil {
			return err
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// Package english holds the few words rmqtopo's messages agree on in
// number. It imports nothing, so that every package may use it, the pure
// plan included.
package english

// Plural returns one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Package english holds the few words rmqtopo's messages agree on in
// number. It imports nothing, so that every package may use it, the pure
// plan included.
package english

import "strconv"

// Plural returns one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count returns n followed by one or many, as n requires: "1 queue",
// "2 queues". It takes any integer: counts come as int and int64.
func Count[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(int64(n), 10) + " " + many
}

package contract

import (
	"encoding/json"
	"math"
)

// Integer reads an integer as a header, a queue argument or a policy
// value holds it, from whatever carried it: an AMQP 0-9-1 field table
// (amqp091-go gives int8, int16, int32, int64, uint8, uint16 or uint32),
// AMQP 1.0 (go-amqp also gives uint64), or a JSON decoder (the
// management API, a definitions file: float64, or json.Number with
// UseNumber). It is the one reader of such integers in rmqtopo.
//
//   - Every Go integer type is its value; an unsigned one above
//     math.MaxInt64 is not read (false).
//   - A float32 or float64 is read only when it holds a whole number
//     exactly, of magnitude below 2^53: JSON has no integer type, so a
//     decoder gives 20 as 20.0. A fraction (2.5), NaN, an infinity, or a
//     magnitude of 2^53 or more (where a float64 no longer tells
//     neighbouring integers apart: 2^53+1 reads as 2^53) is not an
//     integer (false).
//   - A json.Number is read as the number it spells, by the same rules.
//   - Anything else is not an integer (false): nil, a bool, an
//     amqp091-go Decimal, and a string or []byte even when it spells a
//     number. The contract writes some counters as decimal strings
//     (HeaderAttempt, HeaderReplayCount); their readers parse the string
//     themselves (ParseAttempt) and use Integer for the rest.
//
// Integer only reads: range checks (an attempt from 1 to MaxAttempt, a
// count not below 0) are the caller's. RabbitMQ itself is stricter when
// it validates an argument it is given (rabbit_amqqueue's check_int_arg
// takes byte, short, signedint, long, unsignedbyte, unsignedshort and
// unsignedint, never a float); rmqtopo writes int64, so that only
// matters to what it reads back.
func Integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return unsigned(uint64(x))
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return unsigned(x)
	case float32:
		return whole(float64(x))
	case float64:
		return whole(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, true
		}
		f, err := x.Float64()
		if err != nil {
			return 0, false
		}
		return whole(f)
	}
	return 0, false
}

func unsigned(x uint64) (int64, bool) {
	if x > math.MaxInt64 {
		return 0, false
	}
	return int64(x), true
}

// maxExact bounds the magnitudes at which a float64 tells every integer
// from its neighbours.
const maxExact = 1 << 53

func whole(f float64) (int64, bool) {
	if f != math.Trunc(f) || math.Abs(f) >= maxExact { // NaN fails the first, ±Inf the second
		return 0, false
	}
	return int64(f), true
}
